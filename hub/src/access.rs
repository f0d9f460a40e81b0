//! Who may connect, and cutting off those who may no longer.
//!
//! [`AccessHook`] runs right after the TLS handshake and denies by default: only
//! `hearth/pair/N` and the unversioned `hearth/versions` are open to any key; every other
//! ALPN (sync and rpc of any version, and whatever a later version adds) is refused (QUIC
//! close 403 with a reason the device shows) unless the key is a paired, unrevoked device
//! in the [`DeviceRegistry`].
//!
//! [`ConnectionTracker`] knows every open sync session and rpc connection and the grant
//! each was started with: a device has at most one of each (the newest replaces an older
//! one, which after a sleep or a change of network is dead but not yet timed out), a
//! revocation closes both at once, and [`watch_devices`] closes the sync session when
//! the device's scope changes, and the rpc connection when its scope or admin flag
//! changes, so the device reconnects under its new grant and an open relayed event
//! stream ends at once.

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

use crate::devices::{DeviceRegistry, Grant};

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
/// Reason sent when the owner gave or took a device's admin flag.
pub const ADMIN_CHANGED_REASON: &[u8] = b"this device's admin flag changed; reconnecting";
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

/// Which protocol a tracked connection speaks: a device may have one of each open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Line {
    /// Its replication session (`hearth/sync/N`).
    Sync,
    /// Its relayed requests and event stream (`hearth/rpc/N`).
    Rpc,
}

/// A tracked connection and the grant it was opened under.
#[derive(Debug)]
struct Tracked {
    conn: Connection,
    scope: Option<String>,
    admin: bool,
}

/// The open sync session and the open rpc connection of each device, with the scope
/// (and, for rpc, the admin flag) each was opened under.
#[derive(Debug, Default)]
pub struct ConnectionTracker {
    open: Mutex<HashMap<(EndpointId, Line), Tracked>>,
}

impl ConnectionTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(EndpointId, Line), Tracked>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the newest sync session of a device, closing the one it replaces.
    pub fn add(&self, conn: &Connection, scope: Option<String>) {
        self.track(Line::Sync, conn, scope, false);
    }

    /// Records the newest rpc connection of a device with the grant it was opened
    /// under, closing the one it replaces.
    pub fn add_rpc(&self, conn: &Connection, grant: &Grant) {
        self.track(Line::Rpc, conn, grant.scope.clone(), grant.admin);
    }

    fn track(&self, line: Line, conn: &Connection, scope: Option<String>, admin: bool) {
        let tracked = Tracked {
            conn: conn.clone(),
            scope,
            admin,
        };
        let old = self.lock().insert((conn.remote_id(), line), tracked);
        if let Some(old) = old {
            if old.conn.stable_id() != conn.stable_id() {
                tracing::info!(peer = %conn.remote_id(), ?line, "a newer connection replaces the device's older one");
                old.conn.close(CLOSE_RESTART.into(), REPLACED_REASON);
            }
        }
    }

    /// Forgets a closed connection (unless a newer one has replaced it already).
    pub fn remove(&self, conn: &Connection) {
        let mut open = self.lock();
        for line in [Line::Sync, Line::Rpc] {
            let key = (conn.remote_id(), line);
            if open
                .get(&key)
                .is_some_and(|t| t.conn.stable_id() == conn.stable_id())
            {
                open.remove(&key);
            }
        }
    }

    /// Whether the device has an open sync session.
    pub fn is_online(&self, id: &EndpointId) -> bool {
        self.lock().contains_key(&(*id, Line::Sync))
    }

    /// Closes every connection of `id` with a 403 and `reason`; returns how many it
    /// closed.
    pub fn close(&self, id: &EndpointId, reason: &[u8]) -> usize {
        [Line::Sync, Line::Rpc]
            .into_iter()
            .map(|line| self.close_line(id, line, CLOSE_NOT_ALLOWED, reason))
            .sum()
    }

    fn close_line(&self, id: &EndpointId, line: Line, code: u32, reason: &[u8]) -> usize {
        let tracked = self.lock().remove(&(*id, line));
        match tracked {
            Some(t) => {
                t.conn.close(code.into(), reason);
                1
            }
            None => 0,
        }
    }

    fn online(&self) -> Vec<(EndpointId, Line, Grant)> {
        self.lock()
            .iter()
            .map(|((id, line), t)| {
                (
                    *id,
                    *line,
                    Grant {
                        scope: t.scope.clone(),
                        admin: t.admin,
                    },
                )
            })
            .collect()
    }
}

