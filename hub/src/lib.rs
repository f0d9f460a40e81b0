//! hearth-hub: the daemon on the owner's home machine.
//!
//! Today it owns the document store and the device registry, pairs devices over
//! `hearth/pair/N`, serves `hearth/sync/N` to paired devices over iroh, advertises itself
//! over mDNS, and serves the document and device API over HTTP. The agent (so far its
//! model providers), channels and the scheduler grow here next.
//!
//! - [`settings`]: the one place configuration is read: process settings (defaults,
//!   `hub.json`, `HEARTH_*` variables, flags) and runtime settings (in `hub.db`);
//! - [`devices`]: paired devices, pairing requests and tickets (`hub.db`);
//! - [`access`]: the handshake hook that refuses unpaired and revoked keys, and the
//!   tracker that cuts revoked devices off;
//! - [`projects`]: which project a name or id means; the `general` project by id;
//! - [`pair_service`]: the `hearth/pair/N` handler (device codes; on `/2` the approval
//!   names the hub's relay);
//! - [`sync_service`]: the `hearth/sync/N` handler (every version the hub speaks);
//! - [`rpc_service`]: the `hearth/rpc/N` handler: requests a node relays from its UI,
//!   checked against the device's current scope and admin flag, answered by the API's
//!   own handlers, and the event stream;
//! - [`versions_service`]: the unversioned `hearth/versions` handler (which versions the
//!   hub speaks, for devices that share none);
//! - [`hubdb`]: the one owner of `hub.db`: pragmas, the numbered migrations of every hub
//!   table, refusing a newer schema version;
//! - [`api`]: the HTTP API, one router at `/api/v1` behind the owner access guard;
//! - [`owner`]: the owner token, login links and browser sessions;
//! - [`chat`]: chat turns (owned by the hub, stopped at shutdown) and their event streams;
//! - [`events`]: the hub's one numbered event stream (documents, chat, devices) with a
//!   ring for resuming, which the API's WebSocket serves;
//! - [`launch`]: starts everything and shuts it down in order;
//! - [`cli`]: the `hearth-hub` command line;
//! - [`agent`]: the agent's parts; so far the model providers;
//! - [`plugins`]: plugins (MCP servers, the built-in computer) in `hub.db`, and the
//!   supervisor that runs their servers and registers their tools;
//! - [`computer`]: the built-in computer plugin (project files, terminal, web fetch);
//! - [`secrets`]: provider keys and project secrets, AES-256-GCM at rest;
//! - [`scheduler`]: schedules, their runs, tasks' agent jobs and reminders;
//! - [`notify`]: notifications (kept, published, handed to channels, quiet in quiet
//!   hours), the approvals scheduled runs wait for, and the read side the API lists;
//! - [`channels`]: the interface message channels implement, and the Telegram channel
//!   (started after the hub is ready, stopped before the chat turns are).
//!
//! Architecture Invariant: no connection on `hearth/sync/1` or `hearth/rpc/1` from a key
//! that is not a paired, unrevoked device gets past the TLS handshake hook.

pub mod access;
pub mod agent;
pub mod api;
pub mod channels;
pub mod chat;
pub mod chat_cli;
pub mod cli;
pub mod computer;
pub mod devices;
pub mod events;
pub mod hub_client;
pub mod hubdb;
pub mod notify;
pub mod owner;
pub mod pair_service;
pub mod plugins;
pub mod projects;
pub mod rpc_service;
pub mod scheduler;
pub mod secrets;
pub mod settings;
pub mod sync_service;
pub mod versions_service;

use std::{future::Future, net::SocketAddr};

use std::sync::Arc;

use hearth_protocol::{alpns, Family, VersionInfo, ALPN_VERSIONS, RPC_VERSIONS};
use hearth_sync::DocumentStore;
use iroh::protocol::Router;

pub use settings::HubSettings;

