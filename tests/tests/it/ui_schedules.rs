//! The Schedules page and a task's agent job in headless Chromium
//! (`tests/browser/schedules.mjs`) against a real hub whose model is a fake in this
//! process, and a paired laptop: a schedule made through the form (a bad cron refused
//! live in the hub's words, the right one said back), listed with its describe and
//! next run, run now with its answer rendered and its conversation opened in the chat
//! page, paused and resumed; a task made an agent job every 6 hours in its editor, its
//! next run and its answer's first lines shown, on the laptop too; the schedule deleted
//! after confirming. Afterwards the hub's API agrees. Screenshots in the folder the run
//! prints.

use std::time::Duration;

use hearth_tests::{
    browser::{Journey, UiLab},
    fake_model::{serve_scripted, Answer, Script},
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

fn ok_json(what: &str, (status, body): (u16, String)) -> anyhow::Result<Value> {
    anyhow::ensure!((200..300).contains(&status), "{what}: {status} {body}");
    Ok(serde_json::from_str(&body)?)
}

#[test]
fn schedules_are_made_run_and_followed_in_the_page_and_a_task_becomes_an_agent_job(
) -> anyhow::Result<()> {
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
    // Times in a known zone, so the page's words are known.
    ok_json(
        "zone",
        lab.hub_api(
            "PATCH",
            "/api/v1/settings",
            Some(&json!({"timezone": "UTC"}).to_string()),
        )?,
    )?;
    let task = ok_json(
        "task",
        lab.hub_api(
            "POST",
            "/api/v1/tasks",
            Some(
                &json!({"name": "Weekly review", "notes": "What moved, what is stuck."})
                    .to_string(),
            ),
        )?,
    )?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Ok(mut s) = script.lock() {
        s.extend([
            Answer::words(
                "**Good morning.** Three things today:\n\n- the report\n- the plumber at 14:00\n- a walk",
                Duration::from_millis(10),
            ),
            Answer::words(
                "Weekly review done.\nSecond line.\nThird line.\nA fourth line stays in the run.",
                Duration::from_millis(10),
            ),
        ]);
    }

    let mut config = lab.config()?;
    config["task"] = Value::from(task.clone());
    Journey::new("schedules.mjs", config).run(|cmd, _| lab.control(cmd))?;
    let left = script.lock().map(|s| s.len()).unwrap_or(usize::MAX);
    assert_eq!(left, 0, "every scripted answer was asked for");

    // The hub agrees: only the task's job is left, every 6 hours, with one run.
    let page = ok_json(
        "schedules",
        lab.hub_api("GET", "/api/v1/schedules?limit=50", None)?,
    )?;
    let rows = page["data"].as_array().cloned().unwrap_or_default();
    anyhow::ensure!(rows.len() == 1, "one schedule left: {page}");
    let job = &rows[0];
    anyhow::ensure!(
        job["id"] == format!("task-{task}")
            && job["spec"] == "6h"
            && job["describe"] == "every 6 hours",
        "the task's job: {job}"
    );
    let runs = ok_json(
        "runs",
        lab.hub_api("GET", &format!("/api/v1/schedules/task-{task}/runs"), None)?,
    )?;
    anyhow::ensure!(
        runs["total"] == 1 && runs["data"][0]["status"] == "ok",
        "its run: {runs}"
    );
    Ok(())
}
