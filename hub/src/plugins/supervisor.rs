//! The plugin supervisor: one task that keeps the running MCP servers equal to what
//! `hub.db` says. It reads the plugins at start and whenever the database changed
//! (`PRAGMA data_version`, polled every second, or at once when the API nudges it), and
//! starts, stops or restarts servers to match; it registers the built-in computer
//! plugin's tools while that plugin is enabled.
//!
//! Each server has a task of its own: start (spawn or connect, handshake with a timeout),
//! list its tools (all pages) and register them in the agent's [`ToolRegistry`] (cached in
//! `plugin_tools`), follow `tools/list_changed`, and when the server dies remove its tools
//! and start it again with exponential backoff (1 s doubling to 60 s). A server that
//! fails or hangs affects nothing but itself. States are published on a watch channel
//! ([`Plugins::states`]). The supervisor is started after the hub is ready (it never
//! delays readiness) and stopped in the hub's shutdown, which kills every server's
//! process group.
//!
//! This module never decides permissions and never reads a secret's value itself (the
//! MCP client resolves bindings at spawn).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hearth_sync::DocId;
use serde::Serialize;
use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};

use super::{
    mcp::{self, Launch},
    sandbox::{self, Decision},
    store::{CachedTool, Plugin, PluginStore, Transport, COMPUTER},
};
use crate::{
    agent::{
        registry::{ToolDescriptor, ToolRegistry, ToolSource},
        tools::Risk,
    },
    secrets::SecretStore,
};

/// A server, by plugin and server name.
pub type ServerKey = (String, String);

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Being started (spawned, handshake, tool listing).
    Starting,
    /// Its tools are registered.
    Running,
    /// It died; waiting to start again.
    Restarting,
    /// It could not be started; tried again after a pause.
    Failed,
    /// Not running (its plugin is disabled).
    Stopped,
}

/// One server's state, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// Where it is.
    pub state: Phase,
    /// The last error (why it failed or died).
    pub error: Option<String>,
    /// Its process (bubblewrap's when sandboxed).
    pub pid: Option<u32>,
    /// Tools registered.
    pub tools: usize,
    /// Times it was started again after dying.
    pub restarts: u32,
    /// Whether it runs sandboxed.
    pub sandboxed: bool,
    /// Why it is not sandboxed, if it is not.
    pub sandbox_note: Option<String>,
}

impl ServerStatus {
    /// The state of a server that is not running.
    pub fn stopped(sandbox: &Decision) -> Self {
        Self {
            state: Phase::Stopped,
            error: None,
            pid: None,
            tools: 0,
            restarts: 0,
            sandboxed: sandbox.sandboxed(),
            sandbox_note: sandbox.reason().map(str::to_string),
        }
    }
}

/// Exponential backoff between restarts: `first`, doubling, at most `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    next: Duration,
}

impl Backoff {
    /// Starts at `first`.
    pub fn new(first: Duration, cap: Duration) -> Self {
        Self {
            first,
            cap,
            next: first,
        }
    }

    /// The next pause; the one after is twice as long, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.cap);
        now
    }

    /// Back to the first pause (after a server ran long enough).
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// The longest pause.
    pub fn cap(&self) -> Duration {
        self.cap
    }
}

/// How the supervisor runs.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// The hub's data directory (`<home>`): projects are `<home>/projects/<id>`, plugin
    /// directories `<home>/plugins/<name>`, and sandboxed servers cannot see it.
    pub data_dir: PathBuf,
    /// How long a server's handshake may take.
    pub init_timeout: Duration,
    /// How often `hub.db` is checked for changes.
    pub poll: Duration,
    /// The first pause before a restart.
    pub backoff_first: Duration,
    /// The longest pause before a restart.
    pub backoff_cap: Duration,
    /// Where `bwrap` is (found on `PATH` by [`SupervisorConfig::new`]).
    pub bwrap: Option<PathBuf>,
}

impl SupervisorConfig {
    /// The defaults for `data_dir`: a 20 s handshake, a 1 s poll, 1 s → 60 s backoff,
    /// `bwrap` looked up on the hub's `PATH`.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            init_timeout: Duration::from_secs(20),
            poll: Duration::from_secs(1),
            backoff_first: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(60),
            bwrap: sandbox::find_bwrap(std::env::var_os("PATH").as_deref()),
        }
    }
}

