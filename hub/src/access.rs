//! Who may connect, and cutting off those who may no longer.
//!
//! [`AccessHook`] runs right after the TLS handshake and denies by default: only
//! `hearth/pair/N` and the unversioned `hearth/versions` are open to any key; every other
//! ALPN (sync and rpc of any version, and whatever a later version adds) is refused (QUIC
//! close 403 with a reason the device shows) unless the key is a paired, unrevoked device
//! in the [`DeviceRegistry`].
//!
//! [`ConnectionTracker`] knows every open sync session and the scope it was started
//! with: a device has at most one (the newest replaces an older one, which after a sleep
//! or a change of network is dead but not yet timed out), a revocation closes it at once,
//! and [`watch_devices`] closes it when the device's scope changes, so the device
//! reconnects under its new scope.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use hearth_protocol::{alpn_version, Family, ALPN_VERSIONS};
use iroh::{
    endpoint::{AfterHandshakeOutcome, Connection, EndpointHooks},
    EndpointId,
};

use crate::devices::DeviceRegistry;

/// QUIC application close code for a refused or revoked device.
pub const CLOSE_NOT_ALLOWED: u32 = 403;
/// Reason sent to a device that was never paired.
pub const NOT_PAIRED_REASON: &[u8] = b"not paired: run `hearth pair` on this device";
/// QUIC application close code for a session replaced or restarted by the hub; the
/// device reconnects.
pub const CLOSE_RESTART: u32 = 409;
/// Reason sent when a newer session of the same device replaces an older one.
pub const REPLACED_REASON: &[u8] = b"replaced by a newer session of this device";
/// Reason sent when the owner changed what the device may see.
pub const SCOPE_CHANGED_REASON: &[u8] = b"this device's scope changed; reconnecting";
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
        if alpn_version(Family::Pair, alpn).is_some() || alpn == ALPN_VERSIONS {
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

/// The open sync session of each device, with the scope it runs under.
#[derive(Debug, Default)]
pub struct ConnectionTracker {
    open: Mutex<HashMap<EndpointId, (Connection, Option<String>)>>,
}

impl ConnectionTracker {
    /// Records the newest session of a device, closing the one it replaces.
    pub fn add(&self, conn: &Connection, scope: Option<String>) {
        let old = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            open.insert(conn.remote_id(), (conn.clone(), scope))
        };
        if let Some((old, _)) = old {
            if old.stable_id() != conn.stable_id() {
                tracing::info!(peer = %conn.remote_id(), "a newer session replaces the device's older one");
                old.close(CLOSE_RESTART.into(), REPLACED_REASON);
            }
        }
    }

    /// Forgets a closed session (unless a newer one has replaced it already).
    pub fn remove(&self, conn: &Connection) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open
            .get(&conn.remote_id())
            .is_some_and(|(c, _)| c.stable_id() == conn.stable_id())
        {
            open.remove(&conn.remote_id());
        }
    }

    /// Whether the device has an open session.
    pub fn is_online(&self, id: &EndpointId) -> bool {
        self.open
            .lock()
            .map(|o| o.contains_key(id))
            .unwrap_or(false)
    }

    /// Closes the session of `id` with a 403 and `reason`; returns how many it closed.
    pub fn close(&self, id: &EndpointId, reason: &[u8]) -> usize {
        self.close_with(id, CLOSE_NOT_ALLOWED, reason)
    }

    fn close_with(&self, id: &EndpointId, code: u32, reason: &[u8]) -> usize {
        let conn = self
            .open
            .lock()
            .map(|mut o| o.remove(id))
            .unwrap_or_default();
        match conn {
            Some((c, _)) => {
                c.close(code.into(), reason);
                1
            }
            None => 0,
        }
    }

    fn online(&self) -> Vec<(EndpointId, Option<String>)> {
        self.open
            .lock()
            .map(|o| {
                o.iter()
                    .map(|(id, (_, scope))| (*id, scope.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Closes the sessions of devices that are no longer allowed (revoked by any process:
/// the API, or `hearth-hub devices revoke` in another process) and restarts those whose
/// scope changed. Checks the online devices every 200 ms, so either takes effect well
/// within a second. Runs until `stop` flips.
pub async fn watch_devices(
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
        type Verdicts = (Vec<EndpointId>, Vec<EndpointId>);
        let verdicts = tokio::task::spawn_blocking(move || -> Result<Verdicts, String> {
            let (mut gone, mut rescoped) = (Vec::new(), Vec::new());
            for (id, scope) in online {
                if !reg.is_allowed(&id).map_err(|e| e.to_string())? {
                    gone.push(id);
                } else if reg.scope_of(&id).map_err(|e| e.to_string())? != scope {
                    rescoped.push(id);
                }
            }
            Ok((gone, rescoped))
        })
        .await;
        match verdicts {
            Ok(Ok((gone, rescoped))) => {
                for id in gone {
                    let n = tracker.close(&id, REVOKED_REASON);
                    tracing::warn!(peer = %id, connections = n, "device revoked: connections closed");
                }
                for id in rescoped {
                    tracker.close_with(&id, CLOSE_RESTART, SCOPE_CHANGED_REASON);
                    tracing::info!(peer = %id, "device scope changed: session restarted");
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "revocation check failed"),
            Err(e) => tracing::warn!(error = %e, "revocation check panicked"),
        }
    }
}
