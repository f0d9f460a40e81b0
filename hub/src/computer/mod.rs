//! The built-in computer plugin: the agent's hands on the home machine, confined to the
//! project's directory (`<home>/projects/<project id>`).
//!
//! - [`files`]: read (line windows), write, edit by exact replacement, delete, copy,
//!   move, list and search, every path resolved beneath the project directory;
//! - [`terminal`]: commands through `sh -c` in the project directory, to completion
//!   (timeout, output cap) or in the background (rolling buffer), each in its own
//!   process group with a clean non-interactive environment;
//! - [`web`]: `web_fetch`, an HTTP(S) GET to readable text that refuses non-public
//!   addresses unless the owner allows them.
//!
//! Handlers only do the work: approvals, taint (untrusted text read this turn) and the
//! audit log belong to the agent's runner, which reads each tool's risk and effect from
//! its descriptor. This plugin must never reach a path outside the project directory,
//! never hand a process the hub's own environment, and never show the model a secret's
//! value.

pub mod files;
mod html;
pub mod terminal;
pub mod web;

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::agent::{
    registry::{Effect, ToolDescriptor, ToolFuture, ToolHandler, ToolSource},
    tools::{Risk, ToolContext, ToolError},
};

/// The plugin's name: its tools are `computer_*`.
pub const PLUGIN: &str = "computer";
/// Secrets one command may ask for at most.
const MAX_SECRETS_PER_COMMAND: usize = 16;

/// The bounds every tool keeps to.
#[derive(Debug, Clone)]
pub struct ComputerLimits {
    /// Lines a file read (or a background process read) returns unless told otherwise.
    pub read_lines: u64,
    /// Bytes of text one file read returns at most.
    pub read_bytes: usize,
    /// Bytes one write (or an edited file) may have.
    pub write_bytes: usize,
    /// Entries a list returns at most.
    pub list_entries: usize,
    /// Results a search returns unless told otherwise (at most five times this).
    pub search_hits: usize,
    /// Files bigger than this are skipped by a content search.
    pub search_file_bytes: u64,
    /// Directory entries a list, search or copy visits at most.
    pub walk_entries: usize,
    /// Bytes of output a command run (or a background read) returns at most.
    pub output_bytes: usize,
    /// A command's timeout unless told otherwise.
    pub run_timeout: Duration,
    /// The longest timeout a command may ask for.
    pub run_timeout_max: Duration,
    /// Background processes running at once, across all projects.
    pub background_running: usize,
    /// Lines a background process's buffer keeps.
    pub background_lines: usize,
    /// Bytes a background process's buffer keeps.
    pub background_bytes: usize,
    /// Finished background processes kept for reading.
    pub background_kept_finished: usize,
    /// How long a finished background process is kept for reading.
    pub background_keep_for: Duration,
    /// Bytes of a fetched body read at most.
    pub web_body_bytes: usize,
    /// Characters of fetched text returned at most.
    pub web_text_chars: usize,
    /// A fetch's whole time, redirects included.
    pub web_timeout: Duration,
    /// Redirects a fetch follows at most.
    pub web_redirects: usize,
}

impl Default for ComputerLimits {
    fn default() -> Self {
        Self {
            read_lines: 2000,
            read_bytes: 256 * 1024,
            write_bytes: 10 * 1024 * 1024,
            list_entries: 1000,
            search_hits: 200,
            search_file_bytes: 10 * 1024 * 1024,
            walk_entries: 100_000,
            output_bytes: 30_000,
            run_timeout: Duration::from_secs(120),
            run_timeout_max: Duration::from_secs(600),
            background_running: 16,
            background_lines: 5000,
            background_bytes: 2 * 1024 * 1024,
            background_kept_finished: 32,
            background_keep_for: Duration::from_secs(3600),
            web_body_bytes: 2 * 1024 * 1024,
            web_text_chars: 50_000,
            web_timeout: Duration::from_secs(30),
            web_redirects: 5,
        }
    }
}

/// How the computer plugin is set up.
#[derive(Clone, Default)]
pub struct ComputerConfig {
    /// The owner allows `web_fetch` to reach private, loopback and link-local addresses.
    pub allow_private_network: bool,
    /// Resolves names for `web_fetch` instead of the system (tests); its answers are
    /// still checked.
    pub resolver: Option<Arc<dyn reqwest::dns::Resolve>>,
    /// Addresses `web_fetch` treats as public (tests serve "public" pages on 127.0.0.x).
    pub public_for_tests: Vec<IpAddr>,
    /// The bounds.
    pub limits: ComputerLimits,
    /// Confine commands with this `bwrap` (see [`crate::plugins::sandbox`]), hiding
    /// `data_dir` (the hub's data directory) but for the project's own directory.
    pub confine_commands: Option<CommandConfinement>,
    /// The plugin's key-value store (per project): background commands are recorded
    /// there, so after a restart of the hub `computer_terminal_list` still says which
    /// ones the restart ended.
    pub kv: Option<crate::plugins::kv::PluginKv>,
}

