//! Who may connect, and cutting off those who may no longer.
//!
//! [`AccessHook`] runs right after the TLS handshake: `hearth/sync/1` and `hearth/rpc/1`
//! are refused (QUIC close 403 with a reason the device shows) unless the key is a paired,
//! unrevoked device in the [`DeviceRegistry`]; `hearth/pair/1` is open to anyone.
//! [`ConnectionTracker`] knows every open device connection, so a revocation (from the
//! API, or from `hearth-hub devices revoke` in another process) closes them at once.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use hearth_protocol::{ALPN_RPC, ALPN_SYNC};
use iroh::{
    endpoint::{AfterHandshakeOutcome, Connection, EndpointHooks},
    EndpointId,
};

use crate::devices::DeviceRegistry;

/// QUIC application close code for a refused or revoked device.
pub const CLOSE_NOT_ALLOWED: u32 = 403;
/// Reason sent to a device that was never paired.
pub const NOT_PAIRED_REASON: &[u8] = b"not paired: run `hearth pair` on this device";
/// Reason sent to a revoked device.
pub const REVOKED_REASON: &[u8] =
    b"revoked: the hub's owner revoked this device; run `hearth pair` to ask again";

/// Refuses replication and RPC from keys that are not paired devices.
#[derive(Debug)]
pub struct AccessHook {
    registry: Arc<DeviceRegistry>,
}

impl AccessHook {
    /// A hook over `registry`.
    pub fn new(registry: Arc<DeviceRegistry>) -> Self {
        Self { registry }
    }
}

impl EndpointHooks for AccessHook {
    async fn after_handshake<'a>(&'a self, conn: &'a Connection) -> AfterHandshakeOutcome {
        let alpn = conn.alpn();
        if alpn != ALPN_SYNC && alpn != ALPN_RPC {
            return AfterHandshakeOutcome::Accept;
        }
        let peer = conn.remote_id();
        let registry = self.registry.clone();
        let verdict =
            tokio::task::spawn_blocking(move || -> Result<Option<&'static [u8]>, String> {
                if registry.is_allowed(&peer).map_err(|e| e.to_string())? {
                    let _ = registry.touch(&peer);
                    Ok(None)
                } else if registry.is_revoked(&peer).map_err(|e| e.to_string())? {
                    Ok(Some(REVOKED_REASON))
                } else {
                    Ok(Some(NOT_PAIRED_REASON))
                }
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        let reason = match verdict {
            Ok(None) => return AfterHandshakeOutcome::Accept,
            Ok(Some(reason)) => reason,
            Err(e) => {
                tracing::error!(%peer, error = %e, "cannot read the device registry; refusing");
                b"the hub cannot check devices right now".as_slice()
            }
        };
        tracing::warn!(%peer, alpn = %String::from_utf8_lossy(alpn), reason = %String::from_utf8_lossy(reason), "refused connection");
        AfterHandshakeOutcome::Reject {
            error_code: CLOSE_NOT_ALLOWED.into(),
            reason: reason.to_vec(),
        }
    }
}

/// Open connections per device.
#[derive(Debug, Default)]
pub struct ConnectionTracker {
    open: Mutex<HashMap<EndpointId, Vec<Connection>>>,
}

impl ConnectionTracker {
    /// Records an open connection.
    pub fn add(&self, conn: &Connection) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.entry(conn.remote_id()).or_default().push(conn.clone());
    }

    /// Forgets a closed connection.
    pub fn remove(&self, conn: &Connection) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = open.get_mut(&conn.remote_id()) {
            list.retain(|c| c.stable_id() != conn.stable_id());
            if list.is_empty() {
                open.remove(&conn.remote_id());
            }
        }
    }

    /// Whether the device has an open connection.
    pub fn is_online(&self, id: &EndpointId) -> bool {
        self.open
            .lock()
            .map(|o| o.contains_key(id))
            .unwrap_or(false)
    }

    /// Closes every connection of `id`.
    pub fn close(&self, id: &EndpointId, reason: &[u8]) -> usize {
        let conns = self
            .open
            .lock()
            .map(|mut o| o.remove(id).unwrap_or_default())
            .unwrap_or_default();
        for c in &conns {
            c.close(CLOSE_NOT_ALLOWED.into(), reason);
        }
        conns.len()
    }

    fn online(&self) -> Vec<EndpointId> {
        self.open
            .lock()
            .map(|o| o.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// Closes the connections of devices that are no longer allowed (revoked by any
/// process: the API, or `hearth-hub devices revoke` in another process). Checks the online
/// devices every 200 ms, so a revoked device is cut off well within a second. Runs until
/// `stop` flips.
pub async fn watch_revocations(
    registry: Arc<DeviceRegistry>,
    tracker: Arc<ConnectionTracker>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let online = tracker.online();
        if online.is_empty() {
            continue;
        }
        let reg = registry.clone();
        let gone = tokio::task::spawn_blocking(move || -> Result<Vec<EndpointId>, String> {
            let mut gone = Vec::new();
            for id in online {
                if !reg.is_allowed(&id).map_err(|e| e.to_string())? {
                    gone.push(id);
                }
            }
            Ok(gone)
        })
        .await;
        match gone {
            Ok(Ok(gone)) => {
                for id in gone {
                    let n = tracker.close(&id, REVOKED_REASON);
                    tracing::warn!(peer = %id, connections = n, "device revoked: connections closed");
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "revocation check failed"),
            Err(e) => tracing::warn!(error = %e, "revocation check panicked"),
        }
    }
}
