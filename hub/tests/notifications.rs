//! The notification routes in process (no listener, no packets): the owner lists them
//! newest first with the unread count, filters unread, pages, marks by id and all; a
//! stranger gets 401 and another site riding the owner's credential 403; through the
//! rpc relay a scoped device lists, marks and streams only its subtree's notifications
//! (never one tied to no project), while a full-scope device sees them all. The
//! notifications are made the hub's own way, through the notifier.

mod api_state;

use api_state::{
    lines,
    relay_hub::{hub, Hub},
};
use axum::{
    body::Body,
    http::{Request, StatusCode},
    Router,
};
use hearth_hub::notify::{Notification, NotificationKind, NotificationRefs};
use hearth_protocol::RpcMethod;
use hearth_sync::DocId;
use serde_json::{json, Value};
use tower::ServiceExt;

impl Hub {
    async fn notify(&self, title: &str, project: Option<DocId>) -> i64 {
        self.state
            .notifier
            .notify(Notification {
                kind: NotificationKind::RunFinished,
                title: title.into(),
                body: format!("{title}: the answer"),
                project,
                refs: NotificationRefs {
                    schedule: Some("daily".into()),
                    run: Some(7),
                    conversation: Some("schedule-daily-7".into()),
                    ..NotificationRefs::default()
                },
            })
            .await
            .expect("notify")
    }
}