impl std::fmt::Debug for ComputerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputerConfig")
            .field("allow_private_network", &self.allow_private_network)
            .field("resolver", &self.resolver.as_ref().map(|_| "injected"))
            .field("public_for_tests", &self.public_for_tests)
            .field("limits", &self.limits)
            .field("confine_commands", &self.confine_commands)
            .finish()
    }
}

/// The computer plugin's state: its configuration, the background processes it owns
/// and its HTTP client.
pub struct Computer {
    config: ComputerConfig,
    /// The owner's current choice (the plugin's setting), over the config's.
    allow_private: AtomicBool,
    terminals: terminal::Terminals,
    /// Built on the first fetch, again when the owner's choice changed; a failure to
    /// build is reported to the model.
    web: Mutex<Option<(bool, Arc<web::WebClient>)>>,
    /// This run of the hub (ms since the epoch at start): tells its background
    /// commands from earlier runs' in the plugin's store.
    run: u64,
}

/// Background commands remembered per project in the plugin's store.
const HISTORY_KEPT: usize = 50;
const HISTORY_PREFIX: &str = "terminal/";

/// Where commands run confined: bubblewrap, and the data directory it hides.
#[derive(Debug, Clone)]
pub struct CommandConfinement {
    /// The `bwrap` program.
    pub bwrap: PathBuf,
    /// The hub's data directory (canonical).
    pub data_dir: PathBuf,
}

/// The computer plugin's setting that lets `web_fetch` reach private addresses.
pub const ALLOW_PRIVATE_NETWORK: &str = "allow_private_network";

impl std::fmt::Debug for Computer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Computer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Computer {
    /// A computer plugin with no processes yet.
    pub fn new(config: ComputerConfig) -> Arc<Self> {
        Arc::new(Self {
            allow_private: AtomicBool::new(config.allow_private_network),
            config,
            terminals: terminal::Terminals::new(),
            web: Mutex::new(None),
            run: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        })
    }

    /// Records a background command in the project's history (best effort: the
    /// command runs whether or not it is remembered).
    async fn remember(&self, project: String, started: &Value, command: &str) {
        let Some(kv) = self.config.kv.clone() else {
            return;
        };
        let Some(id) = started.get("id").and_then(Value::as_str) else {
            return;
        };
        // Keys sort by run, then by start: the oldest go first when trimming.
        let key = format!("{HISTORY_PREFIX}{:016}/{id}", self.run);
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let row = json!({ "id": id, "command": command, "startedAt": at, "run": self.run });
        let saved = tokio::task::spawn_blocking(move || {
            kv.set(&project, &key, &row)?;
            let all = kv.list(&project, HISTORY_PREFIX, 10_000)?;
            for (old, _) in all.iter().take(all.len().saturating_sub(HISTORY_KEPT)) {
                kv.delete(&project, old)?;
            }
            Ok::<_, crate::plugins::kv::KvError>(())
        })
        .await;
        if !matches!(saved, Ok(Ok(()))) {
            tracing::warn!("could not record a background command in the computer's history");
        }
    }

    /// Background commands of earlier runs of the hub in `project`: each ended when
    /// that run did.
    async fn earlier(&self, project: String) -> Vec<Value> {
        let Some(kv) = self.config.kv.clone() else {
            return Vec::new();
        };
        let run = self.run;
        let rows = tokio::task::spawn_blocking(move || kv.list(&project, HISTORY_PREFIX, 10_000))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        rows.into_iter()
            .map(|(_, row)| row)
            .filter(|row| row.get("run").and_then(Value::as_u64) != Some(run))
            .map(|mut row| {
                if let Some(o) = row.as_object_mut() {
                    o.remove("run");
                    o.insert(
                        "ended".into(),
                        json!("stopped when the hub stopped or restarted; its output is gone"),
                    );
                }
                row
            })
            .collect()
    }

    /// Lets `web_fetch` reach private, loopback and link-local addresses, or not (the
    /// next fetch uses it).
    pub fn set_allow_private_network(&self, allow: bool) {
        self.allow_private.store(allow, Ordering::SeqCst);
    }

    /// Kills every background process and waits for them to end.
    pub async fn shutdown(&self) {
        self.terminals.shutdown().await;
    }

    fn web(&self) -> Result<Arc<web::WebClient>, web::WebError> {
        let allow = self.allow_private.load(Ordering::SeqCst);
        let mut slot = self.web.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((built_for, client)) = slot.as_ref() {
            if *built_for == allow {
                return Ok(client.clone());
            }
        }
        let policy = web::AddressPolicy {
            allow_private: allow,
            public_for_tests: self.config.public_for_tests.clone(),
        };
        let client = web::WebClient::new(policy, self.config.resolver.clone(), &self.config.limits)
            .map(Arc::new)
            .map_err(|e| web::WebError::Request(e.to_string()))?;
        *slot = Some((allow, client.clone()));
        Ok(client)
    }
}

