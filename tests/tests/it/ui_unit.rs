//! The web UI's pure modules under Node's own test runner (`tests/browser/unit/`, no
//! browser): textsync.js, the note editor's sync engine, against a fake server that
//! merges like the store, through interleavings of local and remote edits.

use std::process::Command;

#[test]
fn the_ui_modules_pass_their_node_tests() -> anyhow::Result<()> {
    let dir = hearth_tests::browser::browser_dir();
    let out = Command::new("node")
        .args(["--test", "unit/"])
        .current_dir(&dir)
        .output()
        .map_err(|e| anyhow::anyhow!("running node (Node.js 20 or later is needed): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The runner found the tests (an empty folder would pass too).
    let passed = text
        .lines()
        .find_map(|l| l.strip_prefix("# pass "))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or(0);
    assert!(passed >= 20, "only {passed} node tests ran:\n{text}");
    Ok(())
}
