//! `hearth run`: bind the endpoint, follow the pinned hub, keep the line to its agent
//! (`HubLink`), serve the node's API on loopback (the replica's routes and the relayed
//! ones), print status lines; on a signal, stop in order: HTTP stops accepting, the
//! event sockets close, the hub link closes, open requests finish, the sync session stops and flushes, the
//! endpoint closes, the replica checkpoints its WAL.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use crate::{
    api::{self, server::ApiServer},
    config::NodeConfig,
    hub_link::{self, HubLink},
    nodedb,
    relay_routes::relay_routes,
    run_sync_loop,
    status::{SavedStatus, StatusBoard},
    HubAddr, HubLocator, NodeError, SyncStatus,
};
use anyhow::Context;
use hearth_net::{NetSettings, NoHooks, RelaySetting};
use hearth_ui::{
    access::{Access, OwnerToken, Server},
    events::EventRing,
    API_ROOT,
};
use tokio::sync::{mpsc, watch};

/// The node API's address unless told otherwise: loopback, a port of its own (the hub's
/// is 4200), so a node may run beside a hub.
pub(crate) const DEFAULT_HTTP: &str = "127.0.0.1:4300";

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The hub's node id (saved for next time).
    #[arg(long)]
    hub: Option<iroh::EndpointId>,
    /// The hub's address, `ip:port` (repeatable; saved for next time).
    #[arg(long = "hub-addr")]
    hub_addr: Vec<SocketAddr>,
    /// UDP address of this node's endpoint.
    #[arg(long, env = "HEARTH_BIND", default_value = "0.0.0.0:0")]
    bind: SocketAddr,
    /// Relays: `off`, `default` or your own iroh-relay URL [default: the hub's relay, as
    /// saved at pairing, else none].
    #[arg(long, env = "HEARTH_RELAY")]
    relay: Option<RelaySetting>,
    /// Look the hub up on the LAN over mDNS when its saved address fails: `on` or `off`.
    #[arg(long, env = "HEARTH_MDNS", default_value = "on")]
    mdns: String,
    /// The node's HTTP API address, or `off`. An address beyond loopback also needs
    /// --http-allow-remote.
    #[arg(long, env = "HEARTH_HTTP", default_value = DEFAULT_HTTP)]
    http: String,
    /// Allow the HTTP API on an address beyond loopback. It must then sit behind a TLS
    /// proxy: the API speaks plain HTTP.
    #[arg(long, env = "HEARTH_HTTP_ALLOW_REMOTE")]
    http_allow_remote: bool,
    /// Another host name requests may address the API by (besides localhost, 127.0.0.1
    /// and [::1] with the API's port); repeat or comma-separate.
    #[arg(long = "http-host", env = "HEARTH_HTTP_HOSTS", value_delimiter = ',')]
    http_hosts: Vec<String>,
    /// Serve the web UI from this directory instead of the compiled-in files (for
    /// working on the UI without rebuilding).
    #[arg(long, env = "HEARTH_UI_DIR", hide = true)]
    ui_dir: Option<PathBuf>,
    /// Test hook: the `hearth/sync/N` versions to offer instead of this build's own
    /// (comma-separated), to play a node of another release.
    #[arg(long, env = "HEARTH_SYNC_VERSIONS", value_delimiter = ',', hide = true)]
    sync_versions: Vec<u16>,
}

fn parse_http(value: &str) -> anyhow::Result<Option<SocketAddr>> {
    match value.trim() {
        "off" => Ok(None),
        addr => Ok(Some(addr.parse().with_context(|| {
            format!("--http {addr:?} is not an address or `off`")
        })?)),
    }
}