impl From<files::FileError> for ToolError {
    fn from(e: files::FileError) -> Self {
        match e {
            files::FileError::Invalid(m) => ToolError::Invalid(m),
            other => ToolError::Failed(other.to_string()),
        }
    }
}

impl From<terminal::TerminalError> for ToolError {
    fn from(e: terminal::TerminalError) -> Self {
        match e {
            terminal::TerminalError::Invalid(m) => ToolError::Invalid(m),
            other => ToolError::Failed(other.to_string()),
        }
    }
}

impl From<web::WebError> for ToolError {
    fn from(e: web::WebError) -> Self {
        match e {
            web::WebError::Invalid(m) => ToolError::Invalid(m),
            other => ToolError::Failed(other.to_string()),
        }
    }
}

fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::Invalid(e.to_string()))
}

fn project_dir(ctx: &ToolContext) -> Result<PathBuf, ToolError> {
    ctx.project_dir.clone().ok_or_else(|| {
        ToolError::Failed("this project has no directory on the home machine".into())
    })
}

fn crashed(e: tokio::task::JoinError) -> ToolError {
    ToolError::Failed(format!("tool crashed: {e}"))
}

/// One file operation: parses its arguments and runs it off the async threads.
type FileOp<A> = fn(&Path, A, &ComputerLimits) -> Result<Value, files::FileError>;

/// Each tool of the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    FileRead,
    FileWrite,
    FileEdit,
    FileDelete,
    FileCopy,
    FileMove,
    FileList,
    FileSearch,
    TerminalRun,
    TerminalStart,
    TerminalList,
    TerminalRead,
    TerminalKill,
    WebFetch,
}

const TOOLS: [Tool; 14] = [
    Tool::FileRead,
    Tool::FileWrite,
    Tool::FileEdit,
    Tool::FileDelete,
    Tool::FileCopy,
    Tool::FileMove,
    Tool::FileList,
    Tool::FileSearch,
    Tool::TerminalRun,
    Tool::TerminalStart,
    Tool::TerminalList,
    Tool::TerminalRead,
    Tool::TerminalKill,
    Tool::WebFetch,
];

