//! The agent loop against the fake model server (Anthropic wire format): a tool round
//! that creates a note, a risky tool that waits for approval (denied, timed out,
//! approved), the step limit, and the audit log that records every run.

mod common;

use std::time::Duration;

use common::{serve, Reply};
use hearth_hub::agent::{
    provider::{ProviderClient, ProviderKind, Retry},
    runner::{Agent, AgentConfig, AgentEvent},
};
use hearth_sync::{DocumentStore, Filter, Kind, Note, Project};
use serde_json::{json, Value};

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn tool_turn(id: &str, name: &str, input: Value) -> Reply {
    let args = input.to_string();
    let mid = args.len() / 2;
    Reply::Sse(sse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"usage":{"input_tokens":50,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":&args[..mid]}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":&args[mid..]}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]))
}

fn text_turn(text: &str) -> Reply {
    Reply::Sse(sse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"usage":{"input_tokens":60,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]))
}

struct Setup {
    _dir: tempfile::TempDir,
    store: DocumentStore,
    project: hearth_sync::DocId,
    agent: std::sync::Arc<Agent>,
    fake: common::Fake,
}

async fn setup(replies: Vec<Reply>, config: AgentConfig) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
    let project = store
        .create(Project {
            name: "general".into(),
            parent: None,
            instructions: "Be brief.".into(),
        })
        .await
        .expect("project")
        .id;
    let (base, fake) = serve(replies).await;
    let provider = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        &base,
        Some("k".into()),
    )
    .expect("provider")
    .with_retry(Retry {
        attempts: 2,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(10),
    });
    let agent =
        Agent::new(store.clone(), provider, config, &dir.path().join("hub.db")).expect("agent");
    Setup {
        _dir: dir,
        store,
        project,
        agent: std::sync::Arc::new(agent),
        fake,
    }
}

#[tokio::test]
async fn a_tool_round_creates_a_note_and_the_turn_ends() {
    let s = setup(
        vec![
            tool_turn(
                "toolu_1",
                "notes_create",
                json!({"title": "Tea", "content": "likes oolong"}),
            ),
            text_turn("Noted."),
        ],
        AgentConfig::default(),
    )
    .await;
    let mut events = s.agent.subscribe();
    let out = s
        .agent
        .invoke("cli", s.project, "remember I like oolong")
        .await
        .expect("invoke");
    assert_eq!(
        (out.text.as_str(), out.reason.as_str(), out.steps),
        ("Noted.", "end_turn", 2)
    );
    let notes = s.store.list(Filter::new(Kind::Note)).await.expect("list");
    assert_eq!(notes.total, 1);
    let note = s.store.get::<Note>(notes.data[0].id).await.expect("note");
    assert_eq!(
        (note.value.content.as_str(), note.value.project),
        ("likes oolong", Some(s.project))
    );
    // The second request carried the tool result back to the model.
    let reqs = s.fake.requests.lock().expect("lock");
    let last = &reqs[1].1["messages"];
    assert_eq!(last[1]["content"][0]["type"], "tool_use");
    assert_eq!(last[2]["content"][0]["type"], "tool_result");
    assert_eq!(last[2]["content"][0]["is_error"], false);
    assert!(reqs[0].1["system"][1]["text"]
        .as_str()
        .expect("dynamic")
        .contains("Be brief."));
    let mut seen = Vec::new();
    while let Ok(ev) = events.try_recv() {
        seen.push(ev);
    }
    assert!(seen
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolCall { name, .. } if name == "notes_create")));
    assert!(
        matches!(seen.last(), Some(AgentEvent::Finished { reason, .. }) if reason == "end_turn")
    );
    assert_eq!(s.agent.audit_entries().expect("audit").len(), 1);
}

async fn risky_round(decision: Option<bool>, timeout: Duration) -> (Setup, Vec<Value>) {
    let s = setup(
        vec![],
        AgentConfig {
            approval_timeout: timeout,
            extra_tools: vec!["notes_delete".into()],
            ..AgentConfig::default()
        },
    )
    .await;
    let note = s
        .store
        .create(Note {
            project: Some(s.project),
            title: "Keep".into(),
            content: "precious".into(),
        })
        .await
        .expect("note");
    if let Ok(mut r) = s.fake.replies.lock() {
        r.push(tool_turn(
            "toolu_d",
            "notes_delete",
            json!({"id": note.id.to_string()}),
        ));
        r.push(text_turn("OK."));
    }
    let mut events = s.agent.subscribe();
    let agent = s.agent.clone();
    let decider = tokio::spawn(async move {
        while let Ok(ev) = events.recv().await {
            if let AgentEvent::ApprovalRequested { id, name, .. } = &ev {
                assert_eq!(name, "notes_delete");
                if let Some(d) = decision {
                    assert!(agent.decide(*id, d));
                }
            }
            if matches!(ev, AgentEvent::Finished { .. }) {
                break;
            }
        }
    });
    s.agent
        .invoke("cli", s.project, "delete that note")
        .await
        .expect("invoke");
    decider.await.expect("decider");
    let bodies = s
        .fake
        .requests
        .lock()
        .expect("lock")
        .iter()
        .map(|r| r.1.clone())
        .collect();
    (s, bodies)
}

#[tokio::test]
async fn a_risky_tool_waits_and_denial_or_timeout_reach_the_model() {
    for (decision, timeout) in [
        (Some(false), Duration::from_secs(10)),
        (None, Duration::from_millis(100)),
    ] {
        let (s, bodies) = risky_round(decision, timeout).await;
        let result = &bodies[1]["messages"][2]["content"][0];
        assert_eq!(result["is_error"], true);
        assert_eq!(result["content"], "the owner denied this tool call");
        assert_eq!(
            s.store
                .list(Filter::new(Kind::Note))
                .await
                .expect("list")
                .total,
            1,
            "nothing deleted"
        );
        let audit = s.agent.audit_entries().expect("audit");
        assert_eq!(
            audit,
            vec![(
                "notes_delete".to_string(),
                "the owner denied this tool call".to_string(),
                true
            )]
        );
    }
    let (s, bodies) = risky_round(Some(true), Duration::from_secs(10)).await;
    assert_eq!(bodies[1]["messages"][2]["content"][0]["is_error"], false);
    assert_eq!(
        s.store
            .list(Filter::new(Kind::Note))
            .await
            .expect("list")
            .total,
        0,
        "approved: deleted"
    );
}

#[tokio::test]
async fn the_step_limit_ends_a_looping_model() {
    let replies = (0..5)
        .map(|i| tool_turn(&format!("t{i}"), "notes_query", json!({})))
        .collect();
    let s = setup(
        replies,
        AgentConfig {
            max_steps: 3,
            ..AgentConfig::default()
        },
    )
    .await;
    let out = s
        .agent
        .invoke("loop", s.project, "list forever")
        .await
        .expect("invoke");
    assert_eq!((out.reason.as_str(), out.steps), ("step_limit", 3));
    assert_eq!(s.agent.audit_entries().expect("audit").len(), 3);
}
