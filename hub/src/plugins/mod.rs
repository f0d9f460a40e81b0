//! Plugins: what the agent can do beyond Hearth's documents, each plugin a built-in
//! (the computer) or a set of MCP servers, kept in `hub.db`.
//!
//! - [`kv`]: each plugin's key-value store per project;
//! - [`store`]: the plugins and their cached tools in `hub.db` (the truth the API and
//!   `hearth-hub plugins …` write);
//! - [`supervisor`]: the hub's task that runs the enabled plugins' servers, registers
//!   their tools in the agent's registry, restarts them, and follows `hub.db`;
//! - [`mcp`]: the MCP client of one server (rmcp), its cleared environment, and its tools
//!   as tool descriptors;
//! - [`sandbox`]: how a stdio server is confined (bubblewrap on Linux).
//!
//! This module owns a plugin's host-side state; it never decides which tools a project
//! may use (the agent's permissions do) and never shows a secret's value.

pub mod kv;
pub mod mcp;
pub mod sandbox;
pub mod store;
pub mod supervisor;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use std::ffi::OsString;

pub use store::{
    CachedTool, EnvBinding, EnvSource, NewPlugin, Plugin, PluginError, PluginPatch, PluginStore,
    SandboxMode, ServerSpec, Transport, COMPUTER,
};
pub use supervisor::{Phase, Plugins, ServerStatus, SupervisorConfig, SupervisorDeps};

/// What running a plugin's servers means, in words for the owner: each stdio server is a
/// program that runs as the hub's user, sandboxed or not (and why), with its exact
/// command line; a remote server runs nothing here. `decide` says how a server would be
/// confined on this machine.
pub fn run_warning(plugin: &Plugin, decide: &dyn Fn(&ServerSpec) -> sandbox::Decision) -> String {
    let mut lines = Vec::new();
    for spec in &plugin.servers {
        let decision = decide(spec);
        match &spec.transport {
            Transport::Stdio { command, args, .. } => {
                let shown = sandbox::display(
                    &OsString::from(command),
                    &args.iter().map(OsString::from).collect::<Vec<_>>(),
                );
                let confinement = match decision.reason() {
                    None => "sandboxed with bubblewrap: it cannot read the hub's data directory, \
                             only its own directory and the bound project's"
                        .to_string(),
                    Some(why) => format!(
                        "NOT sandboxed ({why}): it can read and change everything your user can, \
                         the hub's keys and database included"
                    ),
                };
                lines.push(format!(
                    "Server {:?} is a program that runs on this machine as the hub's user, \
                     with the hub's permissions; {confinement}. Command: {shown}",
                    spec.name
                ));
            }
            Transport::Http { url, .. } => lines.push(format!(
                "Server {:?} is remote ({url}): the hub sends it tool calls and their arguments.",
                spec.name
            )),
        }
    }
    lines.join("\n")
}

/// A tool's answer to a direct call.
#[derive(Debug, Clone, PartialEq)]
pub struct Called {
    /// Its output (redacted), or the error's text.
    pub output: serde_json::Value,
    /// Whether the call failed.
    pub is_error: bool,
}

/// The owner calls `plugin`'s tool `tool` directly in `project` (to try it from the UI,
/// or to measure it): the tool must be offered there (its plugin bound there or global,
/// not turned off), runs with that project's context, and the call is appended to the
/// audit log under the conversation `api`. `tool` is the registered name or the server's.
pub async fn call_tool(
    agent: &std::sync::Arc<crate::agent::runner::Agent>,
    plugin: &str,
    tool: &str,
    project: hearth_sync::DocId,
    arguments: serde_json::Value,
) -> Result<Called, PluginError> {
    let registry = agent.tools();
    let ours = |name: &str| {
        registry
            .get(name)
            .filter(|t| t.source.plugin() == Some(plugin))
    };
    let descriptor = ours(tool)
        .or_else(|| ours(&mcp::registered_name(plugin, tool)))
        .ok_or_else(|| PluginError::NoTool {
            plugin: plugin.to_string(),
            tool: tool.to_string(),
        })?;
    let (a, name) = (agent.clone(), descriptor.name.clone());
    let offered = tokio::task::spawn_blocking(move || a.permitted(&project))
        .await
        .map_err(|e| PluginError::Invalid(e.to_string()))?
        .map_err(|e| PluginError::Invalid(e.to_string()))?
        .iter()
        .any(|t| t.name() == name);
    if !offered {
        return Err(PluginError::Invalid(format!(
            "{} is not offered in project {project} (its plugin is bound to another project, or the tool is turned off there)",
            descriptor.name
        )));
    }
    let ran = descriptor
        .handler
        .call(agent.tool_context(project), arguments.clone())
        .await;
    let (output, is_error) = match ran {
        Ok(serde_json::Value::String(s)) => {
            (serde_json::Value::String(agent.redact_text(&s)), false)
        }
        // Redacting the JSON text also catches each secret's escaped form.
        Ok(v) => {
            let text = agent.redact_text(&v.to_string());
            (
                serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
                false,
            )
        }
        Err(e) => (
            serde_json::Value::String(agent.redact_text(&e.to_string())),
            true,
        ),
    };
    let outcome = match &output {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    agent.audit_direct(
        "api",
        &project,
        &descriptor.name,
        &arguments,
        &outcome,
        is_error,
    );
    Ok(Called { output, is_error })
}
