//! The tool registry: one table of tool descriptors that the system tools, the built-in
//! computer plugin and every MCP server's tools share.
//!
//! A descriptor says what a tool is (name, description, argument schema), how dangerous
//! it is (risk, per-call escalation, what it can do outside Hearth's documents, whether
//! its output can carry someone else's words) and who runs it (a [`ToolHandler`]). The
//! runner offers, gates and audits every tool the same way from these fields; handlers
//! only do the work. The registry never decides permissions and never runs a tool.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, RwLock},
};

use hearth_sync::DocId;
use serde_json::Value;

use super::tools::{Risk, ToolContext, ToolError};

/// What a handler's call resolves to: a JSON value for the model, or why it failed.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'static>>;

/// Runs one tool's calls. Implemented by the system tools, the computer plugin and each
/// MCP tool.
pub trait ToolHandler: Send + Sync + 'static {
    /// Runs the tool with `args` in `ctx`'s project.
    fn call(&self, ctx: ToolContext, args: Value) -> ToolFuture;
}

/// What a tool can do to the world outside Hearth's documents. Every effect but `None`
/// is *guarded*: in a turn that has read untrusted text, it never runs without the
/// owner's approval, whatever the project or a schedule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Only Hearth's own documents, or nothing.
    None,
    /// Writes, moves or deletes files on the home machine.
    WritesFiles,
    /// Runs programs on the home machine.
    RunsCommands,
    /// Reaches out over the network.
    Fetches,
}

impl Effect {
    /// Whether untrusted text read in the same turn forces an approval.
    pub fn is_guarded(self) -> bool {
        self != Effect::None
    }
}

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    /// Hearth's own document tools.
    System,
    /// A plugin: built in (no server) or one of its MCP servers.
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// The MCP server within it, if any.
        server: Option<String>,
    },
}

impl ToolSource {
    /// The plugin's name, if a plugin's.
    pub fn plugin(&self) -> Option<&str> {
        match self {
            ToolSource::System => None,
            ToolSource::Plugin { plugin, .. } => Some(plugin),
        }
    }
}

/// Decides a call's risk from its arguments (blocking: it may read the store).
pub type RiskOfCall = fn(&ToolContext, &Value) -> Risk;

/// One tool.
pub struct ToolDescriptor {
    /// `^[a-zA-Z0-9_-]{1,64}$` (providers refuse other names); plugin tools are
    /// `{plugin}_{tool}`.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema (an object) of its arguments.
    pub schema: Value,
    /// Its risk: a risky tool waits for the owner unless the project allows it.
    pub risk: Risk,
    /// Offered in projects unless turned off (deletes are opt-in).
    pub default_on: bool,
    /// What it can do outside Hearth's documents.
    pub effect: Effect,
    /// Its output may carry someone else's words (notes a peer wrote, web pages,
    /// command output, any MCP tool's answer): reading it taints the turn.
    pub reads_untrusted: bool,
    /// Raises the risk of one call from its arguments (a whole-content note replace).
    pub risk_of_call: Option<RiskOfCall>,
    /// Offered only in this project and its subprojects (a plugin bound to a project).
    pub only_in: Option<DocId>,
    /// Where it comes from.
    pub source: ToolSource,
    /// Who runs it.
    pub handler: Arc<dyn ToolHandler>,
}

impl std::fmt::Debug for ToolDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDescriptor")
            .field("name", &self.name)
            .field("risk", &self.risk)
            .field("effect", &self.effect)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Whether `name` is a tool name every provider accepts.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Every tool the agent can be offered, in registration order.
#[derive(Debug, Default)]
pub struct ToolRegistry {
    tools: RwLock<Vec<Arc<ToolDescriptor>>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with the system tools.
    pub fn with_system() -> Self {
        let registry = Self::new();
        registry.set_source(ToolSource::System, super::tools::system_tools());
        registry
    }

    /// Replaces every tool of `source` with `tools`. A tool whose name is invalid or
    /// taken by another source is skipped with a warning (a plugin never shadows a
    /// system tool or another plugin's tool).
    pub fn set_source(&self, source: ToolSource, tools: Vec<ToolDescriptor>) {
        let mut all = match self.tools.write() {
            Ok(t) => t,
            Err(e) => e.into_inner(),
        };
        all.retain(|t| t.source != source);
        for tool in tools {
            if !valid_tool_name(&tool.name) {
                tracing::warn!(tool = %tool.name, source = ?source, "tool name refused (letters, digits, _ and -, at most 64)");
                continue;
            }
            if let Some(owner) = all.iter().find(|t| t.name == tool.name) {
                tracing::warn!(tool = %tool.name, source = ?source, taken_by = ?owner.source, "tool name already taken; skipped");
                continue;
            }
            all.push(Arc::new(ToolDescriptor {
                source: source.clone(),
                ..tool
            }));
        }
    }

    /// Removes every tool of `plugin`, all its servers.
    pub fn remove_plugin(&self, plugin: &str) {
        let mut all = match self.tools.write() {
            Ok(t) => t,
            Err(e) => e.into_inner(),
        };
        all.retain(|t| t.source.plugin() != Some(plugin));
    }

    /// Every registered tool.
    pub fn all(&self) -> Vec<Arc<ToolDescriptor>> {
        match self.tools.read() {
            Ok(t) => t.clone(),
            Err(e) => e.into_inner().clone(),
        }
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<ToolDescriptor>> {
        let tools = match self.tools.read() {
            Ok(t) => t,
            Err(e) => e.into_inner(),
        };
        tools.iter().find(|t| t.name == name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Echo;
    impl ToolHandler for Echo {
        fn call(&self, _ctx: ToolContext, args: Value) -> ToolFuture {
            Box::pin(async move { Ok(args) })
        }
    }

    fn tool(name: &str) -> ToolDescriptor {
        ToolDescriptor {
            name: name.into(),
            description: "test".into(),
            schema: json!({"type": "object"}),
            risk: Risk::Safe,
            default_on: true,
            effect: Effect::None,
            reads_untrusted: true,
            risk_of_call: None,
            only_in: None,
            source: ToolSource::System,
            handler: Arc::new(Echo),
        }
    }

    fn plugin(name: &str, server: &str) -> ToolSource {
        ToolSource::Plugin {
            plugin: name.into(),
            server: Some(server.into()),
        }
    }

    #[test]
    fn a_plugin_never_shadows_a_system_tool_and_sources_replace_their_own() {
        let r = ToolRegistry::with_system();
        let system = r.all().len();
        assert!(r.get("notes_read").is_some());
        r.set_source(
            plugin("notes", "a"),
            vec![tool("notes_read"), tool("notes_extra"), tool("bad name")],
        );
        assert_eq!(r.all().len(), system + 1, "only notes_extra is new");
        assert_eq!(
            r.get("notes_read").map(|t| t.source.clone()),
            Some(ToolSource::System)
        );
        // A second server of the same plugin keeps the first's tools.
        r.set_source(plugin("notes", "b"), vec![tool("notes_more")]);
        r.set_source(plugin("notes", "a"), vec![tool("notes_other")]);
        assert!(r.get("notes_extra").is_none(), "a source's set is replaced");
        assert!(r.get("notes_other").is_some() && r.get("notes_more").is_some());
        r.remove_plugin("notes");
        assert_eq!(r.all().len(), system);
    }

    #[test]
    fn tool_names_are_what_providers_accept() {
        assert!(valid_tool_name("everything_echo"));
        assert!(valid_tool_name("a-b_C9"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a.b"));
        assert!(!valid_tool_name(&"x".repeat(65)));
    }
}