/// What a descriptor says about a tool besides its name and handler.
struct About {
    name: &'static str,
    description: &'static str,
    schema: Value,
    risk: Risk,
    effect: Effect,
    reads_untrusted: bool,
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

fn path_prop(what: &str) -> Value {
    json!({ "type": "string", "description": format!("{what}, relative to the project directory") })
}

fn secrets_prop() -> Value {
    json!({
        "type": "array",
        "items": { "type": "string" },
        "description": "Names of project secrets to set as environment variables of the same \
            name (the values are never shown)",
    })
}

impl Tool {
    fn about(self) -> About {
        let (name, description, schema) = match self {
            Tool::FileRead => (
                "computer_file_read",
                "Read a text file in the project directory, a window of lines at a time. \
                 Answers the text, totalLines and, when there is more, nextOffset.",
                object(
                    json!({
                        "path": path_prop("The file"),
                        "offset": { "type": "integer", "minimum": 1, "description": "First line, 1-based (default 1)" },
                        "limit": { "type": "integer", "minimum": 1, "description": "Lines to read (default 2000)" },
                    }),
                    &["path"],
                ),
            ),
            Tool::FileWrite => (
                "computer_file_write",
                "Write a whole file in the project directory (replacing it if it exists), \
                 creating its parent directories.",
                object(
                    json!({
                        "path": path_prop("The file"),
                        "content": { "type": "string", "description": "The whole new content" },
                    }),
                    &["path", "content"],
                ),
            ),
            Tool::FileEdit => (
                "computer_file_edit",
                "Edit a text file by exact replacement: old_string must occur exactly once \
                 (include enough context), unless replace_all is true.",
                object(
                    json!({
                        "path": path_prop("The file"),
                        "old_string": { "type": "string", "description": "The exact text to replace, whitespace included" },
                        "new_string": { "type": "string", "description": "The text to put in its place" },
                        "replace_all": { "type": "boolean", "description": "Replace every occurrence (default false)" },
                    }),
                    &["path", "old_string", "new_string"],
                ),
            ),
            Tool::FileDelete => (
                "computer_file_delete",
                "Delete a file or symlink in the project directory; a directory only with \
                 recursive: true (it and everything in it).",
                object(
                    json!({
                        "path": path_prop("The file or directory"),
                        "recursive": { "type": "boolean", "description": "Delete a directory with its content (default false)" },
                    }),
                    &["path"],
                ),
            ),
            Tool::FileCopy => (
                "computer_file_copy",
                "Copy a file, or a directory with recursive: true, within the project \
                 directory. An existing destination is replaced only with overwrite: true.",
                object(
                    json!({
                        "from": path_prop("The source"),
                        "to": path_prop("The destination"),
                        "recursive": { "type": "boolean", "description": "Copy a directory with its content (default false)" },
                        "overwrite": { "type": "boolean", "description": "Replace an existing destination (default false)" },
                    }),
                    &["from", "to"],
                ),
            ),
            Tool::FileMove => (
                "computer_file_move",
                "Move or rename a file or directory within the project directory. An \
                 existing destination is replaced only with overwrite: true.",
                object(
                    json!({
                        "from": path_prop("The source"),
                        "to": path_prop("The destination"),
                        "overwrite": { "type": "boolean", "description": "Replace an existing destination (default false)" },
                    }),
                    &["from", "to"],
                ),
            ),
            Tool::FileList => (
                "computer_file_list",
                "List a directory of the project (default: the project directory itself): \
                 each entry's path, kind (file, dir, symlink, other) and size, depth levels \
                 down (default 1). Symlinks and .git are not entered.",
                object(
                    json!({
                        "path": path_prop("The directory (default \".\")"),
                        "depth": { "type": "integer", "minimum": 1, "description": "Levels to descend (default 1)" },
                    }),
                    &[],
                ),
            ),
            Tool::FileSearch => (
                "computer_file_search",
                "Search the project directory. mode \"files\": file paths matching a glob \
                 (`*` stays within a directory, `**` crosses them; a pattern without `/` \
                 matches file names anywhere). mode \"content\": lines matching a regex \
                 (or literal text), answered as path:line:text.",
                object(
                    json!({
                        "mode": { "type": "string", "enum": ["files", "content"] },
                        "pattern": { "type": "string", "description": "A glob (files) or a regex (content)" },
                        "path": path_prop("The directory to search (default \".\")"),
                        "literal": { "type": "boolean", "description": "Content: the pattern is plain text (default false)" },
                        "case_insensitive": { "type": "boolean", "description": "Content: ignore case (default false)" },
                        "glob": { "type": "string", "description": "Content: only files matching this glob" },
                        "max_results": { "type": "integer", "minimum": 1, "description": "Results at most (default 200)" },
                    }),
                    &["mode", "pattern"],
                ),
            ),
            Tool::TerminalRun => (
                "computer_terminal_run",
                "Run a shell command (sh -c) in the project directory and wait for it. \
                 Non-interactive: stdin is empty and prompts fail. Answers exitCode and \
                 output (stdout and stderr, the middle cut when long). Killed with everything \
                 it started after timeout_secs; what it leaves running ends with it (use \
                 computer_terminal_start for servers and long jobs).",
                object(
                    json!({
                        "command": { "type": "string", "description": "The shell command" },
                        "timeout_secs": { "type": "integer", "minimum": 1, "maximum": 600, "description": "Seconds before it is killed (default 120)" },
                        "secrets": secrets_prop(),
                    }),
                    &["command"],
                ),
            ),
            Tool::TerminalStart => (
                "computer_terminal_start",
                "Start a shell command (sh -c) in the background in the project directory. \
                 Answers its id; its last 5000 lines of output are kept for \
                 computer_terminal_read.",
                object(
                    json!({
                        "command": { "type": "string", "description": "The shell command" },
                        "secrets": secrets_prop(),
                    }),
                    &["command"],
                ),
            ),
            Tool::TerminalList => (
                "computer_terminal_list",
                "List this project's background processes, running and recently finished.",
                object(json!({}), &[]),
            ),
            Tool::TerminalRead => (
                "computer_terminal_read",
                "Read a background process's output from line offset (1-based over all it \
                 printed; default: the oldest line kept). Answers the text, nextOffset, \
                 whether it is running and its exit code.",
                object(
                    json!({
                        "id": { "type": "string" },
                        "offset": { "type": "integer", "minimum": 1 },
                        "limit": { "type": "integer", "minimum": 1, "description": "Lines at most (default 2000)" },
                    }),
                    &["id"],
                ),
            ),
            Tool::TerminalKill => (
                "computer_terminal_kill",
                "Stop a background process and everything it started (SIGTERM, then SIGKILL).",
                object(json!({ "id": { "type": "string" } }), &["id"]),
            ),
            Tool::WebFetch => (
                "computer_web_fetch",
                "Fetch a public web page (HTTP GET, following up to 5 redirects) and answer \
                 its readable text, HTML turned into plain text with links as footnotes.",
                object(
                    json!({ "url": { "type": "string", "description": "An http or https URL" } }),
                    &["url"],
                ),
            ),
        };
        let (risk, effect, reads_untrusted) = match self {
            Tool::FileRead | Tool::FileSearch => (Risk::Safe, Effect::None, true),
            Tool::FileList => (Risk::Safe, Effect::None, false),
            Tool::FileWrite
            | Tool::FileEdit
            | Tool::FileDelete
            | Tool::FileCopy
            | Tool::FileMove => (Risk::Risky, Effect::WritesFiles, false),
            Tool::TerminalRun => (Risk::Risky, Effect::RunsCommands, true),
            Tool::TerminalStart | Tool::TerminalKill => (Risk::Risky, Effect::RunsCommands, false),
            Tool::TerminalList => (Risk::Safe, Effect::None, false),
            Tool::TerminalRead => (Risk::Safe, Effect::None, true),
            Tool::WebFetch => (Risk::Safe, Effect::Fetches, true),
        };
        About {
            name,
            description,
            schema,
            risk,
            effect,
            reads_untrusted,
        }
    }
}

/// The computer plugin's tools, for the registry (source `Plugin { computer }`).
pub fn tools(computer: &Arc<Computer>) -> Vec<ToolDescriptor> {
    TOOLS
        .iter()
        .map(|&tool| {
            let about = tool.about();
            ToolDescriptor {
                name: about.name.into(),
                description: about.description.into(),
                schema: about.schema,
                risk: about.risk,
                default_on: true,
                effect: about.effect,
                reads_untrusted: about.reads_untrusted,
                risk_of_call: None,
                only_in: None,
                source: ToolSource::Plugin {
                    plugin: PLUGIN.into(),
                    server: None,
                },
                handler: Arc::new(ComputerTool {
                    computer: computer.clone(),
                    tool,
                }),
            }
        })
        .collect()
}

/// Runs one of the plugin's tools.
struct ComputerTool {
    computer: Arc<Computer>,
    tool: Tool,
}

impl ToolHandler for ComputerTool {
    fn call(&self, ctx: ToolContext, args: Value) -> ToolFuture {
        let (computer, tool) = (self.computer.clone(), self.tool);
        Box::pin(async move { computer.call(tool, ctx, args).await })
    }
}

impl Computer {
    async fn call(&self, tool: Tool, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let limits = &self.config.limits;
        match tool {
            Tool::FileRead => self.file(&ctx, args, files::read).await,
            Tool::FileWrite => self.file(&ctx, args, files::write).await,
            Tool::FileEdit => self.file(&ctx, args, files::edit).await,
            Tool::FileDelete => {
                self.file(&ctx, args, |dir, a, _| files::delete(dir, a))
                    .await
            }
            Tool::FileCopy => self.file(&ctx, args, files::copy).await,
            Tool::FileMove => {
                self.file(&ctx, args, |dir, a, _| files::rename(dir, a))
                    .await
            }
            Tool::FileList => self.file(&ctx, args, files::list).await,
            Tool::FileSearch => self.file(&ctx, args, files::search).await,
            Tool::TerminalRun => {
                let args: terminal::RunArgs = parse(args)?;
                let timeout = match args.timeout_secs {
                    None => limits.run_timeout,
                    Some(0) => return Err(ToolError::Invalid("timeout_secs is at least 1".into())),
                    Some(secs) if Duration::from_secs(secs) > limits.run_timeout_max => {
                        return Err(ToolError::Invalid(format!(
                            "timeout_secs is at most {}: use computer_terminal_start for longer work",
                            limits.run_timeout_max.as_secs()
                        )))
                    }
                    Some(secs) => Duration::from_secs(secs),
                };
                let dir = project_dir(&ctx)?;
                let command = non_empty(&args.command)?;
                let extra_env = secret_env(&ctx, args.secrets).await?;
                let spec = self.command_spec(command, &dir, extra_env);
                let outcome = terminal::run_to_end(&spec, timeout, limits.output_bytes).await?;
                Ok(terminal::run_result(outcome, timeout))
            }
            Tool::TerminalStart => {
                let args: terminal::StartArgs = parse(args)?;
                let dir = project_dir(&ctx)?;
                let command = non_empty(&args.command)?;
                let extra_env = secret_env(&ctx, args.secrets).await?;
                let spec = self.command_spec(command, &dir, extra_env);
                let started = self
                    .terminals
                    .start(&ctx.project.to_string(), &spec, limits)?;
                self.remember(ctx.project.to_string(), &started, command)
                    .await;
                Ok(started)
            }
            Tool::TerminalList => {
                let mut listed = self.terminals.list(&ctx.project.to_string(), limits);
                let earlier = self.earlier(ctx.project.to_string()).await;
                if !earlier.is_empty() {
                    listed["earlier"] = json!(earlier);
                }
                Ok(listed)
            }
            Tool::TerminalRead => {
                let args: terminal::ReadArgs = parse(args)?;
                Ok(self
                    .terminals
                    .read(&ctx.project.to_string(), args, limits)?)
            }
            Tool::TerminalKill => {
                let args: terminal::IdArgs = parse(args)?;
                Ok(self
                    .terminals
                    .kill(&ctx.project.to_string(), &args.id)
                    .await?)
            }
            Tool::WebFetch => Ok(self.web()?.fetch(parse(args)?, limits).await?),
        }
    }