/// Why the hub could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// The data directory could not be created.
    #[error("data directory {path}: {source}")]
    Home {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The store failed to open.
    #[error(transparent)]
    Store(#[from] hearth_sync::StoreError),
    /// The device registry failed.
    #[error(transparent)]
    Devices(#[from] devices::DeviceError),
    /// `hub.db` cannot be used (e.g. it is from a newer release).
    #[error(transparent)]
    HubDb(#[from] hubdb::HubDbError),
    /// The general project could not be found or made.
    #[error(transparent)]
    Project(#[from] projects::ProjectError),
    /// The agent could not start.
    #[error(transparent)]
    Agent(#[from] agent::runner::AgentError),
    /// The secret store failed.
    #[error(transparent)]
    Secrets(#[from] secrets::SecretError),
    /// The owner token or sessions failed.
    #[error(transparent)]
    Owner(#[from] owner::OwnerError),
    /// Settings are invalid.
    #[error(transparent)]
    Settings(#[from] settings::SettingsError),
    /// The plugins could not be read.
    #[error(transparent)]
    Plugins(#[from] plugins::PluginError),
    /// The computer plugin's store could not be opened.
    #[error(transparent)]
    PluginStore(#[from] plugins::kv::KvError),
    /// The notifications could not be opened.
    #[error(transparent)]
    Notify(#[from] notify::NotifyError),
    /// The schedules could not be opened.
    #[error(transparent)]
    Schedule(#[from] scheduler::ScheduleError),
    /// The Telegram channel could not be opened.
    #[error(transparent)]
    Telegram(#[from] channels::telegram::TelegramError),
    /// The identity key failed.
    #[error(transparent)]
    Identity(#[from] hearth_net::IdentityError),
    /// The endpoint failed.
    #[error(transparent)]
    Net(#[from] hearth_net::NetError),
    /// The HTTP listener failed.
    #[error("cannot listen for HTTP on {addr}: {source}")]
    Http {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running hub.
pub struct Hub {
    /// The iroh endpoint id (the hub's identity).
    pub id: iroh::EndpointId,
    /// UDP addresses the endpoint listens on.
    pub sync_addrs: Vec<SocketAddr>,
    /// Where the HTTP API listens, if enabled.
    pub http_addr: Option<SocketAddr>,
    store: DocumentStore,
    router: Router,
    chat: Arc<chat::ChatService>,
    events: Arc<events::EventHub>,
    notifier: Arc<notify::Notifier>,
    task_jobs: scheduler::tasks::FeedLoop,
    reminders: scheduler::tasks::FeedLoop,
    plugins: Arc<plugins::Plugins>,
    scheduler: Arc<scheduler::Scheduler>,
    telegram: Arc<channels::telegram::Telegram>,
    computer: Arc<computer::Computer>,
    http: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
    advertiser: Option<hearth_net::discovery::Advertiser>,
    stop_watch: tokio::sync::watch::Sender<bool>,
    revocations: tokio::task::JoinHandle<()>,
    addr_task: tokio::task::JoinHandle<()>,
}

/// Writes the endpoint's address to `path` whenever it changes (checked every second for
/// the first minute, then every 30 s). Aborted at shutdown.
async fn record_address(endpoint: iroh::Endpoint, path: std::path::PathBuf) {
    let mut last = String::new();
    for round in 0u32.. {
        let now = serde_json::to_string(&endpoint.addr()).unwrap_or_default();
        if now != last {
            if let Err(e) = std::fs::write(&path, &now) {
                tracing::warn!(error = %e, path = %path.display(), "cannot record the hub's address");
            }
            last = now;
        }
        let pause = if round < 60 { 1 } else { 30 };
        tokio::time::sleep(std::time::Duration::from_secs(pause)).await;
    }
}

/// Starts the hub: store, device registry, iroh endpoint with the access hook, sync and
/// pair handlers, revocation watcher, mDNS advertiser, HTTP API.
pub async fn launch(settings: HubSettings) -> Result<Hub, HubError> {
    let home_err = |source| HubError::Home {
        path: settings.home.clone(),
        source,
    };
    hearth_net::files::ensure_private_dir(&settings.home).map_err(home_err)?;
    // Refuse a hub.db from a newer release before anything reads or migrates it.
    let hub_db = settings.home.join("hub.db");
    hubdb::check(&hub_db)?;
    let store_path = settings.home.join("hearth.db");
    hearth_net::files::secure_db_files(&store_path).map_err(home_err)?;
    let store = DocumentStore::open(&store_path)?;
    // `hearth` CLI commands run against the hub's store too; replicate their edits.
    store.watch_external_writes()?;
    let secret = hearth_net::load_or_create_secret_key(&settings.home.join("secret.key"))?;
    let registry = Arc::new(devices::DeviceRegistry::open(&hub_db)?);
    registry.reset_online()?;
    let tracker = Arc::new(access::ConnectionTracker::default());
    // Every protocol version the hub speaks is an ALPN of its own, highest first, so the
    // TLS handshake picks the highest version a device shares.
    let sync_alpns = alpns(Family::Sync, &settings.sync_versions);
    let pair_alpns = alpns(Family::Pair, &settings.pair_versions);
    let rpc_alpns = alpns(Family::Rpc, RPC_VERSIONS);
    let mut all_alpns: Vec<Vec<u8>> = sync_alpns
        .iter()
        .chain(&pair_alpns)
        .chain(&rpc_alpns)
        .cloned()
        .collect();
    all_alpns.push(ALPN_VERSIONS.to_vec());
    let endpoint = hearth_net::bind_endpoint(
        secret,
        &settings.net,
        all_alpns,
        Some(access::AccessHook::new(registry.clone())),
    )
    .await?;
    let id = endpoint.id();
    let sync_addrs = endpoint.bound_sockets();
    // `hearth-hub ticket` reads where the hub listens from `hub.addr`; the address (direct
    // addresses, home relay) can change after start, so keep the file current.
    let addr_task = tokio::spawn(record_address(
        endpoint.clone(),
        settings.home.join("hub.addr"),
    ));
    let sync = sync_service::SyncService::new(store.clone(), tracker.clone(), registry.clone());
    // Approvals name the relay the hub is on now (its home relay once connected), or the
    // one the owner configured while the hub is still reaching it.
    let configured_relay = settings.net.relay.custom_url().cloned();
    let addr_watch = endpoint.watch_addr();
    let pair = pair_service::PairService::new(
        registry.clone(),
        settings.name.clone(),
        settings.pair_require_ticket,
    )
    .with_relay(move || {
        use iroh::Watcher;
        let now = addr_watch.clone().get();
        let home = now.relay_urls().next().cloned();
        home.or(configured_relay.clone())
    });
    let mut router = Router::builder(endpoint)
        // Turns away pairing floods at their first packet; other ALPNs pass.
        .incoming_filter(pair.incoming_filter());
    for alpn in sync_alpns {
        router = router.accept(alpn, sync.clone());
    }
    for alpn in pair_alpns {
        router = router.accept(alpn, pair.clone());
    }
    // Answers 503 until the API's state exists (below).
    let rpc = rpc_service::RpcService::new(registry.clone(), tracker.clone());
    for alpn in rpc_alpns {
        router = router.accept(alpn, rpc.clone());
    }
    let versions = VersionInfo {
        sync: settings.sync_versions.clone(),
        pair: settings.pair_versions.clone(),
        rpc: RPC_VERSIONS.to_vec(),
    };
    tracing::info!(sync = ?versions.sync, pair = ?versions.pair, "protocol versions");
    let router = router
        .accept(
            ALPN_VERSIONS,
            versions_service::VersionsService::new(versions),
        )
        .spawn();
    let (stop_watch, stop_rx) = tokio::sync::watch::channel(false);
    let revocations = tokio::spawn(access::watch_devices(
        registry.clone(),
        tracker.clone(),
        stop_rx,
    ));
    // mDNS is optional: a failure is logged and the hub carries on.
    let advertiser = match (settings.mdns, sync_addrs.iter().find(|a| a.is_ipv4())) {
        (true, Some(addr)) => {
            match hearth_net::discovery::Advertiser::start(id, &settings.name, addr.port()) {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::warn!(error = %e, "mDNS advertising failed; devices can still pair with a ticket");
                    None
                }
            }
        }
        _ => None,
    };

    // The agent: the `general` project always exists; every project has a directory.
    let general = projects::ensure_general(&store, &hub_db).await?;
    let projects_dir = settings.home.join("projects");
    ensure_project_dirs(&store, &projects_dir).await;
    let secrets = Arc::new(secrets::SecretStore::open(
        &hub_db,
        &settings.home.join("server.secret"),
    )?);
    // Runtime settings live in hub.db; flags only seed the first start.
    let runtime = Arc::new(settings::RuntimeStore::open(&hub_db)?);
    let now = runtime.seed(&settings.seeds)?;
    let provider = chat::provider_for(&now.chat_model, &settings.provider_urls, &secrets)
        .map_err(|e| HubError::Agent(agent::runner::AgentError::Invalid(e)))?;
    let agent_config = agent::runner::AgentConfig {
        model: now.chat_model.model.clone(),
        projects_dir: Some(projects_dir.clone()),
        summary_model: now.summary_model.as_ref().map(|m| m.model.clone()),
        instructions: now.instructions.clone(),
        approval_timeout: now.approval_timeout(),
        ..agent::runner::AgentConfig::default()
    };
    let agent = Arc::new(agent::runner::Agent::new(
        store.clone(),
        provider,
        agent_config,
        &hub_db,
    )?);
    let redactor = secrets.redactor()?;
    secrets::set_log_redactor(redactor.clone());
    agent.set_redactor(redactor);
    agent.set_secrets(secrets.clone());
    // Plugins: the built-in computer exists from the first start; the supervisor that
    // runs the plugins' servers starts last, in the background.
    let plugin_store = Arc::new(plugins::PluginStore::open(&hub_db)?);
    plugin_store.ensure_builtin()?;
    // Commands run confined where MCP servers are (Linux with bubblewrap): the data
    // directory hidden but for the project's own.
    let confine_commands = match plugins::sandbox::decide(
        plugins::SandboxMode::Auto,
        plugins::sandbox::find_bwrap(std::env::var_os("PATH").as_deref()),
    ) {
        plugins::sandbox::Decision::Bubblewrap(bwrap) => Some(computer::CommandConfinement {
            bwrap,
            data_dir: std::fs::canonicalize(&settings.home).unwrap_or(settings.home.clone()),
        }),
        plugins::sandbox::Decision::Unconfined(why) => {
            tracing::warn!(%why, "the computer plugin's commands run unconfined");
            None
        }
    };
    let computer = computer::Computer::new(computer::ComputerConfig {
        confine_commands,
        kv: Some(plugins::kv::PluginKv::open(&hub_db, plugins::COMPUTER)?),
        ..computer::ComputerConfig::default()
    });
    let plugin_deps = plugins::SupervisorDeps {
        store: Arc::new(plugins::PluginStore::open(&hub_db)?),
        registry: agent.tools().clone(),
        secrets: Some(secrets.clone()),
        computer: computer_tools(&computer),
    };
    // The one numbered event stream: chat (hooked by the chat service), documents, devices.
    let events = Arc::new(events::EventHub::new());
    let notifier = Arc::new(notify::Notifier::open(&hub_db, events.clone())?);
    let chat = Arc::new(chat::ChatService::new(
        agent,
        store.clone(),
        secrets,
        settings.provider_urls.clone(),
        projects_dir,
        general,
        events.clone(),
    ));
    let schedules = Arc::new(scheduler::ScheduleStore::open(&hub_db)?);
    // Its own connection: the scheduler's data_version poll sees its writes too.
    let task_schedules = Arc::new(scheduler::ScheduleStore::open(&hub_db)?);
    tracing::debug!(%general, "general project ready");
    // The owner's credential for the API: created at first start, read by the CLI.
    let token = owner::OwnerToken::load_or_create(&settings.home)?;

    let mut http = None;
    let mut http_addr = None;
    let mut listener = None;
    if let Some(addr) = settings.http {
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "the HTTP API listens beyond loopback: it speaks plain HTTP and must sit behind a TLS proxy");
            eprintln!(
                "WARNING: the HTTP API listens on {addr}, beyond loopback. It speaks plain HTTP: \
                 put it behind a TLS proxy, and list the proxy's host name with --http-host."
            );
        }
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HubError::Http { addr, source })?;
        let bound = l
            .local_addr()
            .map_err(|source| HubError::Http { addr, source })?;
        http_addr = Some(bound);
        // `hearth-hub chat` and `hearth-hub open` find the running hub's API here.
        if let Err(e) = std::fs::write(settings.home.join("hub.http"), bound.to_string()) {
            tracing::warn!(error = %e, "cannot record the HTTP address in hub.http");
        }
        listener = Some(l);
    }
    // Without an HTTP listener (port 0) the guard is never run: only relayed requests
    // reach the API, through the rpc service's own checks.
    let access = Arc::new(api::guard::Access::new(
        token,
        Arc::new(owner::open_sessions(&hub_db)?),
        api::guard::cookie_name(&id.to_string()),
        http_addr.map_or(0, |a| a.port()),
        settings.http_hosts.clone(),
    ));
    // The Telegram channel polls in its own task while a token is stored (never delays
    // readiness); the last step here that can fail, so no task is left behind by one.
    let telegram = channels::telegram::Telegram::start(
        &settings.telegram_api,
        &hub_db,
        chat.clone(),
        &notifier,
    )?;
    // Never delays readiness: servers start in the supervisor's own tasks.
    let plugins = plugins::Plugins::start(
        plugins::SupervisorConfig::new(settings.home.clone()),
        plugin_deps,
        plugin_store,
    );
    // Like the plugins: started once the hub is ready, never delaying it.
    let scheduler = scheduler::Scheduler::start(
        scheduler::SchedulerDeps {
            store: schedules,
            runtime: runtime.clone(),
            agent: chat.agent.clone(),
            secrets: chat.secrets.clone(),
            urls: chat.urls.clone(),
            notifier: notifier.clone(),
            projects_dir: Some(chat.projects_dir.clone()),
            clock: Arc::new(scheduler::SystemClock),
        },
        scheduler::SchedulerConfig::default(),
    );
    // Tasks' agent jobs and people's reminders, from the store's change feed.
    let task_jobs = scheduler::tasks::TaskFollower::new(
        store.clone(),
        task_schedules.clone(),
        runtime.clone(),
        general,
    )
    .nudging(scheduler.clone());
    let reminders = scheduler::reminders::Reminders::new(
        store.clone(),
        task_schedules,
        runtime.clone(),
        notifier.clone(),
    );
    let state = api::ApiState {
        store: store.clone(),
        registry: registry.clone(),
        tracker: tracker.clone(),
        chat: chat.clone(),
        runtime,
        access,
        plugins: plugins.clone(),
        notifier: notifier.clone(),
        scheduler: scheduler.clone(),
        telegram: telegram.clone(),
    };
    rpc.serve(state.clone());
    if let Some(listener) = listener {
        let app = api::router(state, settings.ui_dir.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(hearth_ui::http_listener(listener), app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "HTTP server failed");
            }
        });
        http = Some((tx, task));
    }
    // Started last, once nothing above can fail (its relays hold the stream).
    events.start(store.clone(), registry.clone());
    // Approvals a scheduled run waits for reach the owner as notifications.
    notifier.follow_agent(chat.agent.subscribe());
    let task_jobs = task_jobs.start();
    let reminders = reminders.start();
    tracing::info!(%id, ?sync_addrs, ?http_addr, relay = %settings.net.relay, "hub started");
    tracing::info!("{}", settings::away_from_home_notice(&settings.net.relay));
    Ok(Hub {
        id,
        sync_addrs,
        http_addr,
        store,
        router,
        chat,
        events,
        notifier,
        task_jobs,
        reminders,
        plugins,
        scheduler,
        telegram,
        computer,
        http,
        advertiser,
        stop_watch,
        revocations,
        addr_task,
    })
}

impl Hub {
    /// The document store.
    pub fn store(&self) -> &DocumentStore {
        &self.store
    }

    /// Runs until `signal` completes, then shuts down in order: HTTP, sync sessions and
    /// the endpoint, then a WAL checkpoint.
    pub async fn run_until(self, signal: impl Future<Output = ()>) {
        signal.await;
        self.shutdown().await;
    }

    /// Shuts down in order: the HTTP server stops accepting; Telegram stops taking
    /// messages; the scheduler stops (no run starts, its runs are stopped and joined);
    /// chat turns are stopped (their streams end, so the server's open responses finish,
    /// and Telegram's replies send their last edit); the plugins' servers
    /// and the computer plugin's background processes are stopped (their process groups
    /// killed); the server drains; the iroh router
    /// lets sync sessions flush; the store checkpoints its WAL.
    pub async fn shutdown(self) {
        drop(self.advertiser);
        self.addr_task.abort();
        let _ = self.stop_watch.send(true);
        let _ = self.revocations.await;
        let http = self.http.map(|(tx, task)| {
            let _ = tx.send(());
            task
        });
        // Before the turns stop: no message is taken that could not be answered (an
        // update not yet confirmed stays with Telegram for the next start).
        self.telegram.stop_intake();
        // Before the chat service stops the agent: scheduled runs end as `aborted`
        // through the scheduler (recorded, not notified as failures) and none starts.
        self.scheduler.shutdown().await;
        self.chat.shutdown(std::time::Duration::from_secs(5)).await;
        // Right after: its replies end with their turns' streams.
        self.telegram.shutdown().await;
        self.task_jobs.shutdown().await;
        self.reminders.shutdown().await;
        // After the turns: no tool call is left waiting on a server.
        self.plugins.shutdown().await;
        self.notifier.shutdown().await;
        // After the turns: kills the computer plugin's background processes.
        self.computer.shutdown().await;
        // After the turns' last events: closes every event socket and turn stream.
        self.events.shutdown().await;
        if let Some(mut task) = http {
            if tokio::time::timeout(std::time::Duration::from_secs(10), &mut task)
                .await
                .is_err()
            {
                tracing::warn!("HTTP connections did not close in time; dropping them");
                task.abort();
            }
        }
        if let Err(e) = self.router.shutdown().await {
            tracing::warn!(error = %e, "router shutdown");
        }
        let store = self.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.checkpoint_blocking()).await;
        tracing::info!("hub stopped");
    }
}

/// Creates `projects/<id>` for every project (the agent's working directory there):
/// named by id, never by a name a peer could set to `../x`.
async fn ensure_project_dirs(store: &DocumentStore, dir: &std::path::Path) {
    let Ok(page) = store
        .list(hearth_sync::Filter {
            limit: 10_000,
            ..hearth_sync::Filter::new(hearth_sync::Kind::Project)
        })
        .await
    else {
        return;
    };
    for p in page.data {
        chat::ensure_project_dir(dir, p.id);
    }
}

/// The built-in computer plugin's tools, registered by the plugin supervisor while the
/// `computer` plugin is enabled; its row's `allow_private_network` setting (the owner's
/// choice, off by default) lets `web_fetch` reach the home network.
fn computer_tools(computer: &Arc<computer::Computer>) -> plugins::supervisor::BuiltinTools {
    let computer = computer.clone();
    Box::new(move |settings| {
        let allow = settings
            .get(computer::ALLOW_PRIVATE_NETWORK)
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        computer.set_allow_private_network(allow);
        crate::computer::tools(&computer)
    })
}
