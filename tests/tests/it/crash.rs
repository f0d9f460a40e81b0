//! `kill -9` in the middle of a burst of edits: every edit reported as saved survives,
//! and the node resumes syncing after a restart.

use std::time::Duration;

use hearth_tests::{allow, eventually, HubProc, NodeHome, Proc};

use crate::{bins, sub, tempdir};

#[test]
fn kill9_mid_burst_loses_no_reported_edit_and_resumes() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let hub_cli = NodeHome::new(&bins, hub_home.clone())?;
    let a = NodeHome::new(&bins, sub(&dir, "a"))?;
    allow(&bins, &hub_home, &a.id)?;
    let hub = HubProc::start(&bins, &hub_home, 0)?;
    let mut node = a.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    let note = a
        .cli(&["note", "add", "--title", "Burst", "--content", ""])?
        .trim()
        .to_string();

    // 1,000 edits, each its own commit, while the node daemon replicates them.
    let mut cmd = bins.node(&a.home);
    cmd.args([
        "note", "edit", &note, "--append", "e{n};", "--repeat", "1000",
    ]);
    let mut writer = Proc::spawn("writer", cmd, a.home.join("writer.stderr"))?;
    writer.wait_line(Duration::from_secs(60), |l| l == "saved 150")?;
    // The node (daemon and writer) dies at once, mid-burst.
    node.kill9();
    writer.kill9();
    let reported: u32 = writer
        .stdout_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("saved ")?.parse().ok())
        .max()
        .unwrap_or(0);
    assert!(
        (150..1000).contains(&reported),
        "killed mid-burst, after {reported} edits"
    );

    let content = |home: &NodeHome| -> anyhow::Result<String> {
        let v: serde_json::Value =
            serde_json::from_str(&home.cli(&["note", "show", &note, "--json"])?)?;
        Ok(v["content"].as_str().unwrap_or_default().to_string())
    };
    let has_all = |text: &str| (1..=reported).all(|n| text.contains(&format!("e{n};")));
    let local = content(&a)?;
    assert!(
        has_all(&local),
        "a reported edit is missing locally after kill -9"
    );

    // Restart: the node resumes and the hub ends up with every reported edit.
    let node = a.start(&hub.id, hub.addr)?;
    node.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("hearth caught-up")
    })?;
    eventually(Duration::from_secs(30), || {
        Ok(content(&hub_cli)? == content(&a)?)
    })?;
    let on_hub = content(&hub_cli)?;
    assert!(has_all(&on_hub), "the hub lacks a reported edit");
    // Nothing was applied twice.
    for n in 1..=reported {
        assert_eq!(
            on_hub.matches(&format!(";e{n};")).count()
                + usize::from(on_hub.starts_with(&format!("e{n};"))),
            1
        );
    }
    Ok(())
}