    /// How `command` runs in `dir`: confined as configured, with `extra_env`.
    fn command_spec<'a>(
        &'a self,
        command: &'a str,
        dir: &'a Path,
        extra_env: Vec<(String, String)>,
    ) -> terminal::Spec<'a> {
        terminal::Spec {
            command,
            dir,
            extra_env,
            confine: self
                .config
                .confine_commands
                .as_ref()
                .map(|c| (c.bwrap.as_path(), c.data_dir.as_path())),
        }
    }

    async fn file<A: DeserializeOwned + Send + 'static>(
        &self,
        ctx: &ToolContext,
        args: Value,
        op: FileOp<A>,
    ) -> Result<Value, ToolError> {
        let args: A = parse(args)?;
        let dir = project_dir(ctx)?;
        let limits = self.config.limits.clone();
        Ok(tokio::task::spawn_blocking(move || op(&dir, args, &limits))
            .await
            .map_err(crashed)??)
    }
}

fn non_empty(command: &str) -> Result<&str, ToolError> {
    if command.trim().is_empty() {
        return Err(ToolError::Invalid("command is empty".into()));
    }
    Ok(command)
}

/// The named project secrets as environment variables; the model names them and never
/// sees their values.
async fn secret_env(
    ctx: &ToolContext,
    names: Vec<String>,
) -> Result<Vec<(String, String)>, ToolError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    if names.len() > MAX_SECRETS_PER_COMMAND {
        return Err(ToolError::Invalid(format!(
            "at most {MAX_SECRETS_PER_COMMAND} secrets per command"
        )));
    }
    if let Some(bad) = names.iter().find(|n| !terminal::valid_secret_var(n)) {
        return Err(ToolError::Invalid(format!(
            "{bad:?} cannot be a secret's variable: use letters, digits and _, not starting \
             with a digit, and not a variable the command environment already sets"
        )));
    }
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || {
        names
            .into_iter()
            .map(|name| match ctx.secret(&name)? {
                Some(value) => Ok((name, value.expose().to_owned())),
                None => Err(ToolError::Failed(format!(
                    "this project has no secret named {name:?} (the owner sets project \
                     secrets in the project's settings)"
                ))),
            })
            .collect()
    })
    .await
    .map_err(crashed)?
}

