//! The agent end to end, with separate processes: a chat turn through `hearth-hub chat`
//! in which the model (a fake Anthropic server on 127.0.0.1 speaking its streaming wire
//! format) calls `notes_create`; the note then reaches a paired node by replication.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::Body, extract::State, http::HeaderMap, response::Response, routing::post, Router,
};
use hearth_tests::{
    agent_bench::{anthropic_text_turn, anthropic_tool_turn},
    allow, eventually, run_ok, set_provider_key, HubProc, NodeHome,
};
use serde_json::{json, Value};

use crate::{bins, json_lines, sub, tempdir};

type Seen = Arc<Mutex<Vec<(String, Value)>>>;

async fn answer(
    State((replies, seen)): State<(Arc<Mutex<Vec<String>>>, Seen)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if let Ok(mut s) = seen.lock() {
        s.push((key, serde_json::from_str(&body).unwrap_or(Value::Null)));
    }
    let next = replies
        .lock()
        .ok()
        .and_then(|mut r| (!r.is_empty()).then(|| r.remove(0)))
        .unwrap_or_default();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(next))
        .unwrap_or_default()
}

#[test]
fn a_chat_turn_creates_a_note_that_reaches_a_paired_node() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let replies = Arc::new(Mutex::new(vec![
        anthropic_tool_turn(
            "toolu_1",
            "notes_create",
            &json!({"title": "Groceries", "content": "- oat milk\n- lemons"}),
        ),
        anthropic_text_turn("Saved your groceries."),
    ]));
    let seen: Seen = Arc::default();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let model_addr = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/messages", post(answer))
        .with_state((replies, seen.clone()));
    rt.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    // The owner stores the provider key (encrypted) before the hub starts.
    set_provider_key(&bins, &hub_home, "anthropic", "sk-test-123")?;
    let laptop = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    allow(&bins, &hub_home, &laptop.id)?;

    std::env::set_var("HEARTH_ANTHROPIC_URL", format!("http://{model_addr}"));
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    std::env::remove_var("HEARTH_ANTHROPIC_URL");
    let node = laptop.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;

    let mut chat = bins.hub(&hub_home);
    chat.args([
        "chat",
        "--message",
        "remember my groceries: oat milk and lemons",
    ]);
    let printed = run_ok(chat)?;
    assert!(printed.contains("⚙ notes_create"), "{printed}");
    assert!(printed.contains("Saved your groceries."), "{printed}");

    eventually(Duration::from_secs(20), || {
        Ok(json_lines(&laptop.cli(&["note", "list", "--json"])?)
            .iter()
            .any(|n| n["title"] == "Groceries"))
    })?;
    let seen = seen.lock().map_err(|_| anyhow::anyhow!("lock"))?;
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter().all(|(key, _)| key == "sk-test-123"),
        "the stored key is used"
    );
    assert_eq!(
        seen[1].1["messages"][2]["content"][0]["type"],
        "tool_result"
    );
    // The key never shows up in the hub's logs.
    assert!(!hub.proc.stderr_text().contains("sk-test-123"));
    Ok(())
}

#[test]
fn a_peer_made_general_project_does_not_capture_the_hubs_chat() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let replies = Arc::new(Mutex::new(vec![
        anthropic_tool_turn(
            "toolu_1",
            "notes_create",
            &json!({"title": "Private", "content": "for the owner only"}),
        ),
        anthropic_text_turn("Noted."),
    ]));
    let seen: Seen = Arc::default();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let model_addr = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/messages", post(answer))
        .with_state((replies, seen));
    rt.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    set_provider_key(&bins, &hub_home, "anthropic", "sk-test-123")?;
    let hub_docs = NodeHome::new(&bins, hub_home.clone())?; // `hearth` on the hub's store
    let laptop = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    allow(&bins, &hub_home, &laptop.id)?;

    let env = [("HEARTH_ANTHROPIC_URL", format!("http://{model_addr}"))];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut hub = HubProc::start_with_env(&bins, &hub_home, 0, &env)?;
    let projects = hub_docs.cli(&["project", "list"])?;
    let general = projects
        .lines()
        .find(|l| l.split('\t').nth(1) == Some("general"))
        .and_then(|l| l.split('\t').next())
        .ok_or_else(|| anyhow::anyhow!("no general project in {projects:?}"))?
        .to_string();

    // The paired laptop makes a root project of its own named general.
    let node = laptop.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let rogue = laptop
        .cli(&["project", "add", "general"])?
        .trim()
        .to_string();
    eventually(Duration::from_secs(20), || {
        Ok(hub_docs.cli(&["project", "list"])?.contains(&rogue))
    })?;
    // A restart of the hub keeps the general project it remembers.
    hub.proc.terminate();
    let hub = HubProc::start_with_env(&bins, &hub_home, 0, &env)?;

    let mut chat = bins.hub(&hub_home);
    chat.args(["chat", "--message", "note this privately"]);
    let printed = run_ok(chat)?;
    assert!(printed.contains("Noted."), "{printed}");
    let notes = json_lines(&hub_docs.cli(&["note", "list", "--json"])?);
    let id = notes
        .iter()
        .find(|n| n["title"] == "Private")
        .and_then(|n| n["id"].as_str())
        .ok_or_else(|| anyhow::anyhow!("no note in {notes:?}"))?
        .to_string();
    let shown: Value = serde_json::from_str(&hub_docs.cli(&["note", "show", &id, "--json"])?)?;
    assert_eq!(
        shown["project"],
        general.as_str(),
        "the owner's general project"
    );
    assert_ne!(shown["project"], rogue.as_str());
    drop(hub);
    Ok(())
}
