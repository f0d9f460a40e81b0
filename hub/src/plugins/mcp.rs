//! The MCP client side of one server, on `rmcp`: spawning a stdio server (a cleared
//! environment: `PATH`, `HOME`, `LANG`, `TMPDIR` and only the variables its plugin
//! declared; in its own process group; sandboxed where [`super::sandbox`] says) or
//! reaching a remote one over streamable HTTP; the handshake (the client advertises MCP
//! roots and answers with the bound project's directory, none for a global plugin);
//! listing tools; and each tool as a [`ToolDescriptor`] whose handler calls it with the
//! server's timeout.
//!
//! A server is a program the owner chose to run, but what it says is someone else's
//! words: every tool reads untrusted text, is risky unless it says it only reads
//! (`readOnlyHint`), and its errors go to the model as text. This module never decides
//! permissions, never restarts anything (the supervisor does) and never logs a secret.

use std::{
    collections::VecDeque,
    ffi::OsString,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use hearth_sync::DocId;
use rmcp::{
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
        Implementation, InitializeRequestParams, ProtocolVersion, ResourceContents,
        RootsCapabilities, Tool, ToolAnnotations,
    },
    service::{NotificationContext, RequestContext, RoleClient, RunningService},
    ClientHandler, ErrorData, Peer, ServiceExt,
};
use serde_json::Value;
use tokio::{io::AsyncReadExt, process::Child, sync::Notify, task::JoinHandle};

use super::{
    sandbox::{self, Confinement, Decision},
    store::{CachedTool, EnvBinding, EnvSource, ServerSpec, Transport},
};
use crate::{
    agent::{
        registry::{Effect, ToolDescriptor, ToolFuture, ToolHandler, ToolSource},
        tools::{Risk, ToolContext, ToolError},
    },
    secrets::{SecretStore, SecretValue},
};

/// The variables of the hub's environment every stdio server receives.
pub const BASE_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];
/// Lines of a server's standard error kept to explain a failure.
const STDERR_TAIL_LINES: usize = 20;
/// Longest standard-error line kept (the rest is cut).
const STDERR_LINE_BYTES: usize = 1024;
/// How long a stopping server may take to exit after its input closes.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// Why a server could not be started or used. The text is shown as the server's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A declared variable or header has no value.
    #[error("{0}")]
    Binding(String),
    /// The program could not be started.
    #[error("cannot start {command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The MCP handshake did not finish in time.
    #[error("no MCP handshake within {}s{}", .after.as_secs(), tail_suffix(.stderr))]
    InitTimeout {
        /// The limit.
        after: Duration,
        /// The server's last words on standard error.
        stderr: String,
    },
    /// The MCP handshake failed (the server exited, or spoke no MCP).
    #[error("MCP handshake failed: {reason}{}", tail_suffix(.stderr))]
    Init {
        /// Why.
        reason: String,
        /// The server's last words on standard error.
        stderr: String,
    },
    /// A request to the server failed.
    #[error("{0}")]
    Request(String),
    /// A remote server's address or headers are unusable.
    #[error("{0}")]
    Remote(String),
}

fn tail_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!("; its last output: {stderr}")
    }
}

/// What one server needs to start, resolved by the supervisor.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The plugin.
    pub plugin: String,
    /// The server.
    pub spec: ServerSpec,
    /// The plugin's declared variables.
    pub env: Vec<EnvBinding>,
    /// The bound project.
    pub project: Option<DocId>,
    /// The hub's data directory.
    pub data_dir: PathBuf,
    /// The bound project's directory.
    pub project_dir: Option<PathBuf>,
    /// The plugin's own directory (`<data dir>/plugins/<name>`).
    pub plugin_dir: PathBuf,
    /// How a stdio server is confined.
    pub sandbox: Decision,
    /// How long the handshake may take.
    pub init_timeout: Duration,
}

impl Launch {
    /// Where a stdio server starts: its own `cwd`, else the bound project's directory,
    /// else the plugin's directory.
    pub fn cwd(&self) -> PathBuf {
        match &self.spec.transport {
            Transport::Stdio { cwd: Some(cwd), .. } => cwd.clone(),
            _ => self
                .project_dir
                .clone()
                .unwrap_or_else(|| self.plugin_dir.clone()),
        }
    }