#[cfg(test)]
mod tests {
    use hearth_sync::{DocId, DocumentStore};

    use super::*;
    use crate::{
        agent::{registry::valid_tool_name, tools::UpdateLog},
        secrets::{SecretStore, SecretValue},
    };

    struct Lab {
        _dir: tempfile::TempDir,
        ctx: ToolContext,
        secrets: Arc<SecretStore>,
        tools: Vec<ToolDescriptor>,
        computer: Arc<Computer>,
    }

    fn lab() -> Lab {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().to_path_buf();
        let hub_db = home.join("hub.db");
        let secrets =
            Arc::new(SecretStore::open(&hub_db, &home.join("server.secret")).expect("secrets"));
        let project = DocId::random();
        let project_dir = home.join("projects").join(project.to_string());
        std::fs::create_dir_all(&project_dir).expect("project dir");
        let ctx = ToolContext {
            store: DocumentStore::open(home.join("hearth.db")).expect("store"),
            updates: Arc::new(UpdateLog::open(&hub_db).expect("updates")),
            project,
            project_dir: Some(project_dir),
            secrets: Some(secrets.clone()),
        };
        let computer = Computer::new(ComputerConfig::default());
        Lab {
            _dir: dir,
            ctx,
            secrets,
            tools: tools(&computer),
            computer,
        }
    }

    impl Lab {
        async fn call(&self, name: &str, args: Value) -> Result<Value, ToolError> {
            let tool = self
                .tools
                .iter()
                .find(|t| t.name == name)
                .unwrap_or_else(|| panic!("no tool {name}"));
            tool.handler.call(self.ctx.clone(), args).await
        }
    }

    #[test]
    fn descriptors_say_what_each_tool_can_do() {
        let lab = lab();
        assert_eq!(lab.tools.len(), 14);
        for tool in &lab.tools {
            assert!(valid_tool_name(&tool.name), "{}", tool.name);
            assert!(tool.name.starts_with("computer_"), "{}", tool.name);
            assert!(tool.default_on);
            assert_eq!(tool.schema["type"], "object");
            assert_eq!(
                tool.source,
                ToolSource::Plugin {
                    plugin: "computer".into(),
                    server: None
                }
            );
        }
        let get = |name: &str| {
            let t = lab.tools.iter().find(|t| t.name == name).expect(name);
            (t.risk, t.effect, t.reads_untrusted)
        };
        use Effect::{Fetches, RunsCommands, WritesFiles};
        use Risk::{Risky, Safe};
        const NONE: Effect = Effect::None;
        assert_eq!(get("computer_file_read"), (Safe, NONE, true));
        assert_eq!(get("computer_file_search"), (Safe, NONE, true));
        assert_eq!(get("computer_file_list"), (Safe, NONE, false));
        for name in [
            "computer_file_write",
            "computer_file_edit",
            "computer_file_delete",
            "computer_file_copy",
            "computer_file_move",
        ] {
            assert_eq!(get(name), (Risky, WritesFiles, false), "{name}");
        }
        assert_eq!(get("computer_terminal_run"), (Risky, RunsCommands, true));
        assert_eq!(get("computer_terminal_start"), (Risky, RunsCommands, false));
        assert_eq!(get("computer_terminal_kill"), (Risky, RunsCommands, false));
        assert_eq!(get("computer_terminal_list"), (Safe, NONE, false));
        assert_eq!(get("computer_terminal_read"), (Safe, NONE, true));
        assert_eq!(get("computer_web_fetch"), (Safe, Fetches, true));
    }