pub(crate) async fn run(home: PathBuf, args: RunArgs) -> anyhow::Result<()> {
    let mut config = NodeConfig::load(&home)?;
    if let Some(id) = args.hub {
        config.hub = Some(HubAddr {
            id: id.to_string(),
            addrs: args.hub_addr.clone(),
            relay: None,
        });
        config.save(&home)?;
    } else if !args.hub_addr.is_empty() {
        if let Some(hub) = &mut config.hub {
            hub.addrs = args.hub_addr.clone();
            config.save(&home)?;
        }
    }
    let scope = config.scope.clone();
    let hub = config.hub.ok_or(NodeError::NoHub)?;
    let hub_id = hub.endpoint_id()?;
    let hub_addr = HubLocator {
        id: hub_id,
        addrs: hub.addrs.clone(),
        relay: hub.relay.as_deref().and_then(|r| r.parse().ok()),
        mdns: matches!(args.mdns.as_str(), "on" | "true" | "1"),
    };
    let http = parse_http(&args.http)?;

    let store = super::open_store(&home)?;
    // `hearth note …` in another process writes the same replica: replicate those edits.
    store.watch_external_writes()?;
    let secret = hearth_net::load_or_create_secret_key(&home.join("secret.key"))?;
    let net = NetSettings {
        bind: args.bind,
        relay: RelaySetting::for_node(args.relay, hub_addr.relay.as_ref()),
    };
    // A node accepts no incoming protocols: it only dials its hub.
    let endpoint = hearth_net::bind_endpoint(secret, &net, Vec::new(), None::<NoHooks>)
        .await
        .context("binding the node endpoint")?;

    // Sync starts first, so setting up the API below stays off a reconnect's path; its
    // status lines wait in the channel until the ready line is out.
    let versions = if args.sync_versions.is_empty() {
        hearth_protocol::SYNC_VERSIONS.to_vec()
    } else {
        args.sync_versions.clone()
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop_sync, sync_stopped) = watch::channel(false);
    let sync = tokio::spawn(run_sync_loop(
        endpoint.clone(),
        hub_addr.clone(),
        versions,
        store.clone(),
        tx,
        async move {
            let mut rx = sync_stopped;
            let _ = rx.wait_for(|s| *s).await;
        },
    ));

    // The line to the hub's agent (chat, approvals, settings, devices): relayed, never
    // waited for; requests answer 503 `hub_unreachable` at once while it is down.
    let link = HubLink::start(endpoint.clone(), hub_addr.clone());
    // The numbered event stream: the replica's document events from now on, and the
    // hub's events for this device (chat, approvals, devices) while the link is up.
    let events = Arc::new(EventRing::new());
    hub_link::publish_into(&link, &events);
    let listener = match http {
        Some(addr) => Some(api::server::bind(addr, args.http_allow_remote).await?),
        None => None,
    };
    let api_url = match &listener {
        Some(l) => Some(format!("http://{}{API_ROOT}", l.local_addr()?)),
        None => None,
    };
    let board = Arc::new(
        StatusBoard::new(hub_id.to_string(), api_url, SavedStatus::load(&home))
            .for_device(endpoint.id().to_string(), scope),
    );
    let mut server = match listener {
        Some(listener) => {
            let port = listener.local_addr()?.port();
            // The owner's credentials for this node's API: its own token, its own sessions.
            let access = Arc::new(Access::new(
                OwnerToken::load_or_create(&home)?,
                Arc::new(nodedb::open_sessions(&home)?),
                Server::Node.cookie_name(&endpoint.id().to_string()),
                port,
                args.http_hosts
                    .iter()
                    .map(|h| h.trim().to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .collect(),
            ));
            let state =
                api::NodeApiState::new(store.clone(), access, events.clone(), board.clone());
            let routes = api::routes(&state).merge(relay_routes(link.clone()));
            Some(ApiServer::start(
                listener,
                api::router(state, routes, args.ui_dir.clone()),
                &home,
            )?)
        }
        None => None,
    };
    events.relay_documents(store.clone());
    let http_shown = server
        .as_ref()
        .map_or_else(|| "off".to_string(), |s| s.addr.to_string());
    println!(
        "hearth ready id={} hub={} http={http_shown}",
        endpoint.id(),
        hub_id
    );

    let status_home = home.clone();
    let printer_board = board.clone();
    let printer = tokio::spawn(async move {
        while let Some(status) = rx.recv().await {
            if let Some(next) = printer_board.report(&status) {
                if let Err(e) = next.save(&status_home) {
                    tracing::warn!(error = %e, "cannot save the sync status");
                }
            }
            match status {
                SyncStatus::Connecting => tracing::debug!("connecting to hub"),
                SyncStatus::Connected { version } => println!("hearth connected version={version}"),
                SyncStatus::Path { path } => println!("hearth path={path}"),
                SyncStatus::CaughtUp { received_whole, sent_whole, synced, ms, tx_bytes, rx_bytes } => println!(
                    "hearth caught-up received_whole={received_whole} sent_whole={sent_whole} synced={synced} ms={ms} tx_bytes={tx_bytes} rx_bytes={rx_bytes}"
                ),
                SyncStatus::Disconnected { reason, retry_in } => {
                    println!("hearth disconnected retry_ms={} reason={reason}", retry_in.as_millis());
                }
                SyncStatus::Incompatible { message, retry_in } => {
                    tracing::error!(%message, "cannot sync with the hub");
                    println!("hearth incompatible retry_ms={} reason={message}", retry_in.as_millis());
                }
            }
        }
    });
    hearth_net::shutdown_signal().await;
    // In order: no new requests; event sockets close (1001) and the relays stop; open
    // requests finish; then the sync session flushes and the endpoint closes.
    if let Some(s) = server.as_mut() {
        s.stop_accepting();
    }
    events.shutdown().await;
    // Relayed streams (a chat's answer) end with the link, so the drain is short.
    link.shutdown().await;
    if let Some(s) = server {
        s.drain(Duration::from_secs(10)).await;
    }
    let _ = stop_sync.send(true);
    if let Err(e) = sync.await {
        tracing::warn!(error = %e, "the sync loop ended abnormally");
    }
    let _ = printer.await;
    endpoint.close().await;
    tokio::task::spawn_blocking(move || store.checkpoint_blocking()).await??;
    Ok(())
}