/// The built-in computer plugin's tools for its row's settings (called when it is
/// enabled and whenever its settings change; registered while it is enabled).
pub type BuiltinTools =
    Box<dyn Fn(&serde_json::Map<String, serde_json::Value>) -> Vec<ToolDescriptor> + Send + Sync>;

/// What the supervisor works with.
pub struct SupervisorDeps {
    /// Its own connection to the plugins (its commits are not its own changes to watch).
    pub store: Arc<PluginStore>,
    /// The agent's tools.
    pub registry: Arc<ToolRegistry>,
    /// Project secrets, for secret bindings.
    pub secrets: Option<Arc<SecretStore>>,
    /// The computer plugin's tools.
    pub computer: BuiltinTools,
}

enum Command {
    Reconcile,
    Shutdown(oneshot::Sender<()>),
}

/// The running supervisor's handle: its states, a nudge, and its shutdown.
pub struct Plugins {
    store: Arc<PluginStore>,
    commands: mpsc::Sender<Command>,
    states: watch::Receiver<BTreeMap<ServerKey, ServerStatus>>,
    task: Mutex<Option<JoinHandle<()>>>,
    config: SupervisorConfig,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins").finish_non_exhaustive()
    }
}

impl Plugins {
    /// Starts the supervisor; it reads the plugins and starts their servers in the
    /// background (nothing here waits for a server). `store` is the callers' connection
    /// (the API's), apart from the supervisor's own in `deps`.
    pub fn start(
        config: SupervisorConfig,
        deps: SupervisorDeps,
        store: Arc<PluginStore>,
    ) -> Arc<Self> {
        let data_dir = config
            .data_dir
            .canonicalize()
            .unwrap_or_else(|_| config.data_dir.clone());
        let config = SupervisorConfig { data_dir, ..config };
        if cfg!(target_os = "linux") && config.bwrap.is_none() {
            tracing::warn!("bubblewrap (bwrap) is not installed: MCP servers will run unconfined, able to read the hub's data directory");
        }
        let (commands, rx) = mpsc::channel(16);
        let (states_tx, states) = watch::channel(BTreeMap::new());
        let supervisor = Supervisor {
            config: config.clone(),
            deps: Arc::new(deps),
            states: Arc::new(states_tx),
            servers: BTreeMap::new(),
            retiring: Vec::new(),
            computer: None,
        };
        let task = tokio::spawn(supervisor.run(rx));
        Arc::new(Self {
            store,
            commands,
            states,
            task: Mutex::new(Some(task)),
            config,
        })
    }

    /// The plugins in `hub.db` (blocking calls).
    pub fn store(&self) -> &Arc<PluginStore> {
        &self.store
    }

    /// Reconciles now rather than at the next poll (after the API changed a plugin).
    pub fn nudge(&self) {
        let _ = self.commands.try_send(Command::Reconcile);
    }

    /// Every supervised server's state.
    pub fn states(&self) -> BTreeMap<ServerKey, ServerStatus> {
        self.states.borrow().clone()
    }

    /// A watch of the states, for waiting on a change.
    pub fn watch(&self) -> watch::Receiver<BTreeMap<ServerKey, ServerStatus>> {
        self.states.clone()
    }

    /// How `spec` would run on this machine (sandboxed or not, and why).
    pub fn sandbox_for(&self, spec: &super::store::ServerSpec) -> Decision {
        decision(&self.config, spec)
    }