    #[tokio::test]
    async fn a_restart_of_the_hub_is_remembered_in_the_terminal_list() {
        let lab = lab();
        let db = lab._dir.path().join("hub.db");
        let kv = || crate::plugins::kv::PluginKv::open(&db, "computer").expect("kv");
        let first = Computer::new(ComputerConfig {
            kv: Some(kv()),
            ..ComputerConfig::default()
        });
        let call = |computer: &Arc<Computer>, name: &str, args: Value| {
            let tool = tools(computer)
                .into_iter()
                .find(|t| t.name == name)
                .expect("tool");
            tool.handler.call(lab.ctx.clone(), args)
        };
        call(
            &first,
            "computer_terminal_start",
            json!({"command": "sleep 30"}),
        )
        .await
        .expect("start");
        let listed = call(&first, "computer_terminal_list", json!({}))
            .await
            .expect("list");
        assert_eq!(listed["processes"].as_array().map(Vec::len), Some(1));
        assert!(
            listed.get("earlier").is_none(),
            "nothing from before: {listed}"
        );
        first.shutdown().await;
        // The hub starts again: the process is gone, the record is not.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = Computer::new(ComputerConfig {
            kv: Some(kv()),
            ..ComputerConfig::default()
        });
        let listed = call(&second, "computer_terminal_list", json!({}))
            .await
            .expect("list");
        assert_eq!(listed["processes"].as_array().map(Vec::len), Some(0));
        let earlier = listed["earlier"].as_array().cloned().unwrap_or_default();
        assert_eq!(earlier.len(), 1, "{listed}");
        assert_eq!(earlier[0]["command"], "sleep 30");
        assert!(earlier[0]["ended"]
            .as_str()
            .is_some_and(|e| e.contains("hub")));
        // Another project sees none of it.
        let mut other = lab.ctx.clone();
        other.project = DocId::random();
        let tool = tools(&second)
            .into_iter()
            .find(|t| t.name == "computer_terminal_list")
            .expect("tool");
        let listed = tool.handler.call(other, json!({})).await.expect("list");
        assert!(listed.get("earlier").is_none(), "{listed}");
    }

    #[tokio::test]
    async fn confined_commands_cannot_read_the_hubs_data_but_work_in_the_project() {
        let Some(bwrap) = crate::plugins::sandbox::find_bwrap(std::env::var_os("PATH").as_deref())
        else {
            // CI installs bubblewrap; a machine without it has no confinement to test.
            eprintln!("SKIPPED: no bwrap on PATH");
            return;
        };
        let lab = lab();
        let home = std::fs::canonicalize(lab._dir.path()).expect("home");
        std::fs::write(home.join("server.secret"), "top secret").expect("secret file");
        let computer = Computer::new(ComputerConfig {
            confine_commands: Some(CommandConfinement {
                bwrap,
                data_dir: home.clone(),
            }),
            limits: ComputerLimits {
                run_timeout_max: Duration::from_secs(600),
                ..ComputerLimits::default()
            },
            ..ComputerConfig::default()
        });
        let run = |command: String, timeout: u64| {
            let tool = tools(&computer)
                .into_iter()
                .find(|t| t.name == "computer_terminal_run")
                .expect("tool");
            tool.handler.call(
                lab.ctx.clone(),
                json!({ "command": command, "timeout_secs": timeout }),
            )
        };
        let secret = home.join("server.secret");
        let out = run(format!("cat {} && echo LEAKED", secret.display()), 30)
            .await
            .expect("ran");
        assert!(
            !out.to_string().contains("top secret") && !out.to_string().contains("LEAKED"),
            "{out}"
        );
        let out = run(format!("ls {}", home.display()), 30)
            .await
            .expect("ran");
        assert!(
            !out.to_string().contains("hub.db"),
            "the data directory looks empty: {out}"
        );
        let out = run("echo kept > note.txt && cat note.txt && pwd".into(), 30)
            .await
            .expect("ran");
        assert!(out.to_string().contains("kept"), "{out}");
        let dir = lab.ctx.project_dir.clone().expect("project dir");
        assert_eq!(
            std::fs::read_to_string(dir.join("note.txt")).expect("written through"),
            "kept\n"
        );
        // A timeout still ends the confined command and what it started.
        let started = std::time::Instant::now();
        let out = run("sleep 60 & sleep 60".into(), 1).await.expect("ran");
        assert_eq!(out["timedOut"], true, "{out}");
        assert!(started.elapsed() < Duration::from_secs(20));
        computer.shutdown().await;
    }

    #[tokio::test]
    async fn the_owners_setting_opens_and_closes_the_home_network() {
        let lab = lab();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "on the LAN" }));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let fetch = || {
            lab.call(
                "computer_web_fetch",
                json!({ "url": format!("http://{addr}/") }),
            )
        };
        let refused = fetch().await.expect_err("loopback is refused by default");
        assert!(refused.to_string().contains("127.0.0.1"), "{refused}");
        lab.computer.set_allow_private_network(true);
        let page = fetch().await.expect("allowed by the owner");
        assert_eq!(page["text"], "on the LAN");
        lab.computer.set_allow_private_network(false);
        fetch().await.expect_err("closed again");
        server.abort();
    }

    #[tokio::test]
    async fn handlers_work_in_the_project_directory() {
        let lab = lab();
        lab.call(
            "computer_file_write",
            json!({ "path": "docs/a.txt", "content": "one\ntwo\n" }),
        )
        .await
        .expect("write");
        let page = lab
            .call(
                "computer_file_read",
                json!({ "path": "docs/a.txt", "offset": 2 }),
            )
            .await
            .expect("read");
        assert_eq!(page["text"], "two\n");
        let err = lab
            .call("computer_file_read", json!({ "path": "../../hub.db" }))
            .await
            .expect_err("outside");
        assert!(
            matches!(&err, ToolError::Failed(m) if m.contains("outside the project directory")),
            "{err:?}"
        );
        let err = lab
            .call("computer_file_read", json!({ "nope": 1 }))
            .await
            .expect_err("bad arguments");
        assert!(matches!(err, ToolError::Invalid(_)), "{err:?}");
        let ran = lab
            .call(
                "computer_terminal_run",
                json!({ "command": "cat docs/a.txt" }),
            )
            .await
            .expect("run");
        assert_eq!(ran["output"], "one\ntwo\n");
        assert_eq!(ran["exitCode"], 0);
        let err = lab
            .call(
                "computer_terminal_run",
                json!({ "command": "true", "timeout_secs": 601 }),
            )
            .await
            .expect_err("timeout over the maximum");
        assert!(matches!(err, ToolError::Invalid(_)), "{err:?}");
        let err = lab
            .call(
                "computer_web_fetch",
                json!({ "url": "http://127.0.0.1:9/" }),
            )
            .await
            .expect_err("loopback");
        assert!(
            matches!(&err, ToolError::Failed(m) if m.contains("private, loopback")),
            "{err:?}"
        );
        let started = lab
            .call(
                "computer_terminal_start",
                json!({ "command": "exec sleep 30" }),
            )
            .await
            .expect("start");
        let listed = lab
            .call("computer_terminal_list", json!({}))
            .await
            .expect("list");
        assert_eq!(listed["processes"][0]["id"], started["id"]);
        lab.computer.shutdown().await;
        let listed = lab
            .call("computer_terminal_list", json!({}))
            .await
            .expect("list");
        assert_eq!(listed["processes"], json!([]));
    }

    #[tokio::test]
    async fn commands_get_the_project_secrets_they_name() {
        let lab = lab();
        let scope = format!("project:{}", lab.ctx.project);
        lab.secrets
            .set(&scope, "DEPLOY_TOKEN", &SecretValue::new("s3cret"))
            .expect("set secret");
        let ran = lab
            .call(
                "computer_terminal_run",
                json!({ "command": "echo \"token=$DEPLOY_TOKEN\"", "secrets": ["DEPLOY_TOKEN"] }),
            )
            .await
            .expect("run");
        assert_eq!(ran["output"], "token=s3cret\n");
        // Unnamed, it is not there.
        let ran = lab
            .call(
                "computer_terminal_run",
                json!({ "command": "echo \"token=$DEPLOY_TOKEN\"" }),
            )
            .await
            .expect("run");
        assert_eq!(ran["output"], "token=\n");
        let err = lab
            .call(
                "computer_terminal_run",
                json!({ "command": "true", "secrets": ["MISSING"] }),
            )
            .await
            .expect_err("missing secret");
        assert!(
            matches!(&err, ToolError::Failed(m) if m.contains("MISSING")),
            "{err:?}"
        );
        let err = lab
            .call(
                "computer_terminal_run",
                json!({ "command": "true", "secrets": ["PATH"] }),
            )
            .await
            .expect_err("fixed variable");
        assert!(matches!(err, ToolError::Invalid(_)), "{err:?}");
    }
}
