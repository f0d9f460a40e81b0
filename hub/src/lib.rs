//! hearth-hub: the daemon on the owner's home machine.
//!
//! Today it owns the document store, serves `hearth/sync/1` to allowlisted nodes over
//! iroh, and serves the document API over HTTP. The agent, pairing, channels and the
//! scheduler arrive in later issues.
//!
//! - [`settings`]: the one place configuration is read (flags and `HEARTH_*` variables);
//! - [`access`]: the device allowlist and the handshake hook that enforces it;
//! - [`sync_service`]: the `hearth/sync/1` protocol handler;
//! - [`launch`]: starts everything and shuts it down in order;
//! - [`cli`]: the `hearth-hub` command line.
//!
//! Architecture Invariant: no connection on `hearth/sync/1` or `hearth/rpc/1` from a key
//! that is not allowlisted gets past the TLS handshake hook.

pub mod access;
pub mod cli;
pub mod settings;
pub mod sync_service;

use std::{future::Future, net::SocketAddr};

use hearth_protocol::ALPN_SYNC;
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
    http: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
}

/// Starts the hub: store, iroh endpoint with the allowlist hook, sync handler, HTTP API.
pub async fn launch(settings: HubSettings) -> Result<Hub, HubError> {
    std::fs::create_dir_all(&settings.home).map_err(|source| HubError::Home {
        path: settings.home.clone(),
        source,
    })?;
    let store = DocumentStore::open(settings.home.join("hearth.db"))?;
    // `hearth` CLI commands run against the hub's store too; replicate their edits.
    store.watch_external_writes()?;
    let secret = hearth_net::load_or_create_secret_key(&settings.home.join("secret.key"))?;
    let allowlist = access::Allowlist::new(settings.home.join("allowed_nodes"));
    let endpoint = hearth_net::bind_endpoint(
        secret,
        &settings.net,
        vec![ALPN_SYNC.to_vec()],
        Some(access::AccessHook::new(allowlist)),
    )
    .await?;
    let id = endpoint.id();
    let sync_addrs = endpoint.bound_sockets();
    let router = Router::builder(endpoint)
        .accept(ALPN_SYNC, sync_service::SyncService::new(store.clone()))
        .spawn();

    let mut http = None;
    let mut http_addr = None;
    if let Some(addr) = settings.http {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HubError::Http { addr, source })?;
        http_addr = listener.local_addr().ok();
        let app = hearth_ui::router(store.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
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
    tracing::info!(%id, ?sync_addrs, ?http_addr, relay = %settings.net.relay, "hub started");
    Ok(Hub {
        id,
        sync_addrs,
        http_addr,
        store,
        router,
        http,
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

    /// Shuts down in order.
    pub async fn shutdown(self) {
        if let Some((tx, task)) = self.http {
            let _ = tx.send(());
            let _ = task.await;
        }
        if let Err(e) = self.router.shutdown().await {
            tracing::warn!(error = %e, "router shutdown");
        }
        let store = self.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.checkpoint_blocking()).await;
        tracing::info!("hub stopped");
    }
}