    /// Stops every server (process groups killed) and the supervisor.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Shutdown(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

fn decision(config: &SupervisorConfig, spec: &super::store::ServerSpec) -> Decision {
    match spec.transport {
        Transport::Stdio { .. } => sandbox::decide(spec.sandbox, config.bwrap.clone()),
        Transport::Http { .. } => {
            Decision::Unconfined("a remote server: nothing runs on this machine".into())
        }
    }
}

struct ServerTask {
    launch: Launch,
    stop: oneshot::Sender<()>,
    handle: JoinHandle<()>,
}

struct Supervisor {
    config: SupervisorConfig,
    deps: Arc<SupervisorDeps>,
    states: Arc<watch::Sender<BTreeMap<ServerKey, ServerStatus>>>,
    servers: BTreeMap<ServerKey, ServerTask>,
    /// Tasks of servers stopped for good, finishing their stop.
    retiring: Vec<JoinHandle<()>>,
    /// The computer plugin's registration: `Some((project, settings))` while registered.
    computer: Option<(Option<DocId>, serde_json::Map<String, serde_json::Value>)>,
}

impl Supervisor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let mut tick = tokio::time::interval(self.config.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen: Option<i64> = None;
        let done = loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Reconcile) => self.reconcile().await,
                    Some(Command::Shutdown(done)) => break Some(done),
                    None => break None,
                },
                _ = tick.tick() => {
                    let store = self.deps.store.clone();
                    let version = tokio::task::spawn_blocking(move || store.data_version()).await;
                    match version {
                        Ok(Ok(v)) if seen == Some(v) => {}
                        Ok(Ok(v)) => {
                            seen = Some(v);
                            self.reconcile().await;
                        }
                        Ok(Err(e)) => tracing::warn!(error = %e, "cannot check plugins for changes"),
                        Err(e) => tracing::warn!(error = %e, "plugin check failed"),
                    }
                }
            }
        };
        let stopping: Vec<_> = std::mem::take(&mut self.servers).into_values().collect();
        for s in &stopping {
            self.deps.registry.remove_plugin(&s.launch.plugin);
        }
        stop_all(stopping, std::mem::take(&mut self.retiring)).await;
        if self.computer.take().is_some() {
            self.deps.registry.remove_plugin(COMPUTER);
        }
        tracing::info!("plugin servers stopped");
        if let Some(done) = done {
            let _ = done.send(());
        }
    }

    async fn reconcile(&mut self) {
        let store = self.deps.store.clone();
        let plugins = match tokio::task::spawn_blocking(move || store.list()).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read plugins");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read plugins");
                return;
            }
        };
        self.reconcile_computer(&plugins).await;
        let mut desired: BTreeMap<ServerKey, Launch> = BTreeMap::new();
        for p in plugins.iter().filter(|p| p.enabled && !p.builtin) {
            for spec in &p.servers {
                desired.insert(
                    (p.name.clone(), spec.name.clone()),
                    self.launch(p, spec.clone()),
                );
            }
        }
        // Stop what is gone or changed; a changed server's new task waits for the old.
        let mut previous: BTreeMap<ServerKey, JoinHandle<()>> = BTreeMap::new();
        let keys: Vec<ServerKey> = self.servers.keys().cloned().collect();
        for key in keys {
            if desired.get(&key) == self.servers.get(&key).map(|s| &s.launch) {
                continue;
            }
            if let Some(task) = self.servers.remove(&key) {
                tracing::info!(plugin = %key.0, server = %key.1, "stopping MCP server");
                let _ = task.stop.send(());
                previous.insert(key, task.handle);
            }
        }
        for (key, launch) in desired {
            if self.servers.contains_key(&key) {
                continue;
            }
            let (stop, stopped) = oneshot::channel();
            let before = previous.remove(&key);
            let (deps, states, config) =
                (self.deps.clone(), self.states.clone(), self.config.clone());
            let l = launch.clone();
            let handle = tokio::spawn(async move {
                if let Some(before) = before {
                    let _ = before.await;
                }
                run_server(l, deps, states, config, stopped).await;
            });
            self.servers.insert(
                key,
                ServerTask {
                    launch,
                    stop,
                    handle,
                },
            );
        }
        // Servers stopped for good finish in the background (each stop is bounded), so
        // reconciling never waits on a server; shutdown waits for them.
        self.retiring.retain(|h| !h.is_finished());
        self.retiring.extend(previous.into_values());
    }

    async fn reconcile_computer(&mut self, plugins: &[Plugin]) {
        let want = plugins
            .iter()
            .find(|p| p.name == COMPUTER && p.builtin && p.enabled)
            .map(|p| (p.project, p.settings.clone()));
        if want == self.computer {
            return;
        }
        match &want {
            Some((project, settings)) => {
                let project = *project;
                let tools: Vec<ToolDescriptor> = (self.deps.computer)(settings)
                    .into_iter()
                    .map(|t| ToolDescriptor {
                        only_in: project,
                        ..t
                    })
                    .collect();
                // Cached like a server's tools, so permissions and the CLI know them.
                let now = now_ms();
                let cached: Vec<CachedTool> = tools
                    .iter()
                    .map(|t| CachedTool {
                        plugin: COMPUTER.into(),
                        server: "builtin".into(),
                        name: t.name.clone(),
                        description: t.description.clone(),
                        schema: t.schema.clone(),
                        risky: t.risk == Risk::Risky,
                        discovered_at: now,
                    })
                    .collect();
                let store = self.deps.store.clone();
                let saved = tokio::task::spawn_blocking(move || {
                    store.cache_tools(COMPUTER, "builtin", &cached)
                })
                .await;
                if !matches!(saved, Ok(Ok(()))) {
                    tracing::warn!("cannot cache the computer plugin's tools");
                }
                self.deps.registry.set_source(
                    ToolSource::Plugin {
                        plugin: COMPUTER.into(),
                        server: None,
                    },
                    tools,
                );
                tracing::info!("computer plugin enabled");
            }
            None => {
                self.deps.registry.remove_plugin(COMPUTER);
                tracing::info!("computer plugin disabled");
            }
        }
        self.computer = want;
    }

    fn launch(&self, plugin: &Plugin, spec: super::store::ServerSpec) -> Launch {
        let data_dir = self.config.data_dir.clone();
        Launch {
            plugin: plugin.name.clone(),
            sandbox: decision(&self.config, &spec),
            spec,
            env: plugin.env.clone(),
            project: plugin.project,
            project_dir: plugin
                .project
                .map(|p| data_dir.join("projects").join(p.to_string())),
            plugin_dir: data_dir.join("plugins").join(&plugin.name),
            data_dir,
            init_timeout: self.config.init_timeout,
        }
    }
}

