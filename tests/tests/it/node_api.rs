//! The node serves people too: `hearth run` answers the same `/api/v1` on loopback with
//! its own owner token and cookie. With the hub stopped, notes and tasks are created and
//! edited through the node's API; the node's guard holds (421 for a foreign Host, 403
//! for a foreign Origin, 401 without its credential, and a hub's cookie is not a node's
//! or the other way round); `hearth open` logs a browser in; the node's `/events` shows
//! its documents; `/status` and `hearth status` say offline with 2 changes pending, after
//! a restart too; once the hub starts, the edits reach it and the status says online
//! with nothing pending.

use std::{net::SocketAddr, time::Duration};

use futures_util::StreamExt;
use hearth_tests::{allow, hub_cli, HubProc, NodeHome, Proc};
use serde_json::{json, Value};
use tokio_tungstenite::{
    client_async,
    tungstenite::{client::IntoClientRequest, http::HeaderValue, Message},
};

use crate::{bins, node_client::NodeApi, sub, tempdir};

const WAIT: Duration = Duration::from_secs(30);

/// Status and `error.code` of a refusal.
async fn refusal(resp: reqwest::Response) -> anyhow::Result<(u16, String)> {
    let status = resp.status().as_u16();
    let body: Value = serde_json::from_str(&resp.text().await?)?;
    Ok((
        status,
        body["error"]["code"].as_str().unwrap_or("").to_string(),
    ))
}

fn cookie_of(resp: &reqwest::Response) -> anyhow::Result<String> {
    let set = resp
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| anyhow::anyhow!("no cookie"))?;
    Ok(set.split(';').next().unwrap_or_default().to_string())
}

async fn start_node(node: &NodeHome, hub_id: &str, hub_addr: SocketAddr) -> anyhow::Result<Proc> {
    let (bins, home) = (bins(), node.home.clone());
    let hub_id = hub_id.to_string();
    tokio::task::spawn_blocking(move || {
        let n = NodeHome::new(&bins, home)?;
        n.start(&hub_id, hub_addr)
    })
    .await?
}