fn titles(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n["title"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_owner_lists_pages_filters_and_marks_notifications() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let a = h.notify("first", Some(work)).await;
    let b = h.notify("second", None).await;
    h.notify("third", Some(work)).await;

    let (s, page) = h.owner("GET", "/notifications", None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(titles(&page), ["third", "second", "first"], "newest first");
    assert_eq!(
        (page["total"].as_u64(), page["unread"].as_u64()),
        (Some(3), Some(3))
    );
    let first = &page["data"][2];
    assert_eq!(first["id"].as_i64(), Some(a));
    assert_eq!(first["kind"], "run_finished");
    assert_eq!(first["body"], "first: the answer");
    assert_eq!(first["project"], json!(work.to_string()));
    assert_eq!(
        first["refs"],
        json!({"schedule": "daily", "run": 7, "conversation": "schedule-daily-7"})
    );
    assert_eq!(
        (first["quiet"].as_bool(), first["read_at"].is_null()),
        (Some(false), true)
    );
    assert!(first["created_at"].as_i64().unwrap_or(0) > 1_700_000_000_000);

    let (_, paged) = h
        .owner("GET", "/notifications?limit=1&offset=1", None)
        .await;
    assert_eq!(
        (titles(&paged), paged["total"].as_u64()),
        (vec!["second".to_string()], Some(3))
    );
    let (s, bad) = h.owner("GET", "/notifications?limit=0", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");

    let (s, marked) = h
        .owner(
            "POST",
            "/notifications/read",
            Some(json!({ "ids": [a, b, 999] })),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{marked}");
    assert_eq!(marked, json!({ "marked": 2, "unread": 1 }));
    let (_, unread) = h.owner("GET", "/notifications?unread=true", None).await;
    assert_eq!(
        (
            titles(&unread),
            unread["total"].as_u64(),
            unread["unread"].as_u64()
        ),
        (vec!["third".to_string()], Some(1), Some(1))
    );
    let (_, all) = h.owner("GET", "/notifications", None).await;
    assert!(all["data"][2]["read_at"].as_i64().is_some(), "{all}");

    for body in [
        json!({}),
        json!({ "ids": [] }),
        json!({ "all": false }),
        json!({ "ids": [1], "all": true }),
        json!({ "every": true }),
    ] {
        let (s, v) = h
            .owner("POST", "/notifications/read", Some(body.clone()))
            .await;
        // 400, or 422 for a body of the wrong shape (the extractor's answer).
        assert!(
            s.is_client_error() && v["error"]["code"] == "bad_request",
            "{body} -> {s} {v}"
        );
    }
    let (_, v) = h
        .owner("POST", "/notifications/read", Some(json!({ "all": true })))
        .await;
    assert_eq!(v, json!({ "marked": 1, "unread": 0 }));
}

/// The status of a request with these headers and no body but `{"all": true}`.
async fn raw(router: &Router, method: &str, path: &str, headers: &[(&str, &str)]) -> StatusCode {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("/api/v1{path}"))
        .header("host", format!("127.0.0.1:{}", api_state::PORT))
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = Body::from(json!({ "all": true }).to_string());
    router
        .clone()
        .oneshot(req.body(body).expect("request"))
        .await
        .expect("infallible")
        .status()
}

#[tokio::test]
async fn a_stranger_or_a_hostile_page_reads_and_marks_nothing() {
    let h = hub().await;
    h.notify("private", None).await;
    let bearer = format!("Bearer {}", h.token);
    for (method, path) in [("GET", "/notifications"), ("POST", "/notifications/read")] {
        assert_eq!(
            raw(&h.router, method, path, &[]).await,
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
        assert_eq!(
            raw(
                &h.router,
                method,
                path,
                &[("authorization", "Bearer wrong")]
            )
            .await,
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
    }
    assert_eq!(
        raw(
            &h.router,
            "POST",
            "/notifications/read",
            &[
                ("authorization", &bearer),
                ("origin", "http://evil.example")
            ]
        )
        .await,
        StatusCode::FORBIDDEN
    );
    let (_, page) = h.owner("GET", "/notifications", None).await;
    assert_eq!(page["unread"], 1, "nothing was marked: {page}");
}

use RpcMethod::{Get, Post};

#[tokio::test]
async fn a_scoped_device_lists_and_marks_only_its_subtrees_notifications() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let clients = h.project("clients", Some(work)).await;
    let personal = h.project("personal", None).await;
    let in_root = h.notify("in root", Some(work)).await;
    let outside = h.notify("outside", Some(personal)).await;
    let hubwide = h.notify("hub-wide", None).await;
    let in_child = h.notify("in child", Some(clients)).await;
    let scoped = h.device(Some(work), false);
    let full = h.device(None, false);

    let (s, page) = h.relay(scoped, Get, "/notifications", None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(titles(&page), ["in child", "in root"]);
    assert_eq!(
        (page["total"].as_u64(), page["unread"].as_u64()),
        (Some(2), Some(2))
    );
    let (_, page) = h.relay(full, Get, "/notifications?limit=10", None).await;
    assert_eq!(
        titles(&page),
        ["in child", "hub-wide", "outside", "in root"]
    );

    // Marking by id reaches only its own; `all` too.
    let (s, v) = h
        .relay(
            scoped,
            Post,
            "/notifications/read",
            Some(json!({ "ids": [in_root, outside, hubwide] })),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v, json!({ "marked": 1, "unread": 1 }));
    let (_, v) = h
        .relay(
            scoped,
            Post,
            "/notifications/read",
            Some(json!({ "all": true })),
        )
        .await;
    assert_eq!(v, json!({ "marked": 1, "unread": 0 }));
    let (_, page) = h.owner("GET", "/notifications?unread=true", None).await;
    assert_eq!(
        titles(&page),
        ["hub-wide", "outside"],
        "the rest stays unread"
    );
    let (_, v) = h
        .relay(
            full,
            Post,
            "/notifications/read",
            Some(json!({ "ids": [outside, in_child] })),
        )
        .await;
    assert_eq!(v, json!({ "marked": 1, "unread": 1 }));
}

#[tokio::test]
async fn notification_events_reach_only_devices_whose_scope_reaches_them() {
    let h = hub().await;
    let work = h.project("work", None).await;
    let clients = h.project("clients", Some(work)).await;
    let personal = h.project("personal", None).await;
    h.notify("in root", Some(work)).await;
    h.notify("outside", Some(personal)).await;
    h.notify("hub-wide", None).await;
    h.notify("in child", Some(clients)).await;
    // Marking read tells other UIs to recount, naming nothing: full devices only.
    let (_, v) = h
        .owner("POST", "/notifications/read", Some(json!({ "all": true })))
        .await;
    assert_eq!(v["marked"], 4, "{v}");
    let (_, v) = h
        .owner("POST", "/notifications/read", Some(json!({ "all": true })))
        .await;
    assert_eq!(v["marked"], 0, "nothing left, no second event: {v}");
    let recounts = |seen: &[Value]| {
        seen.iter()
            .filter(|e| e["type"] == "notifications_read")
            .count()
    };
    let notified = |seen: &[Value]| -> Vec<String> {
        seen.iter()
            .filter(|e| e["type"] == "notification")
            .filter_map(|e| e["title"].as_str().map(str::to_string))
            .collect()
    };
    let scoped = h.device(Some(work), false);
    let seen = lines(h.relayed(scoped, Get, "/events?after=0", None).await, 10).await;
    assert_eq!(notified(&seen), ["in root", "in child"], "{seen:?}");
    assert_eq!(recounts(&seen), 0, "{seen:?}");
    let full = h.device(None, false);
    let seen = lines(h.relayed(full, Get, "/events?after=0", None).await, 10).await;
    assert_eq!(
        notified(&seen),
        ["in root", "outside", "hub-wide", "in child"],
        "{seen:?}"
    );
    let other = h.device(Some(personal), false);
    let seen = lines(h.relayed(other, Get, "/events?after=0", None).await, 10).await;
    assert_eq!(notified(&seen), ["outside"], "{seen:?}");
}