/// Stops the servers' tasks (and waits for those already stopping), up to 5 s (each
/// kills its process group within about 2 s), then aborts the rest.
async fn stop_all(tasks: Vec<ServerTask>, mut handles: Vec<JoinHandle<()>>) {
    for t in tasks {
        let _ = t.stop.send(());
        handles.push(t.handle);
    }
    let all = futures_util::future::join_all(handles.iter_mut());
    if tokio::time::timeout(Duration::from_secs(5), all)
        .await
        .is_err()
    {
        tracing::warn!("MCP servers did not stop in time; aborting them");
        for h in &handles {
            h.abort();
        }
    }
}

use crate::hubdb::now_ms;

/// One server's life until `stop`: start, register, follow, restart.
async fn run_server(
    launch: Launch,
    deps: Arc<SupervisorDeps>,
    states: Arc<watch::Sender<BTreeMap<ServerKey, ServerStatus>>>,
    config: SupervisorConfig,
    mut stop: oneshot::Receiver<()>,
) {
    let key: ServerKey = (launch.plugin.clone(), launch.spec.name.clone());
    let source = ToolSource::Plugin {
        plugin: launch.plugin.clone(),
        server: Some(launch.spec.name.clone()),
    };
    let mut status = ServerStatus {
        state: Phase::Starting,
        ..ServerStatus::stopped(&launch.sandbox)
    };
    let publish = |status: &ServerStatus| {
        states.send_modify(|m| {
            m.insert(key.clone(), status.clone());
        });
    };
    if let Some(why) = launch.sandbox.reason() {
        if matches!(launch.spec.transport, Transport::Stdio { .. }) {
            tracing::warn!(plugin = %key.0, server = %key.1, "MCP server runs unconfined (as the hub's user, able to read its data): {why}");
        }
    }
    for dir in [Some(&launch.plugin_dir), launch.project_dir.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Err(e) = hearth_net::files::ensure_private_dir(dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot create a plugin directory");
        }
    }
    let mut backoff = Backoff::new(config.backoff_first, config.backoff_cap);
    'life: loop {
        status.state = Phase::Starting;
        status.pid = None;
        publish(&status);
        let connected = tokio::select! {
            c = mcp::connect(&launch, deps.secrets.clone()) => c,
            _ = &mut stop => break 'life,
        };
        let started = Instant::now();
        let ran = match connected {
            Err(e) => {
                tracing::warn!(plugin = %key.0, server = %key.1, error = %e, "MCP server failed to start");
                status.state = Phase::Failed;
                status.error = Some(e.to_string());
                None
            }
            Ok(mut conn) => {
                status.pid = conn.pid;
                let changed = conn.tools_notify();
                let registered = register(&launch, &conn.peer(), &deps, &source).await;
                let why = match registered {
                    Err(e) => died_or(&mut conn, e).await,
                    Ok(n) => {
                        status.state = Phase::Running;
                        status.tools = n;
                        status.error = None;
                        publish(&status);
                        tracing::info!(plugin = %key.0, server = %key.1, tools = n, pid = ?conn.pid, sandboxed = launch.sandbox.sandboxed(), "MCP server running");
                        loop {
                            tokio::select! {
                                _ = &mut stop => {
                                    deps.registry.set_source(source.clone(), Vec::new());
                                    conn.shutdown().await;
                                    break 'life;
                                }
                                _ = changed.notified() => {
                                    match register(&launch, &conn.peer(), &deps, &source).await {
                                        Ok(n) => {
                                            tracing::info!(plugin = %key.0, server = %key.1, tools = n, "MCP server's tools changed");
                                            status.tools = n;
                                            publish(&status);
                                        }
                                        Err(e) => break died_or(&mut conn, e).await,
                                    }
                                }
                                why = conn.ended() => break why,
                            }
                        }
                    }
                };
                deps.registry.set_source(source.clone(), Vec::new());
                conn.shutdown().await;
                tracing::warn!(plugin = %key.0, server = %key.1, error = %why, "MCP server stopped; restarting it");
                status.state = Phase::Restarting;
                status.error = Some(why);
                status.tools = 0;
                status.restarts += 1;
                Some(started)
            }
        };
        // A server that ran a good while starts again quickly.
        if ran.is_some_and(|s| s.elapsed() >= backoff.cap()) {
            backoff.reset();
        }
        status.pid = None;
        publish(&status);
        let pause = backoff.next_delay();
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = &mut stop => break 'life,
        }
    }
    states.send_modify(|m| {
        m.remove(&key);
    });
}

