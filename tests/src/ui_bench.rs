//! `hearth-bench ui`: the web UI as people meet it, in headless Chromium against a real
//! hub and a real node (a [`UiLab`] on 127.0.0.1), printed as `name value unit` lines.
//!
//! - First paint and interactive (the list shows its notes) of the node's notes page
//!   with N notes (default 1,000), against the same page over a project with none (the
//!   reference, same run): `ui_notes_first_paint_*`, `ui_notes_interactive_*`, ratios.
//! - A keystroke typed into a note in the node's UI until the character shows in the
//!   hub's UI in a second browser (across devices: node API, replication, hub events),
//!   against the same keystroke shown in a second tab of the node's own UI (the
//!   reference: no replication): `ui_keystroke_*`, ratios.
//! - The size of the compiled-in assets, raw and gzipped (`ui_assets_*`).
//!
//! The browser side is `tests/browser/bench-ui.mjs`; it prints `@@figure` lines that
//! this module collects and summarises.

use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use crate::{
    browser::{Journey, UiLab},
    figure, percentile, Binaries,
};

fn summary(name: &str, mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let p50 = percentile(&samples, 0.5);
    figure(&format!("{name}_p50"), format!("{p50:.1}"), "ms");
    figure(
        &format!("{name}_p95"),
        format!("{:.1}", percentile(&samples, 0.95)),
        "ms",
    );
    figure(
        &format!("{name}_max"),
        format!("{:.1}", samples.last().copied().unwrap_or(f64::NAN)),
        "ms",
    );
    p50
}

fn create(lab: &UiLab, path: &str, body: Value) -> anyhow::Result<Value> {
    let (status, text) = lab.hub_api("POST", path, Some(&body.to_string()))?;
    anyhow::ensure!(
        status == 201 || status == 200,
        "POST {path}: {status} {text}"
    );
    Ok(serde_json::from_str(&text)?)
}

/// Runs the UI bench with `notes` notes and `keys` keystrokes.
pub fn run(bins: &Binaries, notes: usize, keys: usize) -> anyhow::Result<()> {
    let (raw, gz) = hearth_ui::assets::total_size();
    figure(
        "ui_assets_raw",
        format!("{:.1}", raw as f64 / 1024.0),
        "KiB",
    );
    figure(
        "ui_assets_gzip",
        format!("{:.1}", gz as f64 / 1024.0),
        "KiB",
    );
    figure("ui_assets_files", hearth_ui::assets::ASSETS.len(), "files");

    let dir = tempfile::tempdir()?;
    let mut lab = UiLab::start(bins, dir.path(), &[])?;
    eprintln!("[hearth-bench] creating {notes} notes on the hub");
    let full = create(&lab, "/api/v1/projects", json!({"name": "bench"}))?;
    let empty = create(&lab, "/api/v1/projects", json!({"name": "bench-empty"}))?;
    let full_id = full["id"].as_str().context("project id")?.to_string();
    let mut target = String::new();
    for i in 0..notes {
        let note = create(
            &lab,
            "/api/v1/notes",
            json!({
                "title": format!("Note {i:04}"),
                "content": format!("# Note {i}\n\nSome text about item {i}, long enough to look like a note someone wrote.\n"),
                "project": full_id,
            }),
        )?;
        if i == 0 {
            target = note["id"].as_str().context("note id")?.to_string();
        }
    }
    eprintln!("[hearth-bench] waiting for the node to hold them");
    crate::eventually(Duration::from_secs(120), || {
        let (status, text) = lab.node_api(
            "GET",
            &format!("/api/v1/notes?project={full_id}&limit=1"),
            None,
        )?;
        let v: Value = serde_json::from_str(&text)?;
        Ok(status == 200 && v["total"].as_u64() == Some(notes as u64))
    })?;
    let mut config = lab.config()?;
    config["bench"] = json!({
        "full": full_id,
        "empty": empty["id"],
        "note": target,
        "notes": notes,
        "keys": keys,
    });
    eprintln!("[hearth-bench] measuring in Chromium");
    let out = Journey::new("bench-ui.mjs", config)
        .timeout(Duration::from_secs(600))
        .run(|cmd, _| lab.control(cmd))?;
    let mut series: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for line in &out {
        if let Some(rest) = line.strip_prefix("@@figure ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(Ok(v))) = (parts.next(), parts.next().map(str::parse)) {
                series.entry(name.to_string()).or_default().push(v);
            }
        }
    }
    let mut p50 = std::collections::BTreeMap::new();
    for (name, samples) in series {
        p50.insert(name.clone(), summary(&format!("ui_{name}"), samples));
    }
    for (what, reference) in [
        ("notes_first_paint", "empty_first_paint"),
        ("notes_interactive", "empty_interactive"),
        ("keystroke_cross_device", "keystroke_same_node"),
    ] {
        if let (Some(a), Some(b)) = (p50.get(what), p50.get(reference)) {
            figure(&format!("ui_{what}_ratio"), format!("{:.2}", a / b), "x");
        }
    }
    Ok(())
}