/// Polls the node's `/status` until `ok` says yes.
async fn status_until(api: &NodeApi, ok: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = api.call("GET", "/status", None).await?;
        if ok(&s) {
            return Ok(s);
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "status stayed {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_serves_its_replica_offline_and_its_edits_reach_the_hub() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let node = NodeHome::new(&bins, sub(&dir, "node"))?;
    // The hub's identity and address exist before it ever runs.
    let hub_id = hub_cli(&bins, &hub_home, &["id"])?.trim().to_string();
    allow(&bins, &hub_home, &node.id)?;
    let hub_addr: SocketAddr = format!("127.0.0.1:{}", hearth_tests::free_udp_port()?).parse()?;

    let mut proc = start_node(&node, &hub_id, hub_addr).await?;
    let api = NodeApi::of(&node)?;
    assert_ne!(api.addr.port(), 0);

    // The node's event stream shows its own documents.
    let mut req = format!("ws://{}/api/v1/events", api.addr).into_client_request()?;
    req.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {}", api.token))?,
    );
    let (mut ws, _) = client_async(req, tokio::net::TcpStream::connect(api.addr).await?).await?;

    // With the hub stopped: notes and tasks, created and edited.
    let note = api
        .call(
            "POST",
            "/notes",
            Some(json!({ "title": "offline note", "content": "written on the train" })),
        )
        .await?;
    let note_id = note["id"].as_str().unwrap_or_default().to_string();
    api.call(
        "PATCH",
        &format!("/notes/{note_id}"),
        Some(json!({ "content": { "replace": "written on the train, then edited" } })),
    )
    .await?;
    let task = api
        .call("POST", "/tasks", Some(json!({ "name": "offline task" })))
        .await?;
    let task_id = task["id"].as_str().unwrap_or_default().to_string();
    api.call(
        "PATCH",
        &format!("/tasks/{task_id}"),
        Some(json!({ "status": "complete" })),
    )
    .await?;
    let notes = api.call("GET", "/notes", None).await?;
    assert_eq!(notes["total"], 1, "{notes}");
    let found = api.call("GET", "/search?q=train", None).await?;
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
    let event = tokio::time::timeout(WAIT, async {
        while let Some(msg) = ws.next().await {
            if let Ok(Message::Text(t)) = msg {
                let v: Value = serde_json::from_str(&t)?;
                if v["id"] == note_id.as_str() {
                    return anyhow::Ok(v);
                }
            }
        }
        anyhow::bail!("the event socket closed")
    })
    .await??;
    assert_eq!(
        (
            event["type"].as_str(),
            event["kind"].as_str(),
            event["origin"].as_str()
        ),
        (Some("document"), Some("note"), Some("local")),
        "{event}"
    );
    assert!(event["seq"].as_u64().is_some(), "{event}");

    // The node's guard: Host, Origin, credential.
    let evil = api
        .client
        .get(api.url("/notes"))
        .header("host", format!("evil.example:{}", api.addr.port()))
        .bearer_auth(&api.token)
        .send()
        .await?;
    assert_eq!(refusal(evil).await?, (421, "misdirected_host".into()));
    let foreign = api
        .client
        .post(api.url("/notes"))
        .header("origin", format!("http://evil.example:{}", api.addr.port()))
        .header("content-type", "application/json")
        .bearer_auth(&api.token)
        .body(json!({ "title": "csrf" }).to_string())
        .send()
        .await?;
    assert_eq!(refusal(foreign).await?, (403, "foreign_origin".into()));
    let none = api.client.get(api.url("/notes")).send().await?;
    assert_eq!(refusal(none).await?, (401, "unauthenticated".into()));
    let health = api.client.get(api.url("/health")).send().await?;
    assert_eq!(health.status(), 200);

    // `hearth open` logs a browser in with the node's own cookie.
    let (b, home) = (bins.clone(), node.home.clone());
    let out = tokio::task::spawn_blocking(move || {
        let mut c = b.node(&home);
        c.args(["open", "--no-browser", "--ttl", "60"]);
        hearth_tests::run_ok(c)
    })
    .await??;
    let link = out.trim().to_string();
    assert!(
        link.starts_with(&format!("{}?link=", api.url("/auth/login"))),
        "{link}"
    );
    let login = api.client.get(&link).send().await?;
    assert_eq!(login.status(), 303);
    let node_cookie = cookie_of(&login)?;
    assert!(
        node_cookie.starts_with(&format!("hearth_node_{}=", &node.id[..10])),
        "{node_cookie}"
    );
    let r = api
        .client
        .get(api.url("/notes"))
        .header("cookie", &node_cookie)
        .send()
        .await?;
    assert_eq!(r.status(), 200);

    // Offline, two documents changed: pending 2, in the API and the CLI.
    let s = api.call("GET", "/status", None).await?;
    assert_eq!(s["online"], false, "{s}");
    assert_eq!(s["pending_changes"], 2, "{s}");
    assert_eq!(s["hub"], hub_id.as_str(), "{s}");
    assert_eq!(s["api"], format!("http://{}/api/v1", api.addr), "{s}");
    let text = node.cli(&["status"])?;
    for want in [
        "online: no",
        "pending changes: 2",
        &format!("hub: {hub_id}"),
    ] {
        assert!(text.contains(want), "{text}");
    }
    drop(ws);

    // After a restart, still offline and still 2; stopped, the CLI counts them itself.
    tokio::task::spawn_blocking(move || {
        proc.terminate();
        proc
    })
    .await?;
    let text = node.cli(&["status"])?;
    assert!(text.contains("pending changes: 2"), "{text}");
    assert!(text.contains("online: no"), "{text}");
    let _proc = start_node(&node, &hub_id, hub_addr).await?;
    let api = NodeApi::of(&node)?;
    let s = api.call("GET", "/status", None).await?;
    assert_eq!(
        (s["online"].clone(), s["pending_changes"].clone()),
        (json!(false), json!(2)),
        "{s}"
    );

    // The hub starts: the edits reach it, and the node says online with nothing pending.
    let (b, h) = (bins.clone(), hub_home.clone());
    let hub =
        tokio::task::spawn_blocking(move || HubProc::start(&b, &h, hub_addr.port())).await??;
    let s = status_until(&api, |s| s["online"] == true && s["pending_changes"] == 0).await?;
    assert!(s["last_synced_at"].as_i64().is_some(), "{s}");
    assert_eq!(s["session_version"], 1, "{s}");
    let (code, body) = hub.api("GET", &format!("/api/v1/notes/{note_id}"), None)?;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("then edited"), "{body}");
    let (code, body) = hub.api("GET", &format!("/api/v1/tasks/{task_id}"), None)?;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("complete"), "{body}");
    let text = node.cli(&["status"])?;
    for want in [
        "online: yes",
        "pending changes: 0",
        "sync: caught-up on sync 1",
    ] {
        assert!(text.contains(want), "{text}");
    }

    // A hub's session cookie is not the node's, nor the other way round.
    let (b, h) = (bins.clone(), hub_home.clone());
    let hub_link = tokio::task::spawn_blocking(move || {
        hub_cli(&b, &h, &["open", "--no-browser", "--ttl", "60"])
    })
    .await??;
    let hub_cookie = cookie_of(&api.client.get(hub_link.trim()).send().await?)?;
    assert!(hub_cookie.starts_with("hearth_hub_"), "{hub_cookie}");
    let r = api
        .client
        .get(api.url("/notes"))
        .header("cookie", &hub_cookie)
        .send()
        .await?;
    assert_eq!(refusal(r).await?, (401, "unauthenticated".into()));
    let hub_http = hub.http.ok_or_else(|| anyhow::anyhow!("no hub HTTP"))?;
    let r = api
        .client
        .get(format!("http://{hub_http}/api/v1/notes"))
        .header("cookie", &node_cookie)
        .send()
        .await?;
    assert_eq!(refusal(r).await?, (401, "unauthenticated".into()));
    // The node's token is not the hub's either.
    let r = api
        .client
        .get(format!("http://{hub_http}/api/v1/notes"))
        .bearer_auth(&api.token)
        .send()
        .await?;
    assert_eq!(refusal(r).await?, (401, "unauthenticated".into()));

    // Live: a note made on the hub arrives; one made on the node is confirmed.
    let (code, _) = hub.api(
        "POST",
        "/api/v1/notes",
        Some(&json!({ "title": "from home" }).to_string()),
    )?;
    assert_eq!(code, 201);
    api.call(
        "POST",
        "/notes",
        Some(json!({ "title": "from the laptop" })),
    )
    .await?;
    status_until(&api, |s| s["pending_changes"] == 0).await?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let notes = api.call("GET", "/notes", None).await?;
        if notes["total"] == 3 {
            break;
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "{notes}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