    /// The confinement of a stdio server.
    pub fn confinement(&self) -> Confinement {
        Confinement {
            data_dir: self.data_dir.clone(),
            project_dir: self.project_dir.clone(),
            plugin_dir: self.plugin_dir.clone(),
            cwd: self.cwd(),
        }
    }

    /// The program and arguments spawned for a stdio server (bubblewrap's when
    /// sandboxed), or `None` for a remote one.
    pub fn command_line(&self) -> Option<(OsString, Vec<OsString>)> {
        match &self.spec.transport {
            Transport::Stdio { command, args, .. } => Some(sandbox::command_line(
                &self.sandbox,
                &self.confinement(),
                command,
                args,
            )),
            Transport::Http { .. } => None,
        }
    }
}

/// Values of `bindings`: from the hub's environment (`hub_env`), literal, or from the
/// bound project's secrets (`secret`). A binding without a value is an error, so a
/// server never starts missing what it declared.
pub fn resolve_bindings(
    bindings: &[EnvBinding],
    hub_env: &dyn Fn(&str) -> Option<OsString>,
    secret: &dyn Fn(&str) -> Result<Option<SecretValue>, String>,
) -> Result<Vec<(String, OsString)>, ServerError> {
    bindings
        .iter()
        .map(|b| {
            let value = match &b.source {
                EnvSource::Hub => hub_env(&b.name).ok_or_else(|| {
                    ServerError::Binding(format!(
                        "{} is declared from the hub's environment, but the hub has no {}",
                        b.name, b.name
                    ))
                })?,
                EnvSource::Value(v) => v.into(),
                EnvSource::Secret(key) => secret(key)
                    .map_err(|e| ServerError::Binding(format!("{}: {e}", b.name)))?
                    .ok_or_else(|| {
                        ServerError::Binding(format!(
                            "{} reads the project secret {key:?}, which is not set",
                            b.name
                        ))
                    })?
                    .expose()
                    .into(),
            };
            Ok((b.name.clone(), value))
        })
        .collect()
}

/// The whole environment of a stdio server: [`BASE_ENV`] from the hub's environment
/// (those it has), then the declared bindings (which may override them). Nothing else
/// of the hub's environment reaches the server.
pub fn child_env(
    hub_env: &dyn Fn(&str) -> Option<OsString>,
    declared: Vec<(String, OsString)>,
) -> Vec<(String, OsString)> {
    let mut env: Vec<(String, OsString)> = BASE_ENV
        .iter()
        .filter_map(|k| hub_env(k).map(|v| (k.to_string(), v)))
        .collect();
    for (k, v) in declared {
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
    env
}

/// `{plugin}_{tool}` as a name every provider accepts: characters outside
/// `[a-zA-Z0-9_-]` become `_`, cut to 64.
pub fn registered_name(plugin: &str, tool: &str) -> String {
    format!("{plugin}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// A tool is safe only when it says it only reads; anything else waits for approval
/// (unless the project allows it).
pub fn risk_of(annotations: Option<&ToolAnnotations>) -> Risk {
    match annotations.and_then(|a| a.read_only_hint) {
        Some(true) => Risk::Safe,
        _ => Risk::Risky,
    }
}

/// A tool that says it reaches an open world fetches; others touch nothing outside.
pub fn effect_of(annotations: Option<&ToolAnnotations>) -> Effect {
    match annotations.and_then(|a| a.open_world_hint) {
        Some(true) => Effect::Fetches,
        _ => Effect::None,
    }
}

/// `path` as a `file://` URI (bytes outside the unreserved set and `/` percent-encoded).
pub fn file_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A call's result as the model sees it: its text (and text of embedded resources)
/// joined by newlines; the structured content when there is no text; `isError` results
/// as [`ToolError::Failed`].
pub fn result_value(result: CallToolResult) -> Result<Value, ToolError> {
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => {
                format!("[image {}, {} bytes]", i.mime_type, i.data.len() * 3 / 4)
            }
            ContentBlock::Audio(a) => {
                format!("[audio {}, {} bytes]", a.mime_type, a.data.len() * 3 / 4)
            }
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[binary resource {uri}{}]",
                    mime_type
                        .as_deref()
                        .map(|m| format!(", {m}"))
                        .unwrap_or_default()
                ),
                _ => "[resource]".into(),
            },
            ContentBlock::ResourceLink(r) => format!("[resource {}]", r.uri),
            _ => "[content this client does not show]".into(),
        })
        .collect();
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        return Err(ToolError::Failed(if text.is_empty() {
            "the tool reported an error".into()
        } else {
            text
        }));
    }
    match result.structured_content {
        Some(structured) if text.is_empty() => Ok(structured),
        _ => Ok(Value::String(text)),
    }
}

