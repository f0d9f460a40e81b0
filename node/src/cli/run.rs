//! `hearth run`: bind the endpoint, follow the pinned hub, print status lines.

use std::{net::SocketAddr, path::PathBuf};

use crate::{
    config::NodeConfig, run_sync_loop, status::SavedStatus, HubAddr, HubLocator, NodeError,
    SyncStatus,
};
use anyhow::Context;
use hearth_net::{NetSettings, NoHooks, RelaySetting};
use tokio::sync::mpsc;

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
    /// Test hook: the `hearth/sync/N` versions to offer instead of this build's own
    /// (comma-separated), to play a node of another release.
    #[arg(long, env = "HEARTH_SYNC_VERSIONS", value_delimiter = ',', hide = true)]
    sync_versions: Vec<u16>,
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
    let hub = config.hub.ok_or(NodeError::NoHub)?;
    let hub_id = hub.endpoint_id()?;
    let hub_addr = HubLocator {
        id: hub_id,
        addrs: hub.addrs.clone(),
        relay: hub.relay.as_deref().and_then(|r| r.parse().ok()),
        mdns: matches!(args.mdns.as_str(), "on" | "true" | "1"),
    };

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
    println!("hearth ready id={} hub={}", endpoint.id(), hub_id);

    let versions = if args.sync_versions.is_empty() {
        hearth_protocol::SYNC_VERSIONS.to_vec()
    } else {
        args.sync_versions.clone()
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let status_home = home.clone();
    let printer = tokio::spawn(async move {
        let mut saved = SavedStatus::default();
        while let Some(status) = rx.recv().await {
            if let Some(next) = SavedStatus::from_sync(&status, &saved) {
                if let Err(e) = next.save(&status_home) {
                    tracing::warn!(error = %e, "cannot save the sync status");
                }
                saved = next;
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
    run_sync_loop(
        endpoint.clone(),
        hub_addr,
        versions,
        store.clone(),
        tx,
        hearth_net::shutdown_signal(),
    )
    .await;
    let _ = printer.await;
    endpoint.close().await;
    tokio::task::spawn_blocking(move || store.checkpoint_blocking()).await??;
    Ok(())
}
