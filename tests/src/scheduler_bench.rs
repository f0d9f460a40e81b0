//! `hearth-bench scheduler`: how late scheduled runs start, and what schedules cost in
//! memory, on a real `hearth-hub` process with a fast local fake model (127.0.0.1).
//!
//! - Delay: N schedules (10 as the reference, then 1,000) written into hub.db while the
//!   hub runs (one transaction, as `hearth-hub schedules add` would write them one by
//!   one), due over a 3 s window starting 4 s later; the delay of a run is its
//!   `started_at - due_at` in `schedule_runs`. Runs are at most 4 at once (the
//!   scheduler's default), so with many due together the delay is mostly queueing;
//!   the same number due over 60 s shows what the scheduler itself adds.
//! - Memory: the hub's VmRSS with no schedules, then with 10,000 loaded (due in a year).
//!
//! Prints `name value unit` lines. Never reaches beyond loopback.

use std::{
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context};
use rusqlite::params;

use crate::{figure, hub_cli, percentile, set_provider_key, Binaries, HubProc};

fn now_ms() -> anyhow::Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// Writes `n` interval schedules named `<prefix>-<i>` in `project`, the i-th first due
/// at `due(i)`, in one transaction.
fn insert(
    hub_db: &Path,
    prefix: &str,
    n: usize,
    project: &str,
    due: impl Fn(usize) -> i64,
) -> anyhow::Result<()> {
    let mut conn = rusqlite::Connection::open(hub_db)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare(
            "INSERT INTO schedules (id, name, project, task, kind, spec, tz, prompt, model,
                auto_approve, missed, catch_up_max, approval_wait_secs, paused, anchor,
                next_due, last_run_at, created_at, updated_at)
             VALUES (?1, ?1, ?2, NULL, 'interval', '1y', '', 'Status?', NULL, '[]',
                'run_once', 3, 86400, 0, ?3, ?3, NULL, ?4, ?4)",
        )?;
        let now = now_ms()?;
        for i in 0..n {
            let at = due(i);
            stmt.execute(params![format!("{prefix}-{i}"), project, at, now])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// The delays (ms) of the runs of schedules `<prefix>-*`, once `n` of them ended.
fn delays(hub_db: &Path, prefix: &str, n: usize, timeout: Duration) -> anyhow::Result<Vec<f64>> {
    let conn = rusqlite::Connection::open(hub_db)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let pattern = format!("{prefix}-%");
    let deadline = Instant::now() + timeout;
    loop {
        let done: i64 = conn.query_row(
            "SELECT COUNT(*) FROM schedule_runs WHERE schedule LIKE ?1 AND ended_at IS NOT NULL",
            [&pattern],
            |r| r.get(0),
        )?;
        if done as usize >= n {
            break;
        }
        if Instant::now() > deadline {
            bail!("only {done} of {n} runs ended within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let failed: i64 = conn.query_row(
        "SELECT COUNT(*) FROM schedule_runs WHERE schedule LIKE ?1 AND status != 'ok'",
        [&pattern],
        |r| r.get(0),
    )?;
    if failed > 0 {
        bail!("{failed} runs did not end ok");
    }
    let mut stmt =
        conn.prepare("SELECT started_at - due_at FROM schedule_runs WHERE schedule LIKE ?1")?;
    let mut out = stmt
        .query_map([&pattern], |r| r.get::<_, i64>(0))?
        .map(|d| d.map(|d| d as f64))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(f64::total_cmp);
    Ok(out)
}

fn general(hub: &HubProc) -> anyhow::Result<String> {
    let (status, body) = hub.api("GET", "/api/v1/projects?limit=200", None)?;
    anyhow::ensure!(status == 200, "projects: {status} {body}");
    crate::project_id(&serde_json::from_str(&body)?, "general")
}

/// Runs the benchmark with `many` schedules for the delay (1,000 by default) and
/// `loaded` for the memory figure (10,000).
pub async fn run(bins: &Binaries, many: usize, loaded: usize) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let model = format!("http://{}", listener.local_addr()?);
    let served = tokio::spawn(async move {
        axum::serve(listener, crate::fake_model::text_app("All quiet.")).await
    });
    let dir = tempfile::tempdir()?;
    let env = [("HEARTH_ANTHROPIC_URL", model.as_str())];

    // Memory: a hub with no schedules, then with `loaded` of them.
    let home = dir.path().join("memory");
    set_provider_key(bins, &home, "anthropic", "sk-bench")?;
    let mut hub = HubProc::start_with_env(bins, &home, 0, &env)?;
    let project = general(&hub)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let empty = rss_mb(hub.proc.pid());
    let year = 365 * 86_400_000;
    let now = now_ms()?;
    insert(&home.join("hub.db"), "idle", loaded, &project, |i| {
        now + year + i as i64
    })?;
    // Read within a second of the write; the listing proves the rows are there.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let full = rss_mb(hub.proc.pid());
    let listed = hub_cli(bins, &home, &["schedules", "list"])?
        .lines()
        .count();
    anyhow::ensure!(
        listed >= loaded,
        "{listed} schedules listed, {loaded} written"
    );
    hub.proc.terminate();

    // Delay: a fresh hub, 10 schedules, then `many`.
    let home = dir.path().join("delay");
    set_provider_key(bins, &home, "anthropic", "sk-bench")?;
    let mut hub = HubProc::start_with_env(bins, &home, 0, &env)?;
    let project = general(&hub)?;
    let mut results = Vec::new();
    // Due over 3 s (the reference, then a burst that queues behind the four runs at
    // once), then the same number over 60 s (what the scheduler itself adds when runs
    // keep up).
    for (n, window, name) in [
        (10, 3_000, "10".to_string()),
        (many, 3_000, many.to_string()),
        (many, 60_000, format!("{many}_over_60s")),
    ] {
        let start = now_ms()? + 4_000;
        let prefix = format!("due{name}");
        insert(&home.join("hub.db"), &prefix, n, &project, |i| {
            start + (i as i64 * window) / n as i64
        })?;
        let d = delays(&home.join("hub.db"), &prefix, n, Duration::from_secs(600))
            .with_context(|| format!("{n} schedules over {window} ms"))?;
        results.push((name, d));
    }
    hub.proc.terminate();
    served.abort();

    for (n, d) in &results {
        figure(
            &format!("scheduler_delay_p50_{n}"),
            percentile(d, 0.50),
            "ms",
        );
        figure(
            &format!("scheduler_delay_p99_{n}"),
            percentile(d, 0.99),
            "ms",
        );
    }
    figure("hub_rss_no_schedules", format!("{empty:.1}"), "MB");
    figure(
        &format!("hub_rss_{loaded}_schedules"),
        format!("{full:.1}"),
        "MB",
    );
    eprintln!(
        "rerun: cargo run --release -p hearth-tests --bin hearth-bench -- scheduler \
         [--notes {many}] [--docs {loaded}]   (delay schedules, loaded schedules)"
    );
    Ok(())
}