/// The client's side of the session: it offers MCP roots (the bound project's directory)
/// and hears that the server's tools changed.
#[derive(Clone)]
pub struct HearthClient {
    roots: Vec<String>,
    tools_changed: Arc<Notify>,
}

// Roots are the one way MCP tells a server which directory it may work in; rmcp marks
// them deprecated (SEP-2577) but servers still read them.
#[allow(deprecated)]
impl ClientHandler for HearthClient {
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        Ok(rmcp::model::ListRootsResult::new(
            self.roots.iter().map(rmcp::model::Root::new).collect(),
        ))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(RootsCapabilities::default());
        InitializeRequestParams::new(
            capabilities,
            Implementation::new("hearth-hub", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// The last lines a server wrote on standard error.
#[derive(Debug, Default)]
struct Tail(VecDeque<String>);

impl Tail {
    fn push(&mut self, line: String) {
        if self.0.len() == STDERR_TAIL_LINES {
            self.0.pop_front();
        }
        self.0.push_back(line);
    }

    fn text(&self) -> String {
        self.0.iter().cloned().collect::<Vec<_>>().join(" | ")
    }
}

/// Reads a server's standard error: each line is logged (debug) and the last ones kept.
/// Ends when every process holding the pipe has exited (or when aborted at stop).
async fn read_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<Tail>>,
    plugin: String,
    server: String,
) {
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let emit = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line).trim_end().to_string();
        line.clear();
        if !text.is_empty() {
            tracing::debug!(%plugin, %server, line = %text, "server stderr");
            if let Ok(mut t) = tail.lock() {
                t.push(text);
            }
        }
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&mut line);
            } else if line.len() < STDERR_LINE_BYTES {
                line.push(b);
            }
        }
    }
    emit(&mut line);
}

type Quit = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<rmcp::service::QuitReason, tokio::task::JoinError>>
            + Send,
    >,
>;

/// A started server: its MCP session, and for a stdio server its process.
pub struct Connection {
    peer: Peer<RoleClient>,
    cancel: Option<rmcp::service::RunningServiceCancellationToken>,
    quit: Option<Quit>,
    child: Option<Child>,
    stderr_task: Option<JoinHandle<()>>,
    tail: Arc<Mutex<Tail>>,
    tools_changed: Arc<Notify>,
    /// The process id of a stdio server (bubblewrap's when sandboxed).
    pub pid: Option<u32>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Starts the server of `launch` and completes the MCP handshake within its timeout.
/// `secrets` resolves secret bindings in the bound project's scope (blocking reads run
/// off the async threads).
pub async fn connect(
    launch: &Launch,
    secrets: Option<Arc<SecretStore>>,
) -> Result<Connection, ServerError> {
    let tools_changed = Arc::new(Notify::new());
    let client = HearthClient {
        roots: launch.project_dir.iter().map(|d| file_uri(d)).collect(),
        tools_changed: tools_changed.clone(),
    };
    let project = launch.project;
    let lookup = move |bindings: Vec<EnvBinding>| {
        let secrets = secrets.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let hub_env = |k: &str| std::env::var_os(k);
                let secret = |key: &str| -> Result<Option<SecretValue>, String> {
                    match (&secrets, project) {
                        (Some(s), Some(p)) => s
                            .get(&format!("project:{p}"), key)
                            .map_err(|e| e.to_string()),
                        _ => Err("secrets need the plugin bound to a project".into()),
                    }
                };
                resolve_bindings(&bindings, &hub_env, &secret)
            })
            .await
            .map_err(|e| ServerError::Binding(format!("resolving variables: {e}")))?
        }
    };
    match &launch.spec.transport {
        Transport::Stdio { .. } => {
            let declared = lookup(launch.env.clone()).await?;
            let env = child_env(&|k| std::env::var_os(k), declared);
            connect_stdio(launch, client, env, tools_changed).await
        }
        Transport::Http { url, headers } => {
            let headers = lookup(headers.clone()).await?;
            connect_http(launch, url, headers, client, tools_changed).await
        }
    }
}

