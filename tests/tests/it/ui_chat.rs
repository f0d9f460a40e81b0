//! The chat page end to end in headless Chromium (`tests/browser/chat.mjs`) against a
//! real hub and node, with a fake model in this process speaking Anthropic's streaming
//! wire format slowly enough to watch: a reply streams in (partial text shows before the
//! end, Markdown rendered, hostile markup inert), the owner marks `notes_create` "asks
//! first" on the settings page, the model's note waits for approval (which survives a
//! reload and is approved in the page), its risky delete of an old note is approved
//! too, and the note it made is on the notes page; on the node the
//! page says plainly that chat needs the hub while it is stopped, and chats again once
//! it is back. Screenshots of the chat page, light and dark, wide and phone-sized.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{body::Body, response::Response, routing::post, Router};
use hearth_tests::{
    agent_bench::{anthropic_sse, anthropic_tool_turn},
    browser::{Journey, UiLab},
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

/// One scripted answer: its SSE events and the pause before each.
struct Answer {
    events: Vec<String>,
    pause: Duration,
}

type Script = Arc<Mutex<Vec<Answer>>>;

/// A text answer split into one delta per word.
fn text_answer(text: &str, pause: Duration) -> Answer {
    let mut events = vec![
        json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    ];
    events.extend(text.split_inclusive(' ').map(|word| {
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":word}})
    }));
    events.extend([
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}),
        json!({"type":"message_stop"}),
    ]);
    Answer {
        events: events
            .iter()
            .map(|e| anthropic_sse(std::slice::from_ref(e)))
            .collect(),
        pause,
    }
}

fn tool_answer(id: &str, name: &str, args: &Value) -> Answer {
    Answer {
        events: vec![anthropic_tool_turn(id, name, args)],
        pause: Duration::ZERO,
    }
}

/// Serves the script on 127.0.0.1, one answer per request, each event after its pause.
async fn serve(script: Script) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route(
        "/v1/messages",
        post(move || {
            let next = script
                .lock()
                .ok()
                .and_then(|mut s| (!s.is_empty()).then(|| s.remove(0)));
            async move {
                let Answer { events, pause } = next.unwrap_or(Answer {
                    events: Vec::new(),
                    pause: Duration::ZERO,
                });
                let body =
                    futures_util::stream::unfold(events.into_iter(), move |mut rest| async move {
                        let event = rest.next()?;
                        tokio::time::sleep(pause).await;
                        Some((Ok::<_, std::convert::Infallible>(event), rest))
                    });
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(body))
                    .unwrap_or_default()
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

fn ok_json(what: &str, (status, body): (u16, String)) -> anyhow::Result<Value> {
    anyhow::ensure!((200..300).contains(&status), "{what}: {status} {body}");
    Ok(serde_json::from_str(&body)?)
}

/// The reply the page must show growing: long enough to be seen mid-way.
const PLAN: &str = "Here is your **week**: Monday the report, Tuesday the plumber, \
Wednesday a long walk, Thursday the dentist, Friday dinner with Sam, and Sunday rest. \
<img src=x onerror=\"window.__pwned=1\"> stays text.";

#[test]
fn a_chat_streams_runs_tools_asks_approval_and_says_when_the_hub_is_away() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let script: Script = Arc::default();
    let model = rt.block_on(serve(script.clone()))?;

    let dir = tempdir();
    let url = format!("http://{model}");
    let mut lab = UiLab::start(&bins(), dir.path(), &[("HEARTH_ANTHROPIC_URL", &url)])?;
    ok_json(
        "provider key",
        lab.hub_api(
            "PUT",
            "/api/v1/settings/providers/anthropic",
            Some(&json!({"key": "sk-test-ui"}).to_string()),
        )?,
    )?;
    let projects = ok_json(
        "projects",
        lab.hub_api("GET", "/api/v1/projects?limit=200", None)?,
    )?;
    let general = projects["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["title"] == "general")
        .and_then(|p| p["id"].as_str())
        .ok_or_else(|| anyhow::anyhow!("no general project in {projects}"))?
        .to_string();
    // Deleting notes is risky and off by default: the owner lets the agent ask for it here.
    ok_json(
        "allow notes_delete",
        lab.hub_api(
            "PUT",
            &format!("/api/v1/projects/{general}/tools/notes_delete"),
            Some(&json!({"allowed": true}).to_string()),
        )?,
    )?;
    let old = ok_json(
        "old note",
        lab.hub_api(
            "POST",
            "/api/v1/notes",
            Some(
                &json!({"title": "Old list", "content": "- bread", "project": general}).to_string(),
            ),
        )?,
    )?;
    let old_id = old["id"].as_str().unwrap_or_default().to_string();

    if let Ok(mut s) = script.lock() {
        s.extend([
            text_answer(PLAN, Duration::from_millis(120)),
            tool_answer(
                "toolu_1",
                "notes_create",
                &json!({"title": "Groceries", "content": "- oat milk\n- lemons"}),
            ),
            tool_answer("toolu_2", "notes_delete", &json!({"id": old_id})),
            text_answer(
                "Saved your groceries and dropped the old list.",
                Duration::from_millis(20),
            ),
            text_answer("You are welcome.", Duration::from_millis(20)),
        ]);
    }

    let mut config = lab.config()?;
    config["old_note"] = Value::from(old_id);
    config["project"] = Value::from(general);
    Journey::new("chat.mjs", config).run(|cmd, _| lab.control(cmd))?;
    let left = script.lock().map(|s| s.len()).unwrap_or(usize::MAX);
    assert_eq!(left, 0, "every scripted answer was asked for");
    Ok(())
}
