//! The MCP sandbox, with a real server: `@modelcontextprotocol/server-filesystem`
//! (from npm, in `tests/mcp`) told it may read the hub's own data directory cannot read
//! `hub.db` when it runs in the hub's bubblewrap sandbox, while the same server run
//! with `--no-sandbox` can (so the test would notice a sandbox that keeps nothing out).

use std::process::Command;

use hearth_tests::{mcp_server_entry, node_exe};
use serde_json::{json, Value};

use crate::plugins_lab::{call_tool, wait_running, Lab};

/// SQLite's file header: seen in a read of `hub.db` that got through.
const SQLITE_HEADER: &str = "SQLite format 3";

#[test]
fn a_sandboxed_server_allowed_the_hubs_home_cannot_read_hub_db() -> anyhow::Result<()> {
    if Command::new("bwrap").arg("--version").output().is_err() {
        eprintln!("skipped: no bubblewrap (`apt-get install bubblewrap`; .ci/run installs it)");
        return Ok(());
    }
    let lab = Lab::new()?;
    // A directory outside the hub's home the server may also read: it starts (it refuses
    // to when none of its directories is reachable) and shows it works.
    let outside = lab.dir.path().join("outside");
    std::fs::create_dir_all(&outside)?;
    std::fs::write(outside.join("hello.txt"), "hello from outside")?;
    let command = vec![
        node_exe()?.display().to_string(),
        mcp_server_entry("server-filesystem")?.display().to_string(),
        lab.home.display().to_string(),
        outside.display().to_string(),
    ];
    lab.add_stdio("files", &[], &command)?;
    lab.add_stdio("open", &["--no-sandbox"], &command)?;
    let hub = lab.start_hub()?;
    let sandboxed = wait_running(&hub, "files")?;
    assert_eq!(sandboxed[0]["status"]["sandboxed"], true, "{sandboxed:?}");
    let open = wait_running(&hub, "open")?;
    assert_eq!(open[0]["status"]["sandboxed"], false, "{open:?}");

    let read = |plugin: &str, path: &std::path::Path| -> anyhow::Result<(u16, Value)> {
        call_tool(
            &hub,
            plugin,
            &format!("{plugin}_read_text_file"),
            json!({ "path": path.display().to_string() }),
        )
    };
    let db = lab.home.join("hub.db");
    // Unconfined, the server reads the database: the file is there and readable.
    let (status, answer) = read("open", &db)?;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["output"].to_string().contains(SQLITE_HEADER),
        "{answer}"
    );
    // Sandboxed, it reads the outside file but not the database.
    let (status, answer) = read("files", &outside.join("hello.txt"))?;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["output"].to_string().contains("hello from outside"),
        "{answer}"
    );
    let (status, answer) = read("files", &db)?;
    assert!(
        !answer.to_string().contains(SQLITE_HEADER),
        "the sandboxed server read hub.db: {status} {answer}"
    );
    assert!(
        status != 200 || answer["isError"] == true,
        "{status} {answer}"
    );
    Ok(())
}