async fn connect_stdio(
    launch: &Launch,
    client: HearthClient,
    env: Vec<(String, OsString)>,
    tools_changed: Arc<Notify>,
) -> Result<Connection, ServerError> {
    let Some((program, args)) = launch.command_line() else {
        return Err(ServerError::Remote("not a stdio server".into()));
    };
    let shown = sandbox::display(&program, &args);
    let cwd = launch.cwd();
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&args)
        .env_clear()
        .envs(env)
        .current_dir(&cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // The last resort if the supervisor is dropped without stopping it.
        .kill_on_drop(true);
    // Its own process group, so stopping it stops whatever it started.
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|source| ServerError::Spawn {
        command: shown.clone(),
        source,
    })?;
    let pid = child.id();
    // A start abandoned mid-handshake (the hub stopping) drops this future: the whole
    // group goes then, not only its leader (`kill_on_drop`), or a sandbox's inner
    // process could outlive it.
    let mut abandoned = GroupGuard(pid);
    let tail = Arc::new(Mutex::new(Tail::default()));
    let stderr_task = child.stderr.take().map(|e| {
        tokio::spawn(read_stderr(
            e,
            tail.clone(),
            launch.plugin.clone(),
            launch.spec.name.clone(),
        ))
    });
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        kill_group(&mut child, pid).await;
        abandoned.0 = None;
        return Err(ServerError::Init {
            reason: "no pipes to the server".into(),
            stderr: String::new(),
        });
    };
    let served = tokio::time::timeout(launch.init_timeout, client.serve((stdout, stdin))).await;
    let tail_text = || tail.lock().map(|t| t.text()).unwrap_or_default();
    let running = match served {
        Ok(Ok(running)) => running,
        Ok(Err(e)) => {
            kill_group(&mut child, pid).await;
            abandoned.0 = None;
            // Let the reader take the last lines the server wrote before it died.
            if let Some(task) = stderr_task {
                let _ = tokio::time::timeout(Duration::from_millis(200), task).await;
            }
            let status = child
                .try_wait()
                .ok()
                .flatten()
                .map(|s| format!(" (it exited: {s})"))
                .unwrap_or_default();
            return Err(ServerError::Init {
                reason: format!("{e}{status}"),
                stderr: tail_text(),
            });
        }
        Err(_) => {
            kill_group(&mut child, pid).await;
            abandoned.0 = None;
            if let Some(task) = stderr_task {
                task.abort();
            }
            return Err(ServerError::InitTimeout {
                after: launch.init_timeout,
                stderr: tail_text(),
            });
        }
    };
    abandoned.0 = None;
    Ok(Connection::new(
        running,
        Some(child),
        stderr_task,
        tail,
        tools_changed,
        pid,
    ))
}

async fn connect_http(
    launch: &Launch,
    url: &str,
    headers: Vec<(String, OsString)>,
    client: HearthClient,
    tools_changed: Arc<Notify>,
) -> Result<Connection, ServerError> {
    use rmcp::transport::{
        streamable_http_client::StreamableHttpClientTransportConfig, StreamableHttpClientTransport,
    };
    let mut map = std::collections::HashMap::new();
    for (name, value) in headers {
        let name = axum::http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ServerError::Remote(format!("header {name}: {e}")))?;
        let mut value = axum::http::HeaderValue::from_bytes(value.as_encoded_bytes())
            .map_err(|e| ServerError::Remote(format!("header {name}: {e}")))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    // reqwest is built without a default TLS provider; the hub's is ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(map),
    );
    let running = match tokio::time::timeout(launch.init_timeout, client.serve(transport)).await {
        Ok(Ok(running)) => running,
        Ok(Err(e)) => {
            return Err(ServerError::Init {
                reason: e.to_string(),
                stderr: String::new(),
            })
        }
        Err(_) => {
            return Err(ServerError::InitTimeout {
                after: launch.init_timeout,
                stderr: String::new(),
            })
        }
    };
    Ok(Connection::new(
        running,
        None,
        None,
        Arc::default(),
        tools_changed,
        None,
    ))
}

