//! A task's agent job across processes: a task marked an agent job on a node (through
//! the node's API) becomes a schedule on the hub, with its next due; editing its interval
//! and then its due on the node moves that next due on the hub; clearing `agent_job`
//! removes the schedule. And `hearth task done` on a node moves a recurring task's due
//! date on instead of completing it.

use std::time::Duration;

use hearth_tests::{allow, hub_cli, HubProc, NodeHome};
use serde_json::{json, Value};

use crate::{bins, node_client::NodeApi, sub, tempdir};

const WAIT: Duration = Duration::from_secs(30);
const DAY: i64 = 86_400_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The hub's schedules following `task`, polled until `ok` accepts them.
async fn schedules_until(
    hub: &HubProc,
    task: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = hub.api("GET", &format!("/api/v1/schedules?task={task}"), None)?;
        anyhow::ensure!(status == 200, "GET /schedules: {status} {body}");
        let page: Value = serde_json::from_str(&body)?;
        let rows = page["data"].as_array().cloned().unwrap_or_default();
        if ok(&rows) {
            return Ok(rows);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the hub's schedules for {task} stayed {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_job_edited_on_a_node_is_rescheduled_on_the_hub() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let node = NodeHome::new(&bins, sub(&dir, "node"))?;
    hub_cli(&bins, &hub_home, &["id"])?;
    allow(&bins, &hub_home, &node.id)?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    // Due times in a known zone.
    let (status, body) = hub.api("PATCH", "/api/v1/settings", Some(r#"{"timezone":"UTC"}"#))?;
    anyhow::ensure!(status == 200, "settings: {status} {body}");
    let proc = node.start(&hub.id, hub.addr)?;
    proc.wait_line(WAIT, |l| l.starts_with("hearth caught-up"))?;
    let api = NodeApi::of(&node)?;

    let task = api
        .call(
            "POST",
            "/tasks",
            Some(json!({"name": "Morning briefing", "notes": "Weather and calendar."})),
        )
        .await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // An agent job every day, no due: first due one day after the hub saw it.
    let before = now_ms();
    api.call(
        "PATCH",
        &format!("/tasks/{task}"),
        Some(json!({"agent_job": true, "interval": "1d"})),
    )
    .await?;
    let rows = schedules_until(&hub, &task, |r| r.len() == 1).await?;
    let s = &rows[0];
    assert_eq!(
        (
            s["id"].as_str(),
            s["kind"].as_str(),
            s["spec"].as_str(),
            s["task"].as_str()
        ),
        (
            Some(format!("task-{task}").as_str()),
            Some("interval"),
            Some("1d"),
            Some(task.as_str())
        ),
        "{s}"
    );
    assert_eq!(s["prompt"], "Morning briefing\n\nWeather and calendar.");
    let next = s["next_due"].as_i64().unwrap_or_default();
    assert!(
        next >= before + DAY && next <= now_ms() + DAY,
        "next due {next} is a day after {before}"
    );

    // Every two days instead: re-anchored, two days from the edit.
    let before = now_ms();
    api.call(
        "PATCH",
        &format!("/tasks/{task}"),
        Some(json!({"interval": "2d"})),
    )
    .await?;
    let rows = schedules_until(&hub, &task, |r| {
        r.first().is_some_and(|s| s["spec"] == "2d")
    })
    .await?;
    let next = rows[0]["next_due"].as_i64().unwrap_or_default();
    assert!(
        next >= before + 2 * DAY && next <= now_ms() + 2 * DAY,
        "next due {next} is two days after {before}"
    );

    // A due: the runs keep its time of day, the first at the due itself.
    api.call(
        "PATCH",
        &format!("/tasks/{task}"),
        Some(json!({"due": "2031-06-01T08:00"})),
    )
    .await?;
    // 2031-06-01 08:00 UTC.
    schedules_until(&hub, &task, |r| {
        r.first()
            .is_some_and(|s| s["next_due"].as_i64() == Some(1_938_067_200_000))
    })
    .await?;

    // No longer an agent job: the schedule goes.
    api.call(
        "PATCH",
        &format!("/tasks/{task}"),
        Some(json!({"agent_job": false})),
    )
    .await?;
    schedules_until(&hub, &task, <[Value]>::is_empty).await?;

    // A person's recurring task done on the node: its due moves on, it stays open.
    let plants = node
        .cli(&[
            "task",
            "add",
            "water the plants",
            "--interval",
            "3d",
            "--due",
            "2020-01-01",
        ])?
        .trim()
        .to_string();
    let today = hearth_ui::local_now();
    let out = node.cli(&["task", "done", &plants])?;
    let next = hearth_sync::entity::next_due(Some("2020-01-01"), "3d", &today);
    assert_eq!(out.trim(), format!("done {plants}, next due {next}"));
    let read = api.call("GET", &format!("/tasks/{plants}"), None).await?;
    assert_eq!(
        (read["status"].as_str(), read["due"].as_str()),
        (Some("recurring"), Some(next.as_str()))
    );
    Ok(())
}
