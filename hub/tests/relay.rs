//! Relayed requests in process (no QUIC, no listener): what `rpc_service::Relay` answers
//! a device, judged on the device's current grant in the registry. The relay table names
//! only real hub routes; a scoped device reaches only its subtree and none of settings,
//! devices or the audit log; widening power needs an admin device; the admin flag is the
//! owner's alone; revoked keys and unrelayed routes are refused; the event stream is
//! filtered for the device.

mod api_state;

use api_state::{lines, relay_hub::hub};
use std::{collections::BTreeSet, time::Duration};

use axum::http::StatusCode;
use futures_util::StreamExt;
use hearth_hub::{api, events::ChatKey};
use hearth_protocol::RpcMethod;
use hearth_sync::DocId;
use iroh::SecretKey;
use serde_json::{json, Value};

use RpcMethod::{Delete, Get, Patch, Post, Put};

#[tokio::test]
async fn every_relayed_route_is_a_real_hub_route() {
    let h = hub().await;
    let served: BTreeSet<(&str, &str)> = api::routes(&h.state)
        .ops()
        .iter()
        .map(|op| (op.verb.as_str(), op.path))
        .collect();
    for r in hearth_ui::RELAYED {
        assert!(
            served.contains(&(r.verb.as_str(), r.path)),
            "{} {} is relayed but the hub serves no such route",
            r.verb.as_str(),
            r.path
        );
        assert!(
            !r.path.starts_with("/auth"),
            "owner sessions are never relayed"
        );
    }
}

#[tokio::test]
async fn a_scoped_device_reaches_its_subtree_only() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let clients = h.project("clients", Some(work)).await;
    let personal = h.project("personal", None).await;
    let d = h.device(Some(work), false);

    // Conversations: its root and a subproject, yes; another project, no (existing or not).
    for p in [work, clients] {
        let path = format!("/projects/{p}/conversations");
        assert_eq!(h.code(d, Get, &path, None).await, "ok", "{path}");
    }
    for path in [
        format!("/projects/{personal}/conversations"),
        format!("/projects/{personal}/conversations/main/messages"),
        format!("/projects/{}/conversations", DocId([7; 16])),
    ] {
        assert_eq!(h.code(d, Get, &path, None).await, "out_of_scope", "{path}");
    }
    let archive = json!({ "archived": true });
    assert_eq!(
        h.code(
            d,
            Patch,
            &format!("/projects/{personal}/conversations/main"),
            Some(archive)
        )
        .await,
        "out_of_scope"
    );
    // Chat and abort elsewhere, by id or by name.
    for project in [personal.to_string(), "personal".into(), "general".into()] {
        let body = json!({ "message": "hi", "project": project });
        assert_eq!(
            h.code(d, Post, "/chat", Some(body)).await,
            "out_of_scope",
            "{project}"
        );
    }
    assert_eq!(
        h.code(d, Post, "/chat/main/abort?project=personal", None)
            .await,
        "out_of_scope"
    );
    assert_eq!(
        h.code(d, Post, "/chat/main/abort?project=clients", None)
            .await,
        "ok"
    );
    // Usage: one project of its subtree at a time.
    assert_eq!(h.code(d, Get, "/usage", None).await, "out_of_scope");
    assert_eq!(
        h.code(d, Get, &format!("/usage?project={personal}"), None)
            .await,
        "out_of_scope"
    );
    assert_eq!(
        h.code(d, Get, &format!("/usage?project={clients}"), None)
            .await,
        "ok"
    );
    // Settings, devices and the audit log: not for a scoped device, admin or not.
    let admin_scoped = h.device(Some(work), true);
    for who in [d, admin_scoped] {
        for (m, path) in [
            (Get, "/settings"),
            (Get, "/settings/providers"),
            (Get, "/devices"),
            (Get, "/devices/pending"),
            (Get, "/audit"),
        ] {
            assert_eq!(h.code(who, m, path, None).await, "out_of_scope", "{path}");
        }
        let tools = format!("/projects/{work}/tools");
        assert_eq!(h.code(who, Get, &tools, None).await, "out_of_scope");
    }
    // Approvals: none outside its subtree exist for it.
    assert_eq!(
        h.code(d, Post, "/approvals/abc", Some(json!({ "approve": true })))
            .await,
        "not_found"
    );
}

#[tokio::test]
async fn a_scoped_device_chats_in_its_scope_root_by_default() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let d = h.device(Some(work), false);
    let resp = h
        .relayed(d, Post, "/chat", Some(json!({ "message": "hello" })))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_secs(10), body.next())
        .await
        .expect("an event in time")
        .expect("an event")
        .expect("bytes");
    let text = String::from_utf8_lossy(&first);
    let event: Value = serde_json::from_str(
        text.trim()
            .strip_prefix("data: ")
            .expect("a server-sent event"),
    )
    .expect("json");
    assert_eq!(event["project"], work.to_string(), "{event}");
    assert_ne!(event["project"], h.state.chat.general.to_string());
}