/// Kills a stdio server's whole process group (the server and anything it started).
/// Kills a process group when dropped, unless its pid was taken out.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

async fn kill_group(child: &mut Child, pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pgid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // The group may be gone already; the direct kill below covers the leader.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    #[cfg(not(unix))]
    let _ = pid;
    let _ = child.start_kill();
    let _ = child.wait().await;
}

impl Connection {
    fn new(
        running: RunningService<RoleClient, HearthClient>,
        child: Option<Child>,
        stderr_task: Option<JoinHandle<()>>,
        tail: Arc<Mutex<Tail>>,
        tools_changed: Arc<Notify>,
        pid: Option<u32>,
    ) -> Self {
        let peer = running.peer().clone();
        let cancel = Some(running.cancellation_token());
        Self {
            peer,
            cancel,
            quit: Some(Box::pin(running.waiting())),
            child,
            stderr_task,
            tail,
            tools_changed,
            pid,
        }
    }

    /// The session, for tool calls.
    pub fn peer(&self) -> Peer<RoleClient> {
        self.peer.clone()
    }

    /// Notified when the server says its tools changed.
    pub fn tools_notify(&self) -> Arc<Notify> {
        self.tools_changed.clone()
    }

    /// Resolves when the server has gone (its process exited, or its session closed),
    /// with why.
    pub async fn ended(&mut self) -> String {
        let why = {
            let child = self.child.as_mut();
            let quit = self.quit.as_mut();
            tokio::select! {
                status = async {
                    match child {
                        Some(c) => c.wait().await.map(|s| s.to_string()),
                        None => std::future::pending().await,
                    }
                } => match status {
                    Ok(s) => format!("the server exited ({s})"),
                    Err(e) => format!("the server could not be waited for: {e}"),
                },
                _ = async {
                    match quit {
                        Some(q) => q.await.ok(),
                        None => std::future::pending().await,
                    }
                } => "the server closed its MCP session".to_string(),
            }
        };
        self.quit = None;
        // A killed server's pipes close as it dies: its exit status, if it comes at
        // once, says more than the closed session.
        let why = match self.child.as_mut() {
            Some(c) if why.starts_with("the server closed") => {
                match tokio::time::timeout(Duration::from_millis(500), c.wait()).await {
                    Ok(Ok(s)) => format!("the server exited ({s})"),
                    _ => why,
                }
            }
            _ => why,
        };
        let tail = self.tail.lock().map(|t| t.text()).unwrap_or_default();
        format!("{why}{}", tail_suffix(&tail))
    }

    /// Stops the server: its session is closed (a stdio server's input ends), it gets a
    /// moment to exit, then its process group is killed.
    pub async fn shutdown(mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(quit) = self.quit.take() {
            let _ = tokio::time::timeout(EXIT_GRACE, quit).await;
        }
        if let Some(mut child) = self.child.take() {
            // A moment to exit on its own once its input closed; then the group is killed
            // either way (an exited leader may have left children behind).
            let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
            kill_group(&mut child, self.pid).await;
        }
        if let Some(task) = self.stderr_task.take() {
            task.abort();
        }
    }
}

/// Every tool the server behind `peer` lists (all pages), within `timeout`.
pub async fn list_tools(
    peer: &Peer<RoleClient>,
    timeout: Duration,
) -> Result<Vec<Tool>, ServerError> {
    match tokio::time::timeout(timeout, peer.list_all_tools()).await {
        Ok(Ok(tools)) => Ok(tools),
        Ok(Err(e)) => Err(ServerError::Request(format!("listing tools: {e}"))),
        Err(_) => Err(ServerError::Request(format!(
            "listing tools: no answer within {}s",
            timeout.as_secs()
        ))),
    }
}

