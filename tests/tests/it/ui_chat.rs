//! The chat page end to end in headless Chromium (`tests/browser/chat.mjs`) against a
//! real hub and node, with a fake model in this process speaking Anthropic's streaming
//! wire format slowly enough to watch: a reply streams in (partial text shows before the
//! end, Markdown rendered, hostile markup inert), the owner marks `notes_create` "asks
//! first" on the settings page, the model's note waits for approval (which survives a
//! reload and is approved in the page), its risky delete of an old note is approved
//! too, and the note it made is on the notes page; on the node the
//! page says plainly that chat needs the hub while it is stopped, and chats again once
//! it is back. Screenshots of the chat page, light and dark, wide and phone-sized.

use std::time::Duration;

use hearth_tests::{
    agent_bench::anthropic_tool_turn,
    browser::{Journey, UiLab},
    fake_model::{serve_scripted, Answer, Script},
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

fn tool_answer(id: &str, name: &str, args: &Value) -> Answer {
    anthropic_tool_turn(id, name, args).into()
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
    let script = Script::default();
    let model = rt.block_on(serve_scripted(script.clone()))?;

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
    let general = hearth_tests::project_id(&projects, "general")?;
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
            Answer::words(PLAN, Duration::from_millis(120)),
            tool_answer(
                "toolu_1",
                "notes_create",
                &json!({"title": "Groceries", "content": "- oat milk\n- lemons"}),
            ),
            tool_answer("toolu_2", "notes_delete", &json!({"id": old_id})),
            Answer::words(
                "Saved your groceries and dropped the old list.",
                Duration::from_millis(20),
            ),
            Answer::words("You are welcome.", Duration::from_millis(20)),
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