#[tokio::test]
async fn widening_power_needs_an_admin_device_and_admin_is_the_owners() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let plain = h.device(None, false);
    let admin = h.device(None, true);
    let other = h.device(None, false);
    let approve = json!({ "code": "BBBB-BBBB" });
    let allow = json!({ "allowed": true });
    let tool = format!("/projects/{work}/tools/notes_create");
    let widening: Vec<(RpcMethod, String, Option<Value>)> = vec![
        (Post, "/devices/approve".into(), Some(approve.clone())),
        (Post, "/devices/deny".into(), Some(approve.clone())),
        (Put, tool.clone(), Some(allow.clone())),
        (
            Put,
            "/settings/providers/anthropic".into(),
            Some(json!({ "key": "sk" })),
        ),
        (
            Put,
            format!("/projects/{work}/secrets/token"),
            Some(json!({ "value": "v" })),
        ),
        (
            Patch,
            "/settings".into(),
            Some(json!({ "instructions": "x" })),
        ),
        (
            Patch,
            format!("/devices/{other}"),
            Some(json!({ "name": "mine" })),
        ),
        (Delete, format!("/devices/{other}"), None),
    ];
    for (m, path, body) in &widening {
        assert_eq!(
            h.code(plain, *m, path, body.clone()).await,
            "admin_required",
            "{path}"
        );
    }
    // Reading is fine for a full-scope device.
    for path in [
        "/settings",
        "/devices",
        "/devices/pending",
        "/audit",
        "/usage",
    ] {
        assert_eq!(h.code(plain, Get, path, None).await, "ok", "{path}");
    }
    // An admin device passes the policy (the code is unknown: the handler says so).
    assert_eq!(
        h.code(admin, Post, "/devices/approve", Some(approve)).await,
        "not_found"
    );
    assert_eq!(h.code(admin, Put, &tool, Some(allow)).await, "ok");
    let (_, tools) = h
        .owner("GET", &format!("/projects/{work}/tools?limit=100"), None)
        .await;
    let granted = tools["data"]
        .as_array()
        .expect("tools")
        .iter()
        .any(|t| t["name"] == "notes_create" && t["allowed"] == true);
    assert!(granted, "the admin device's change took effect: {tools}");
    // The admin flag is the owner's: no device sets it, not even an admin.
    for who in [admin, plain] {
        let (s, v) = h
            .relay(
                who,
                Patch,
                &format!("/devices/{other}"),
                Some(json!({ "admin": true })),
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    }
    assert_eq!(
        h.code(
            admin,
            Patch,
            &format!("/devices/{admin}"),
            Some(json!({ "admin": false }))
        )
        .await,
        "owner_only"
    );
    let (s, v) = h
        .owner(
            "PATCH",
            &format!("/devices/{other}"),
            Some(json!({ "admin": true })),
        )
        .await;
    assert_eq!(
        (s, v["admin"].clone()),
        (StatusCode::OK, json!(true)),
        "{v}"
    );
    // Every request is judged on the current grant: taking the flag takes effect at once.
    h.state
        .registry
        .set_admin(&admin.to_string(), false)
        .expect("take admin");
    assert_eq!(
        h.code(admin, Put, &tool, Some(json!({ "allowed": false })))
            .await,
        "admin_required"
    );
}

#[tokio::test]
async fn revoked_keys_and_unrelayed_routes_are_refused() {
    let h = hub().await;
    let d = h.device(None, true);
    for (m, path) in [
        (Get, "/notes"),
        (Get, "/projects"),
        (Post, "/auth/logout"),
        (Get, "/health"),
        (Get, "/openapi.json"),
        (Delete, "/chat"),
    ] {
        assert_eq!(h.code(d, m, path, None).await, "not_relayed", "{path}");
    }
    let stranger = SecretKey::generate().public();
    assert_eq!(h.code(stranger, Get, "/settings", None).await, "revoked");
    h.state.registry.revoke(&d.to_string()).expect("revoke");
    assert_eq!(h.code(d, Get, "/settings", None).await, "revoked");
    // Narrowing takes effect on the next request too.
    let n = h.device(None, false);
    assert_eq!(h.code(n, Get, "/devices", None).await, "ok");
    let work = h.project("work", None).await;
    h.state
        .registry
        .set_scope(&n.to_string(), Some(&work.to_string()))
        .expect("narrow");
    assert_eq!(h.code(n, Get, "/devices", None).await, "out_of_scope");
}

#[tokio::test]
async fn the_event_stream_is_filtered_for_the_device() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let clients = h.project("clients", Some(work)).await;
    let personal = h.project("personal", None).await;
    let events = h.state.chat.events.clone();
    let chat = |project: DocId, text: &str| {
        events.publish(
            json!({ "type": "text", "text": text, "project": project.to_string(), "conversation": "c" }),
            Some(ChatKey {
                project,
                conversation: "c".into(),
                terminal: false,
            }),
        );
    };
    chat(work, "in root");
    chat(personal, "outside");
    chat(clients, "in child");
    events.publish(
        json!({ "type": "device", "event": "paired", "id": "x", "name": "y" }),
        None,
    );
    events.publish(
        json!({ "type": "document", "id": "x", "kind": "note", "origin": "local", "deleted": false }),
        None,
    );
    let scoped = h.device(Some(work), false);
    let full = h.device(None, false);
    let seen = lines(h.relayed(scoped, Get, "/events?after=0", None).await, 10).await;
    let texts: Vec<&str> = seen.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(texts, ["in root", "in child"], "{seen:?}");
    assert!(seen
        .iter()
        .all(|e| e["type"] != "device" && e["type"] != "document"));
    let seen = lines(h.relayed(full, Get, "/events?after=0", None).await, 10).await;
    let kinds: Vec<&str> = seen.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["text", "text", "text", "device"], "{seen:?}");
    // Resuming after a seq skips what came before it.
    let after = seen[1]["seq"].as_u64().expect("seq");
    let rest = lines(
        h.relayed(full, Get, &format!("/events?after={after}"), None)
            .await,
        10,
    )
    .await;
    assert_eq!(
        rest.first().map(|e| e["text"].clone()),
        Some(json!("in child"))
    );
    assert_eq!(
        h.code(full, Get, "/events?after=x", None).await,
        "bad_request"
    );
}