/// Runs one MCP tool: calls it on the server's session with the server's timeout.
pub struct McpTool {
    peer: Peer<RoleClient>,
    tool: String,
    timeout: Duration,
}

impl ToolHandler for McpTool {
    fn call(&self, _ctx: ToolContext, args: Value) -> ToolFuture {
        let (peer, tool, timeout) = (self.peer.clone(), self.tool.clone(), self.timeout);
        Box::pin(async move {
            let mut params = CallToolRequestParams::new(tool);
            match args {
                Value::Object(map) => params = params.with_arguments(map),
                Value::Null => {}
                other => {
                    return Err(ToolError::Invalid(format!(
                        "arguments must be an object, not {other}"
                    )))
                }
            }
            // Dropping the call on timeout sends the server `notifications/cancelled`.
            match tokio::time::timeout(timeout, peer.call_tool(params)).await {
                Err(_) => Err(ToolError::TimedOut { after: timeout }),
                Ok(Err(e)) => Err(ToolError::Failed(format!("the MCP server failed: {e}"))),
                Ok(Ok(result)) => result_value(result),
            }
        })
    }
}

/// The descriptors of a server's listed tools, and the rows cached for them. A name that
/// two tools sanitise to is kept for the first only.
pub fn descriptors(
    launch: &Launch,
    tools: &[Tool],
    peer: &Peer<RoleClient>,
    discovered_at: i64,
) -> (Vec<ToolDescriptor>, Vec<CachedTool>) {
    let timeout = Duration::from_secs(launch.spec.call_timeout_secs);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut cached = Vec::new();
    for tool in tools {
        let name = registered_name(&launch.plugin, &tool.name);
        if !seen.insert(name.clone()) {
            tracing::warn!(plugin = %launch.plugin, server = %launch.spec.name, tool = %tool.name, "two tools share the name {name}; the second is skipped");
            continue;
        }
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("")
            .to_string();
        let schema = Value::Object((*tool.input_schema).clone());
        let risk = risk_of(tool.annotations.as_ref());
        cached.push(CachedTool {
            plugin: launch.plugin.clone(),
            server: launch.spec.name.clone(),
            name: name.clone(),
            description: description.clone(),
            schema: schema.clone(),
            risky: risk == Risk::Risky,
            discovered_at,
        });
        out.push(ToolDescriptor {
            name,
            description,
            schema,
            risk,
            default_on: true,
            effect: effect_of(tool.annotations.as_ref()),
            reads_untrusted: true,
            risk_of_call: None,
            only_in: launch.project,
            source: ToolSource::Plugin {
                plugin: launch.plugin.clone(),
                server: Some(launch.spec.name.clone()),
            },
            handler: Arc::new(McpTool {
                peer: peer.clone(),
                tool: tool.name.to_string(),
                timeout,
            }),
        });
    }
    (out, cached)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub_env(k: &str) -> Option<OsString> {
        match k {
            "PATH" => Some("/usr/bin:/bin".into()),
            "HOME" => Some("/home/u".into()),
            "LANG" => Some("C.UTF-8".into()),
            "HEARTH_HOME" => Some("/home/u/.hearth".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("leak".into()),
            "GITHUB_TOKEN" => Some("ghp_x".into()),
            _ => None,
        }
    }

    fn no_secret(_: &str) -> Result<Option<SecretValue>, String> {
        Ok(None)
    }

    #[test]
    fn the_environment_is_cleared_but_for_the_base_and_the_declared() {
        let bindings = vec![
            EnvBinding {
                name: "GITHUB_TOKEN".into(),
                source: EnvSource::Hub,
            },
            EnvBinding {
                name: "MODE".into(),
                source: EnvSource::Value("fast".into()),
            },
            EnvBinding {
                name: "API_KEY".into(),
                source: EnvSource::Secret("api".into()),
            },
            EnvBinding {
                name: "LANG".into(),
                source: EnvSource::Value("fr_FR.UTF-8".into()),
            },
        ];
        let secret = |k: &str| -> Result<Option<SecretValue>, String> {
            Ok((k == "api").then(|| SecretValue::new("s3cret")))
        };
        let declared = resolve_bindings(&bindings, &hub_env, &secret).expect("resolved");
        let env = child_env(&hub_env, declared);
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("PATH").as_deref(), Some("/usr/bin:/bin"));
        assert_eq!(get("HOME").as_deref(), Some("/home/u"));
        assert_eq!(
            get("LANG").as_deref(),
            Some("fr_FR.UTF-8"),
            "a binding overrides the base"
        );
        assert_eq!(get("TMPDIR"), None, "the hub has none");
        assert_eq!(get("GITHUB_TOKEN").as_deref(), Some("ghp_x"));
        assert_eq!(get("MODE").as_deref(), Some("fast"));
        assert_eq!(get("API_KEY").as_deref(), Some("s3cret"));
        assert_eq!(get("HEARTH_HOME"), None);
        assert_eq!(get("AWS_SECRET_ACCESS_KEY"), None);
        assert_eq!(env.len(), 6, "{env:?}");
    }

    #[test]
    fn a_binding_without_a_value_fails_the_start() {
        let missing_hub = [EnvBinding {
            name: "NOPE".into(),
            source: EnvSource::Hub,
        }];
        let e = resolve_bindings(&missing_hub, &hub_env, &no_secret).expect_err("missing");
        assert!(e.to_string().contains("NOPE"), "{e}");
        let missing_secret = [EnvBinding {
            name: "K".into(),
            source: EnvSource::Secret("k".into()),
        }];
        let e = resolve_bindings(&missing_secret, &hub_env, &no_secret).expect_err("missing");
        assert!(e.to_string().contains("not set"), "{e}");
        let failing = |_: &str| -> Result<Option<SecretValue>, String> { Err("locked".into()) };
        let e = resolve_bindings(&missing_secret, &hub_env, &failing).expect_err("failing");
        assert!(e.to_string().contains("locked"), "{e}");
    }

    #[test]
    fn names_are_sanitised_for_providers() {
        assert_eq!(registered_name("files", "read_file"), "files_read_file");
        assert_eq!(registered_name("gh", "repos.list/all"), "gh_repos_list_all");
        assert_eq!(registered_name("x", "naïve tool"), "x_na_ve_tool");
        let long = registered_name("plugin", &"t".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(crate::agent::registry::valid_tool_name(&long));
    }

    #[test]
    fn risk_and_effect_follow_only_explicit_hints() {
        let mut a = ToolAnnotations::new();
        assert_eq!(risk_of(None), Risk::Risky);
        assert_eq!(risk_of(Some(&a)), Risk::Risky);
        a.read_only_hint = Some(true);
        assert_eq!(risk_of(Some(&a)), Risk::Safe);
        a.read_only_hint = Some(false);
        assert_eq!(risk_of(Some(&a)), Risk::Risky);
        assert_eq!(effect_of(None), Effect::None);
        a.open_world_hint = Some(true);
        assert_eq!(effect_of(Some(&a)), Effect::Fetches);
        a.open_world_hint = Some(false);
        assert_eq!(effect_of(Some(&a)), Effect::None);
    }

    #[test]
    fn file_uris_are_escaped() {
        assert_eq!(
            file_uri(Path::new("/home/u/p 1/%x")),
            "file:///home/u/p%201/%25x"
        );
        assert_eq!(file_uri(Path::new("/a/b-c_d.e~f")), "file:///a/b-c_d.e~f");
    }

    #[test]
    fn results_become_text_structure_or_failure() {
        let text =
            CallToolResult::success(vec![ContentBlock::text("one"), ContentBlock::text("two")]);
        assert_eq!(
            result_value(text).expect("ok"),
            Value::String("one\ntwo".into())
        );
        let structured = CallToolResult::structured(serde_json::json!({"n": 1}));
        let v = result_value(structured).expect("ok");
        // rmcp also puts the JSON in a text block; either way the model sees the object.
        assert!(
            v == serde_json::json!({"n": 1}) || v == Value::String(r#"{"n":1}"#.into()),
            "{v}"
        );
        let failed = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        match result_value(failed) {
            Err(ToolError::Failed(m)) => assert_eq!(m, "no such file"),
            other => panic!("{other:?}"),
        }
    }
}
