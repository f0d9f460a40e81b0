//! Schedules across processes on 127.0.0.1: a real `hearth-hub` with a fake model
//! provider; `hearth-hub schedules add` writes hub.db while the hub runs, the hub picks
//! the schedule up, runs it when due and `hearth-hub schedules runs` lists the run with
//! its answer; `run-now` starts a run through the running hub and says so clearly when
//! the hub is not running.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hearth_tests::{eventually, fake_model, hub_cli, set_provider_key, HubProc};

use crate::{bins, sub, tempdir};

/// `secs` since the epoch as an RFC 3339 UTC instant (days to a civil date, after
/// Howard Hinnant's algorithm).
fn rfc3339_utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[test]
fn instants_print_as_rfc3339() {
    assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339_utc(1_772_323_200), "2026-03-01T00:00:00Z");
    assert_eq!(rfc3339_utc(1_709_210_096), "2024-02-29T12:34:56Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_added_from_the_cli_fires_in_the_running_hub_and_run_now_works(
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let model = listener.local_addr()?;
    let served = tokio::spawn(async move {
        axum::serve(
            listener,
            fake_model::text_app("All quiet at home.\nNothing else."),
        )
        .await
    });
    let bins = bins();
    let dir = tempdir();
    let home = sub(&dir, "hub");
    set_provider_key(&bins, &home, "anthropic", "sk-test-schedules")?;
    // With no hub running, run-now says so.
    let mut hub = {
        let (b, h, url) = (bins.clone(), home.clone(), format!("http://{model}"));
        tokio::task::spawn_blocking(move || {
            HubProc::start_with_env(&b, &h, 0, &[("HEARTH_ANTHROPIC_URL", &url)])
        })
        .await??
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let at = rfc3339_utc(now + 3);
    let added = hub_cli(
        &bins,
        &home,
        &[
            "schedules",
            "add",
            "status",
            "--project",
            "general",
            "--at",
            &at,
            "--prompt",
            "How is the house?",
        ],
    )?;
    let id = added
        .split_whitespace()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no id in {added:?}"))?
        .to_string();
    assert!(added.contains("once at"), "{added}");
    let listed = hub_cli(&bins, &home, &["schedules", "list"])?;
    assert!(
        listed.contains(&id) && listed.contains("status"),
        "{listed}"
    );
    eventually(Duration::from_secs(20), || {
        let runs = hub_cli(&bins, &home, &["schedules", "runs", &id])?;
        Ok(runs.contains(" ok ") && runs.contains("All quiet at home."))
    })?;
    let runs = hub_cli(&bins, &home, &["schedules", "runs", &id])?;
    assert!(runs.contains(" due "), "{runs}");
    assert!(
        !runs.contains("Nothing else."),
        "the answer's first line only: {runs}"
    );
    assert!(runs.contains("in 100 / out 3 tokens"), "{runs}");
    // Done once: nothing is due any more.
    let (status, body) = hub.api("GET", &format!("/api/v1/schedules/{id}"), None)?;
    assert_eq!(status, 200, "{body}");
    let schedule: serde_json::Value = serde_json::from_str(&body)?;
    assert!(schedule["next_due"].is_null(), "{schedule}");
    // A manual run through the running hub.
    let started = hub_cli(&bins, &home, &["schedules", "run-now", &id])?;
    assert!(started.contains("started"), "{started}");
    eventually(Duration::from_secs(20), || {
        let runs = hub_cli(&bins, &home, &["schedules", "runs", &id])?;
        Ok(runs.contains(" manual ") && runs.matches(" ok ").count() == 2)
    })?;
    hub.proc.terminate();
    // The hub is gone: run-now says how to fix it, and the offline commands still work.
    let mut cmd = bins.hub(&home);
    cmd.args(["schedules", "run-now", &id]);
    let out = cmd.output()?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("running hub"), "{err}");
    hub_cli(&bins, &home, &["schedules", "remove", &id])?;
    let listed = hub_cli(&bins, &home, &["schedules", "list"])?;
    assert!(listed.contains("no schedules"), "{listed}");
    served.abort();
    Ok(())
}