/// Why a request to the server failed: its death, if it died (a kill lands while its
/// tools are listed: "the server exited (signal: 9)" says more than "transport closed"),
/// else the request's own error.
async fn died_or(conn: &mut mcp::Connection, error: String) -> String {
    tokio::time::timeout(Duration::from_millis(500), conn.ended())
        .await
        .unwrap_or(error)
}

/// Lists the server's tools and registers them (replacing its earlier ones), caching
/// them in `plugin_tools`; how many the registry took.
async fn register(
    launch: &Launch,
    peer: &rmcp::Peer<rmcp::service::RoleClient>,
    deps: &Arc<SupervisorDeps>,
    source: &ToolSource,
) -> Result<usize, String> {
    let tools = mcp::list_tools(peer, launch.init_timeout)
        .await
        .map_err(|e| e.to_string())?;
    let (descriptors, cached) = mcp::descriptors(launch, &tools, peer, now_ms());
    deps.registry.set_source(source.clone(), descriptors);
    let registered = deps
        .registry
        .all()
        .iter()
        .filter(|t| &t.source == source)
        .count();
    let (store, plugin, server) = (
        deps.store.clone(),
        launch.plugin.clone(),
        launch.spec.name.clone(),
    );
    let saved =
        tokio::task::spawn_blocking(move || store.cache_tools(&plugin, &server, &cached)).await;
    if !matches!(saved, Ok(Ok(()))) {
        tracing::warn!(plugin = %launch.plugin, server = %launch.spec.name, "cannot cache the server's tools");
    }
    Ok(registered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let delays: Vec<u64> = (0..9).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }
}