/// What [`watch_devices`] does to one tracked connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The device is no longer allowed: close all its connections.
    Revoked,
    /// Its scope changed: this connection restarts under the new one.
    Rescoped(Line),
    /// Its admin flag changed: its rpc connection restarts.
    AdminChanged,
}

/// Judges a connection opened under `then` against the device's grant `now`.
fn judge(line: Line, then: &Grant, now: Option<&Grant>) -> Option<Verdict> {
    let Some(now) = now else {
        return Some(Verdict::Revoked);
    };
    if now.scope != then.scope {
        return Some(Verdict::Rescoped(line));
    }
    // Replication does not depend on the admin flag; relayed requests do.
    if line == Line::Rpc && now.admin != then.admin {
        return Some(Verdict::AdminChanged);
    }
    None
}

/// Closes the connections of devices that are no longer allowed (revoked by any process:
/// the API, or `hearth-hub devices revoke` in another process), restarts sync sessions
/// whose scope changed, and cuts rpc connections whose scope or admin flag changed (so
/// an open relayed event stream ends at once; the hub judges every relayed request on
/// the device's current grant anyway). Checks the online devices every 200 ms, so each
/// takes effect well within a second. Runs until `stop` flips.
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
        let verdicts =
            tokio::task::spawn_blocking(move || -> Result<Vec<(EndpointId, Verdict)>, String> {
                let mut now: HashMap<EndpointId, Option<Grant>> = HashMap::new();
                let mut out = Vec::new();
                for (id, line, then) in online {
                    let grant = match now.get(&id) {
                        Some(g) => g.clone(),
                        None => {
                            let g = reg.grant(&id).map_err(|e| e.to_string())?;
                            now.insert(id, g.clone());
                            g
                        }
                    };
                    if let Some(v) = judge(line, &then, grant.as_ref()) {
                        out.push((id, v));
                    }
                }
                Ok(out)
            })
            .await;
        match verdicts {
            Ok(Ok(verdicts)) => {
                for (id, verdict) in verdicts {
                    match verdict {
                        Verdict::Revoked => {
                            let n = tracker.close(&id, REVOKED_REASON);
                            if n > 0 {
                                tracing::warn!(peer = %id, connections = n, "device revoked: connections closed");
                            }
                        }
                        Verdict::Rescoped(line) => {
                            tracker.close_line(&id, line, CLOSE_RESTART, SCOPE_CHANGED_REASON);
                            tracing::info!(peer = %id, ?line, "device scope changed: connection restarted");
                        }
                        Verdict::AdminChanged => {
                            tracker.close_line(&id, Line::Rpc, CLOSE_RESTART, ADMIN_CHANGED_REASON);
                            tracing::info!(peer = %id, "device admin flag changed: relayed connection restarted");
                        }
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "revocation check failed"),
            Err(e) => tracing::warn!(error = %e, "revocation check panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(scope: Option<&str>, admin: bool) -> Grant {
        Grant {
            scope: scope.map(str::to_string),
            admin,
        }
    }

    #[test]
    fn revocation_scope_and_admin_changes_are_judged_per_line() {
        let full = grant(None, false);
        assert_eq!(judge(Line::Sync, &full, None), Some(Verdict::Revoked));
        assert_eq!(judge(Line::Rpc, &full, None), Some(Verdict::Revoked));
        assert_eq!(judge(Line::Sync, &full, Some(&full)), None);
        let narrowed = grant(Some("p"), false);
        assert_eq!(
            judge(Line::Sync, &full, Some(&narrowed)),
            Some(Verdict::Rescoped(Line::Sync))
        );
        assert_eq!(
            judge(Line::Rpc, &full, Some(&narrowed)),
            Some(Verdict::Rescoped(Line::Rpc))
        );
        let admin = grant(None, true);
        assert_eq!(
            judge(Line::Sync, &full, Some(&admin)),
            None,
            "sync ignores admin"
        );
        assert_eq!(
            judge(Line::Rpc, &admin, Some(&full)),
            Some(Verdict::AdminChanged)
        );
    }
}
