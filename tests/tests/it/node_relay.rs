//! The laptop's line to the hub's agent, end to end with separate processes. With the
//! hub stopped, a node's API creates and edits notes and tasks and answers chat and
//! approvals with 503 `hub_unreachable` at once. Once the hub starts, the edits reach it;
//! a chat sent to the node streams the fake provider's reply (a real Anthropic SSE
//! stream from 127.0.0.1) relayed over `hearth/rpc/1`; the agent's risky tool call
//! (`notes_delete`) waits for an approval given through the node; the note the agent then
//! makes appears in the node's replica, and the node's `/events` carried the turn.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use futures_util::StreamExt;
use hearth_tests::{
    agent_bench::{anthropic_text_turn, anthropic_tool_turn},
    allow, fake_model, http_request, hub_cli, set_provider_key, HubProc, NodeHome, Proc,
};
use serde_json::{json, Value};
use tokio_tungstenite::{
    client_async,
    tungstenite::{client::IntoClientRequest, http::HeaderValue, Message},
};

use crate::{bins, node_client::NodeApi, sub, tempdir};

const WAIT: Duration = Duration::from_secs(30);

fn ids_titled(page: &Value, title: &str) -> Vec<String> {
    page["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["title"] == title)
        .filter_map(|n| n["id"].as_str().map(str::to_string))
        .collect()
}

async fn until<T>(
    what: &str,
    mut probe: impl FnMut() -> futures_util::future::BoxFuture<'static, anyhow::Result<Option<T>>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = probe().await? {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_edits_reach_the_hub_and_a_relayed_chat_is_approved_from_the_node(
) -> anyhow::Result<()> {
    let replies = fake_model::Script::default();
    let model_addr = fake_model::serve_scripted(replies.clone()).await?;

    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    set_provider_key(&bins, &hub_home, "anthropic", "sk-test-relay")?;
    let node = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    let hub_id = hub_cli(&bins, &hub_home, &["id"])?.trim().to_string();
    allow(&bins, &hub_home, &node.id)?;
    let hub_port = hearth_tests::free_udp_port()?;
    let hub_addr: SocketAddr = format!("127.0.0.1:{hub_port}").parse()?;

    let _laptop: Proc = {
        let (b, home, id) = (bins.clone(), node.home.clone(), hub_id.clone());
        tokio::task::spawn_blocking(move || NodeHome::new(&b, home)?.start(&id, hub_addr)).await??
    };
    let api = NodeApi::of(&node)?;

    // The hub is out of reach: the replica answers, the agent's routes fail at once.
    let old = api
        .call(
            "POST",
            "/notes",
            Some(json!({"title": "Train notes", "content": "draft"})),
        )
        .await?;
    let train_id = old["id"].as_str().unwrap_or_default().to_string();
    api.call(
        "PATCH",
        &format!("/notes/{train_id}"),
        Some(json!({"content": {"replace": "draft, edited on the train"}})),
    )
    .await?;
    let task = api
        .call("POST", "/tasks", Some(json!({"name": "Book the hall"})))
        .await?;
    let task_id = task["id"].as_str().unwrap_or_default().to_string();
    api.call(
        "PATCH",
        &format!("/tasks/{task_id}"),
        Some(json!({"status": "complete"})),
    )
    .await?;
    for (method, path, body) in [
        ("POST", "/chat", Some(json!({"message": "hello?"}))),
        ("GET", "/approvals", None),
        ("GET", "/settings", None),
        ("GET", "/devices", None),
    ] {
        let asked = Instant::now();
        let resp = api.send(method, path, body).await?;
        let took = asked.elapsed();
        let status = resp.status().as_u16();
        let body: Value = serde_json::from_str(&resp.text().await?)?;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (503, Some("hub_unreachable")),
            "{method} {path}: {body}"
        );
        assert!(
            took < Duration::from_secs(1),
            "{method} {path} took {took:?}"
        );
    }

    // The hub starts: the offline edits reach it.
    let hub = {
        let (b, h, url) = (
            bins.clone(),
            hub_home.clone(),
            format!("http://{model_addr}"),
        );
        tokio::task::spawn_blocking(move || {
            HubProc::start_with_env(&b, &h, hub_port, &[("HEARTH_ANTHROPIC_URL", &url)])
        })
        .await??
    };
    let hub_http = hub
        .http
        .ok_or_else(|| anyhow::anyhow!("the hub serves no API"))?;
    let hub_token = hub.owner_token()?;
    let hub_api = move |method: &str, path: &str, body: Option<&str>| {
        http_request(hub_http, Some(&hub_token), method, path, body)
    };
    until("the offline edits on the hub", || {
        let (hub_api, train_id, task_id) = (hub_api.clone(), train_id.clone(), task_id.clone());
        Box::pin(async move {
            let (n, note) = hub_api("GET", &format!("/api/v1/notes/{train_id}"), None)?;
            let (t, task) = hub_api("GET", &format!("/api/v1/tasks/{task_id}"), None)?;
            Ok((n == 200
                && t == 200
                && note.contains("edited on the train")
                && task.contains("complete"))
            .then_some(()))
        })
    })
    .await?;
    let status = api.call("GET", "/status", None).await?;
    assert_eq!(status["online"], true, "{status}");

    // The owner lets the agent delete notes in `general` (a risky tool: asks first).
    let (code, projects) = hub_api("GET", "/api/v1/projects?limit=200", None)?;
    assert_eq!(code, 200, "{projects}");
    let projects: Value = serde_json::from_str(&projects)?;
    let general = hearth_tests::project_id(&projects, "general")?;
    let (code, body) = hub_api(
        "PUT",
        &format!("/api/v1/projects/{general}/tools/notes_delete"),
        Some(&json!({"allowed": true}).to_string()),
    )?;
    assert_eq!(code, 200, "{body}");
    // A note in `general`, written on the node once its replica has the project.
    until("general on the node", || {
        let api = api.clone();
        let general = general.clone();
        Box::pin(async move {
            let found = api
                .send("GET", &format!("/projects/{general}"), None)
                .await?;
            Ok((found.status() == 200).then_some(()))
        })
    })
    .await?;
    let old = api
        .call(
            "POST",
            "/notes",
            Some(json!({"title": "Old plan", "content": "drop me", "project": general})),
        )
        .await?;
    let old_id = old["id"].as_str().unwrap_or_default().to_string();
    if let Ok(mut r) = replies.lock() {
        r.extend([
            anthropic_tool_turn("toolu_1", "notes_delete", &json!({"id": old_id})).into(),
            anthropic_tool_turn(
                "toolu_2",
                "notes_create",
                &json!({"title": "Agenda", "content": "hall booked; old plan dropped"}),
            )
            .into(),
            anthropic_text_turn("Dropped the old plan and wrote the agenda.").into(),
        ]);
    }

    // The node's own event stream (from its first event) carries the relayed turn.
    let mut ws_req = format!("ws://{}/api/v1/events?after=0", api.addr).into_client_request()?;
    ws_req.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {}", api.token))?,
    );
    let (mut ws, _) = client_async(ws_req, tokio::net::TcpStream::connect(api.addr).await?).await?;

    // The relay comes back by itself: wait until the agent's routes answer.
    until("the relay", || {
        let api = api.clone();
        Box::pin(async move {
            Ok((api.send("GET", "/approvals", None).await?.status() == 200).then_some(()))
        })
    })
    .await?;

    // A chat sent to the node streams the hub's turn; the approval is given on the node.
    let resp = api
        .send(
            "POST",
            "/chat",
            Some(json!({"message": "tidy up my plans", "conversation": "laptop"})),
        )
        .await?;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let mut body = resp.bytes_stream();
    let mut pending = String::new();
    let mut kinds = Vec::new();
    let mut text = String::new();
    let deadline = Instant::now() + WAIT;
    'turn: while let Some(chunk) = tokio::time::timeout_at(deadline.into(), body.next()).await? {
        pending.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data: ") else {
                continue;
            };
            let ev: Value = serde_json::from_str(data)?;
            let kind = ev["type"].as_str().unwrap_or_default().to_string();
            match kind.as_str() {
                "text" => text.push_str(ev["text"].as_str().unwrap_or_default()),
                "tool_result" => assert_eq!(ev["is_error"], false, "{ev}"),
                "approval_requested" => {
                    assert_eq!(ev["name"], "notes_delete", "{ev}");
                    let id = ev["id"].as_str().unwrap_or_default();
                    let decided = api
                        .send(
                            "POST",
                            &format!("/approvals/{id}"),
                            Some(json!({"approve": true})),
                        )
                        .await?;
                    assert_eq!(decided.status().as_u16(), 204);
                }
                _ => {}
            }
            kinds.push(kind);
            if kinds
                .last()
                .is_some_and(|k| k == "finished" || k == "error")
            {
                break 'turn;
            }
        }
    }
    for want in [
        "started",
        "tool_call",
        "approval_requested",
        "approval_resolved",
        "tool_result",
        "finished",
    ] {
        assert!(kinds.iter().any(|k| k == want), "no {want} in {kinds:?}");
    }
    assert_eq!(text, "Dropped the old plan and wrote the agenda.");

    // What the agent did reaches the node's replica.
    until("the agent's note on the node", || {
        let api = api.clone();
        let old_id = old_id.clone();
        Box::pin(async move {
            let page = api.call("GET", "/notes?limit=200", None).await?;
            let agenda = ids_titled(&page, "Agenda");
            let gone = api
                .send("GET", &format!("/notes/{old_id}"), None)
                .await?
                .status()
                == 410;
            Ok((agenda.len() == 1 && gone).then_some(()))
        })
    })
    .await?;

    // The node's event stream saw the hub come online and the relayed approval.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(seen
        .iter()
        .any(|e: &Value| e["type"] == "hub" && e["online"] == true)
        && seen.iter().any(|e| e["type"] == "approval_resolved"))
    {
        let msg = tokio::time::timeout_at(deadline.into(), ws.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("event socket closed; saw {seen:?}"))??;
        if let Message::Text(t) = msg {
            seen.push(serde_json::from_str(t.as_str())?);
        }
    }
    let relayed = seen
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .cloned()
        .unwrap_or_default();
    assert!(
        relayed["seq"].is_u64() && relayed["hub_seq"].is_u64(),
        "{relayed}"
    );
    Ok(())
}
