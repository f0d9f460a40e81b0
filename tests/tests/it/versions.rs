//! A hub and a node of different releases: they sync on the highest protocol version they
//! share, and when they share none the node says plainly which side to update (in its
//! output, its log and `hearth status`) instead of silently not syncing. Versions are
//! injected with the hidden `HEARTH_SYNC_VERSIONS` hook. Also: a hub refuses a `hub.db`
//! written by a newer release.

use std::time::Duration;

use hearth_tests::{allow, eventually, free_udp_port, HubProc, NodeHome};

use crate::{bins, sub, tempdir};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn node_speaking_1_and_2_syncs_on_1_with_a_hub_speaking_1() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let hub_cli = NodeHome::new(&bins, hub_home.clone())?;
    let node = NodeHome::new(&bins, sub(&dir, "node"))?;
    allow(&bins, &hub_home, &node.id)?;
    let hub = HubProc::start_with_env(
        &bins,
        &hub_home,
        free_udp_port()?,
        &[("HEARTH_SYNC_VERSIONS", "1")],
    )?;
    let note = hub_cli
        .cli(&[
            "note",
            "add",
            "--title",
            "From the hub",
            "--content",
            "hello",
        ])?
        .trim()
        .to_string();
    let p = node.start_with_env(&hub.id, hub.addr, &[("HEARTH_SYNC_VERSIONS", "1,2")])?;
    p.wait_line(WAIT, |l| l == "hearth connected version=1")?;
    p.wait_line(WAIT, |l| l.starts_with("hearth caught-up"))?;
    let shown = node.cli(&["note", "show", &note, "--json"])?;
    assert!(shown.contains("hello"), "{shown}");
    let status = node.cli(&["status"])?;
    assert!(status.contains("sync: caught-up on sync 1"), "{status}");
    Ok(())
}

#[test]
fn node_newer_than_its_hub_says_the_hub_is_too_old() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let node = NodeHome::new(&bins, sub(&dir, "node"))?;
    allow(&bins, &hub_home, &node.id)?;
    let hub = HubProc::start(&bins, &hub_home, free_udp_port()?)?;
    let p = node.start_with_env(&hub.id, hub.addr, &[("HEARTH_SYNC_VERSIONS", "2")])?;
    let line = p.wait_line(WAIT, |l| l.starts_with("hearth incompatible"))?;
    assert!(
        line.contains("the hub is too old: update the hub"),
        "{line}"
    );
    assert!(
        line.contains("the hub speaks sync 1, this node sync 2"),
        "{line}"
    );
    let status = node.cli(&["status"])?;
    assert!(
        status.contains("sync: not syncing: the hub is too old: update the hub"),
        "{status}"
    );
    // The node's log says so too, and the hub's log names the side to update.
    assert!(
        p.stderr_text().contains("the hub is too old"),
        "{}",
        p.stderr_text()
    );
    eventually(WAIT, || {
        Ok(hub.proc.stderr_text().contains("update the hub"))
    })?;
    Ok(())
}

#[test]
fn node_older_than_its_hub_says_update_this_node() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    let node = NodeHome::new(&bins, sub(&dir, "node"))?;
    allow(&bins, &hub_home, &node.id)?;
    let hub = HubProc::start_with_env(
        &bins,
        &hub_home,
        free_udp_port()?,
        &[("HEARTH_SYNC_VERSIONS", "2,3")],
    )?;
    let p = node.start(&hub.id, hub.addr)?;
    let line = p.wait_line(WAIT, |l| l.starts_with("hearth incompatible"))?;
    assert!(
        line.contains("this node is too old for its hub: update this node"),
        "{line}"
    );
    let status = node.cli(&["status"])?;
    assert!(status.contains("update this node"), "{status}");
    Ok(())
}

#[test]
fn hub_refuses_a_hub_db_from_a_newer_release() -> anyhow::Result<()> {
    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    std::fs::create_dir_all(&hub_home)?;
    let db = rusqlite::Connection::open(hub_home.join("hub.db"))?;
    db.pragma_update(None, "user_version", 99)?;
    drop(db);
    let mut cmd = bins.hub(&hub_home);
    cmd.args(["--bind", "127.0.0.1:0", "--http", "off"]);
    let out = cmd.stdin(std::process::Stdio::null()).output()?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("schema version 99"), "{err}");
    assert!(err.contains("newer release"), "{err}");
    // The device commands refuse it too.
    let mut cmd = bins.hub(&hub_home);
    cmd.args(["devices", "list"]);
    let out = cmd.stdin(std::process::Stdio::null()).output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema version 99"));
    Ok(())
}
