//! The Plugins page on a real hub running real MCP servers, and on a paired laptop, in
//! headless Chromium (`tests/browser/plugins.mjs`): server-everything added through the
//! form, its warning, enabled and followed to `running` with its tools; a program that
//! does not exist failing with its error while the other keeps running; disabling,
//! removing after confirming, polling only while a server starts and only while the page
//! is open; the built-in computer plugin's setting; the laptop's page pointing to the
//! hub. Afterwards the hub's API must agree with what the page showed. Screenshots in
//! the folder the run prints.

use anyhow::Context;
use hearth_tests::{
    browser::{Journey, UiLab},
    mcp_server_entry, node_exe,
};
use serde_json::{json, Value};

use crate::{bins, tempdir};

#[test]
fn plugins_page_adds_enables_follows_and_removes_mcp_servers() -> anyhow::Result<()> {
    let entry = mcp_server_entry("server-everything")?.display().to_string();
    let everything = json!([node_exe()?.display().to_string(), entry, "stdio"]);
    let dir = tempdir();
    let mut lab = UiLab::start(&bins(), dir.path(), &[])?;
    let mut config = lab.config()?;
    config["everything"] = everything;
    Journey::new("plugins.mjs", config).run(|cmd, _| lab.control(cmd))?;

    let (status, body) = lab.hub_api("GET", "/api/v1/plugins?limit=200", None)?;
    anyhow::ensure!(status == 200, "listing plugins: {status} {body}");
    let page: Value = serde_json::from_str(&body).context("the plugin list")?;
    let plugins = page["data"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = plugins.iter().filter_map(|p| p["name"].as_str()).collect();
    anyhow::ensure!(
        names.contains(&"computer") && names.contains(&"everything"),
        "computer and everything stay: {names:?}"
    );
    anyhow::ensure!(
        !names.contains(&"broken") && !names.contains(&"mute"),
        "the removed plugins are gone: {names:?}"
    );
    let everything = plugins
        .iter()
        .find(|p| p["name"] == "everything")
        .context("everything")?;
    anyhow::ensure!(
        everything["enabled"] == false,
        "everything was left disabled: {everything}"
    );
    let server = &everything["servers"][0];
    anyhow::ensure!(
        server["transport"] == "stdio"
            && server["sandbox"] == "auto"
            && server["args"][0] == entry.as_str(),
        "the form stored the command as typed, sandboxed: {server}"
    );
    Ok(())
}
