//! The `hearth/sync/N` protocol handler, registered for every sync version the hub
//! speaks: one replication session per connection.
//!
//! The access hook refuses unpaired keys on `hearth/sync/1` before any stream opens; this
//! handler checks the allowlist again itself, so a version the hook does not name yet is
//! never served to an unpaired key.
//!
//! Sessions end when their peer leaves, when a frame is bad (logged, other sessions
//! carry on), when the device is revoked (its connection is closed under it), or when
//! the router shuts down (the `shutdown` signal below).

use std::sync::Arc;

use hearth_sync::{DocumentStore, SessionConfig, SessionStats};
use iroh::{
    endpoint::Connection,
    protocol::{AcceptError, ProtocolHandler},
};
use tokio::sync::watch;

use crate::{
    access::{ConnectionTracker, CLOSE_NOT_ALLOWED, NOT_PAIRED_REASON},
    devices::DeviceRegistry,
};

/// Serves replication sessions from the hub's store.
#[derive(Debug, Clone)]
pub struct SyncService {
    store: DocumentStore,
    tracker: Arc<ConnectionTracker>,
    registry: Arc<DeviceRegistry>,
    stop: Arc<watch::Sender<bool>>,
}

impl SyncService {
    /// A service over `store`.
    pub fn new(
        store: DocumentStore,
        tracker: Arc<ConnectionTracker>,
        registry: Arc<DeviceRegistry>,
    ) -> Self {
        Self {
            store,
            tracker,
            registry,
            stop: Arc::new(watch::channel(false).0),
        }
    }
}

impl ProtocolHandler for SyncService {
    async fn accept(&self, conn: Connection) -> Result<(), AcceptError> {
        let peer = conn.remote_id();
        let version = hearth_protocol::alpn_version(hearth_protocol::Family::Sync, conn.alpn());
        let registry = self.registry.clone();
        let allowed = tokio::task::spawn_blocking(move || registry.is_allowed(&peer)).await;
        if !matches!(allowed, Ok(Ok(true))) {
            tracing::warn!(%peer, ?version, "refused sync from a key that is not a paired device");
            conn.close(CLOSE_NOT_ALLOWED.into(), NOT_PAIRED_REASON);
            return Ok(());
        }
        let mut stop = self.stop.subscribe();
        tracing::info!(%peer, ?version, "sync session started");
        let stats = Arc::new(SessionStats::default());
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        // A device paired for a project sees and writes that subtree only.
        let registry = self.registry.clone();
        let scope = match tokio::task::spawn_blocking(move || registry.scope_of(&peer)).await {
            Ok(Ok(scope)) => scope,
            _ => {
                tracing::error!(%peer, "cannot read the device's scope; closing");
                conn.close(
                    CLOSE_NOT_ALLOWED.into(),
                    b"the hub cannot check this device's scope",
                );
                return Ok(());
            }
        };
        // Tracked with the scope it runs under: a change of scope restarts the session,
        // and this session replaces an older one of the same device.
        self.tracker.add(&conn, scope.clone());
        let scope = match scope.map(|s| s.parse::<hearth_sync::DocId>()).transpose() {
            Ok(scope) => scope,
            Err(e) => {
                tracing::error!(%peer, error = %e, "device scope is not a project id; closing");
                self.tracker.remove(&conn);
                conn.close(CLOSE_NOT_ALLOWED.into(), b"this device's scope is invalid");
                return Ok(());
            }
        };
        let reg = self.registry.clone();
        let _ = tokio::task::spawn_blocking(move || reg.set_online(&peer, true)).await;
        let config = SessionConfig {
            scope,
            ..SessionConfig::default()
        };
        match hearth_net::accept_sync(self.store.clone(), &conn, config, stats.clone(), shutdown)
            .await
        {
            Ok(()) => tracing::info!(%peer, "sync session ended"),
            Err(e) => tracing::warn!(%peer, error = %e, "sync session ended with an error"),
        }
        self.tracker.remove(&conn);
        // A newer session of the same device may have replaced this one: it is online.
        if !self.tracker.is_online(&peer) {
            let registry = self.registry.clone();
            let _ = tokio::task::spawn_blocking(move || registry.set_online(&peer, false)).await;
        }
        conn.close(0u32.into(), b"session over");
        Ok(())
    }

    async fn shutdown(&self) {
        let _ = self.stop.send(true);
    }
}
