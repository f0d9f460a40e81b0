//! A remote MCP server over streamable HTTP: server-everything serving its streamable
//! HTTP transport on 127.0.0.1 (`tests/mcp/everything-http.mjs`), added with
//! `hearth-hub plugins add --url`; its tools are listed and called like a stdio
//! server's, and the agent is offered them.

use std::time::Duration;

use hearth_tests::{
    agent_bench::{anthropic_text_turn, anthropic_tool_turn},
    mcp_dir, mcp_server_entry, node_exe, Proc,
};
use serde_json::json;

use crate::plugins_lab::{api_json, call_tool, chat, tool_results, wait_running, Lab};

#[test]
fn a_streamable_http_server_added_by_url_serves_its_tools() -> anyhow::Result<()> {
    mcp_server_entry("server-everything")?;
    let lab = Lab::new()?;
    let mut server = std::process::Command::new(node_exe()?);
    server
        .arg(mcp_dir().join("everything-http.mjs"))
        .env("PORT", "0");
    let server = Proc::spawn(
        "everything-http",
        server,
        lab.dir.path().join("http.stderr"),
    )?;
    let ready = server.wait_line(Duration::from_secs(30), |l| {
        l.starts_with("everything-http ready")
    })?;
    let url = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("url="))
        .ok_or_else(|| anyhow::anyhow!("no url in {ready:?}"))?
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    lab.plugins(&["add", "remote", "--url", &url, "--yes"])?;
    let hub = lab.start_hub()?;
    let servers = wait_running(&hub, "remote")?;
    assert_eq!(servers.len(), 1, "{servers:?}");

    let tools = api_json(&hub, "GET", "/api/v1/plugins/remote/tools?limit=200", None)?;
    assert!(
        tools["data"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["name"] == "remote_get-sum"),
        "{tools}"
    );
    let (status, answer) = call_tool(&hub, "remote", "remote_get-sum", json!({"a": 2, "b": 40}))?;
    assert_eq!(status, 200, "{answer}");
    assert_ne!(answer["isError"], true, "{answer}");
    assert!(answer["output"].to_string().contains("42"), "{answer}");

    // Through the agent loop as well.
    lab.model.answer([
        anthropic_tool_turn(
            "toolu_remote",
            "remote_echo",
            &json!({"message": "over http"}),
        ),
        anthropic_text_turn("Done."),
    ]);
    let events = chat(&hub, "echo over http", "plugins-http")?;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_result" && e["is_error"] == false),
        "{events:?}"
    );
    let requests = lab.model.requests();
    let results = requests.get(1).map(tool_results).unwrap_or_default();
    assert!(
        results
            .first()
            .is_some_and(|r| r["content"].to_string().contains("Echo: over http")),
        "{requests:?}"
    );
    drop(server);
    Ok(())
}
