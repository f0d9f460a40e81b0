//! The node's sync status, one shape for `GET /api/v1/status` and `hearth status`
//! ([`NodeStatus`]): online or not, the pinned hub, when the replica was last known in
//! sync, how many local changes the hub has not confirmed (counted from the replica, so
//! right after a restart while offline too), the node's API, and version information
//! (the sync versions this build speaks, the session's, and which side to update when
//! they share none); and whether the connection runs direct or through the hub's relay.
//!
//! `hearth run` keeps the live status in a [`StatusBoard`] and saves its last state in
//! `$HEARTH_HOME/status.json` ([`SavedStatus`]), so `hearth status` can say something
//! when `hearth run` is not running. Holds no secrets and decides nothing; a missing or
//! unreadable file just means "unknown".

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
};

use hearth_sync::{DocumentStore, StoreError};
use serde::{Deserialize, Serialize};

use crate::{NodeError, SyncStatus};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What `status.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedStatus {
    /// `connected`, `caught-up`, `disconnected` or `incompatible`.
    pub state: String,
    /// The reason or advice, for the owner.
    #[serde(default)]
    pub detail: Option<String>,
    /// The `hearth/sync/N` version of the current or last session.
    #[serde(default)]
    pub version: Option<u16>,
    /// When the replica was last known in sync with the hub (a session caught up, or a
    /// caught-up session ended), ms since the Unix epoch.
    #[serde(default)]
    pub last_synced_at: Option<i64>,
    /// The path of the current connection: `direct` or `relay` (none while offline).
    #[serde(default)]
    pub path: Option<String>,
    /// When this was saved, ms since the Unix epoch.
    pub at_ms: i64,
    /// The `hearth run` process that saved it.
    pub pid: u32,
}

impl SavedStatus {
    fn path(home: &Path) -> PathBuf {
        home.join("status.json")
    }

    /// What to save for `status`, given the last saved one (the version and the last
    /// sync carry over); `None` for transient states not worth a write.
    pub fn from_sync(status: &SyncStatus, last: &SavedStatus) -> Option<Self> {
        let now = now_ms();
        let was_in_sync = last.state == "caught-up";
        // The path is kept while connected and cleared when the session ends.
        let mut path = None;
        let (state, detail, version, synced) = match status {
            SyncStatus::Connecting => return None,
            SyncStatus::Path { path: now } => {
                path = Some(now.to_string());
                (
                    last.state.as_str(),
                    last.detail.clone(),
                    last.version,
                    last.last_synced_at,
                )
            }
            SyncStatus::Connected { version } => {
                ("connected", None, Some(*version), last.last_synced_at)
            }
            SyncStatus::CaughtUp { .. } => {
                path = last.path.clone();
                ("caught-up", None, last.version, Some(now))
            }
            SyncStatus::Disconnected { reason, .. } => (
                "disconnected",
                Some(reason.clone()),
                last.version,
                // A caught-up session kept the replica in sync until it ended.
                if was_in_sync {
                    Some(now)
                } else {
                    last.last_synced_at
                },
            ),
            SyncStatus::Incompatible { message, .. } => (
                "incompatible",
                Some(message.clone()),
                None,
                last.last_synced_at,
            ),
        };
        Some(Self {
            state: state.into(),
            detail,
            version,
            last_synced_at: synced,
            path,
            at_ms: now,
            pid: std::process::id(),
        })
    }

    /// Saves `status.json` atomically.
    pub fn save(&self, home: &Path) -> Result<(), NodeError> {
        let path = Self::path(home);
        let text = serde_json::to_vec_pretty(self).map_err(|e| NodeError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        hearth_net::files::write_atomic(&path, &text)
            .map_err(|source| NodeError::Io { path, source })
    }

    /// The saved status, if `hearth run` saved one.
    pub fn load(home: &Path) -> Option<Self> {
        let text = std::fs::read(Self::path(home)).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

/// The node's status as the API answers it and `hearth status` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// A session with the hub is open now.
    pub online: bool,
    /// `connecting`, `connected`, `caught-up`, `disconnected`, `incompatible`, or
    /// `stopped` (no `hearth run` answers: not running, or running with `--http off`),
    /// or `unknown` (it never ran here).
    pub state: String,
    /// The reason or advice, for the owner (why disconnected; which side to update).
    pub detail: Option<String>,
    /// Since when `state` holds, ms since the Unix epoch.
    pub state_since: Option<i64>,
    /// This device's id (`None` when no `hearth run` answers).
    #[serde(default)]
    pub device: Option<String>,
    /// The project this device was paired for, if scoped (as paired: the hub's devices
    /// page has the current one). Its UI offers nothing outside it.
    #[serde(default)]
    pub scope: Option<String>,
    /// The pinned hub's id.
    pub hub: Option<String>,
    /// When the replica was last known in sync with the hub: now while online and
    /// caught up; ms since the Unix epoch.
    pub last_synced_at: Option<i64>,
    /// Local documents with changes the hub has not confirmed holding.
    pub pending_changes: u64,
    /// The node's API, e.g. `http://127.0.0.1:4300/api/v1` (`None`: not served).
    pub api: Option<String>,
    /// This build's version.
    pub version: String,
    /// The `hearth/sync/N` versions this build speaks.
    pub sync_versions: Vec<u16>,
    /// The version of the current or last session.
    pub session_version: Option<u16>,
    /// How the node reaches its hub now: `direct` or `relay` (none while offline).
    #[serde(default)]
    pub path: Option<String>,
}

impl NodeStatus {
    /// What can be said without a running `hearth run`: its last saved status, and the
    /// pending changes counted from the replica.
    pub fn stopped(hub: Option<String>, saved: Option<&SavedStatus>, pending_changes: u64) -> Self {
        Self {
            online: false,
            state: if saved.is_some() {
                "stopped"
            } else {
                "unknown"
            }
            .into(),
            detail: saved.map(|s| {
                let why = s
                    .detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                format!("no `hearth run` answers here; it last saw {}{why}", s.state)
            }),
            state_since: saved.map(|s| s.at_ms),
            device: None,
            scope: None,
            hub,
            last_synced_at: saved.and_then(|s| s.last_synced_at),
            pending_changes,
            api: None,
            version: env!("CARGO_PKG_VERSION").into(),
            sync_versions: hearth_protocol::SYNC_VERSIONS.to_vec(),
            session_version: saved.and_then(|s| s.version),
            path: None,
        }
    }
}

/// The live status of a running `hearth run`: updated from the sync loop's reports,
/// read by the API.
#[derive(Debug)]
pub struct StatusBoard {
    hub: String,
    device: Option<String>,
    scope: Option<String>,
    api: Option<String>,
    now: Mutex<(SavedStatus, bool)>,
}

impl StatusBoard {
    /// A board for the node following `hub`, serving its API at `api`, starting from
    /// the last saved status (its last sync carries over).
    pub fn new(hub: String, api: Option<String>, last: Option<SavedStatus>) -> Self {
        let start = SavedStatus {
            state: "connecting".into(),
            detail: None,
            at_ms: now_ms(),
            pid: std::process::id(),
            ..last.unwrap_or_default()
        };
        Self {
            hub,
            device: None,
            scope: None,
            api,
            now: Mutex::new((start, false)),
        }
    }

    /// The same board, saying which device this is and the project it was paired for.
    pub fn for_device(self, device: String, scope: Option<String>) -> Self {
        Self {
            device: Some(device),
            scope,
            ..self
        }
    }

    fn lock(&self) -> MutexGuard<'_, (SavedStatus, bool)> {
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a report of the sync loop; returns what to save in `status.json`, if the
    /// report is worth a write (dialing is not: it only means offline).
    pub fn report(&self, status: &SyncStatus) -> Option<SavedStatus> {
        let mut now = self.lock();
        now.1 = match status {
            SyncStatus::Connected { .. } | SyncStatus::CaughtUp { .. } => true,
            // A path change happens only on an open connection.
            SyncStatus::Path { .. } => now.1,
            _ => false,
        };
        // Dialing again keeps the last state (why it disconnected) on show.
        let next = SavedStatus::from_sync(status, &now.0)?;
        now.0 = next.clone();
        Some(next)
    }

    /// The status now, with the pending changes counted in `store`.
    pub async fn status(&self, store: &DocumentStore) -> Result<NodeStatus, StoreError> {
        let pending_changes = store.pending_upstream().await?;
        let (saved, online) = self.lock().clone();
        let in_sync = online && saved.state == "caught-up";
        Ok(NodeStatus {
            online,
            state: saved.state,
            detail: saved.detail,
            state_since: Some(saved.at_ms),
            hub: Some(self.hub.clone()),
            device: self.device.clone(),
            scope: self.scope.clone(),
            last_synced_at: if in_sync {
                Some(now_ms())
            } else {
                saved.last_synced_at
            },
            pending_changes,
            api: self.api.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            sync_versions: hearth_protocol::SYNC_VERSIONS.to_vec(),
            session_version: saved.version,
            path: if online { saved.path } else { None },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_net::ConnPath;
    use std::time::Duration;

    /// The UI keeps a device paired for one project inside it: the status names the
    /// device and that project.
    #[tokio::test]
    async fn the_status_names_the_device_and_the_project_it_was_paired_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let board = StatusBoard::new("hubid".into(), None, None)
            .for_device("me".into(), Some("work".into()));
        let s = board.status(&store).await.expect("status");
        assert_eq!(s.device.as_deref(), Some("me"));
        assert_eq!(s.scope.as_deref(), Some("work"));
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(json["scope"], "work");
        let whole = StatusBoard::new("hubid".into(), None, None).for_device("me".into(), None);
        let s = whole.status(&store).await.expect("status");
        assert!(s.scope.is_none());
    }

    #[tokio::test]
    async fn the_board_follows_the_sync_loop_and_remembers_the_last_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let board = StatusBoard::new("hubid".into(), None, None);
        let s = board.status(&store).await.expect("status");
        assert!(!s.online && s.state == "connecting" && s.last_synced_at.is_none());

        assert!(board
            .report(&SyncStatus::Connected { version: 1 })
            .is_some());
        let s = board.status(&store).await.expect("status");
        assert!(s.online && s.session_version == Some(1) && s.last_synced_at.is_none());

        let caught_up = SyncStatus::CaughtUp {
            received_whole: 0,
            sent_whole: 0,
            synced: 0,
            ms: 1,
            tx_bytes: 0,
            rx_bytes: 0,
        };
        let saved = board.report(&caught_up).expect("saved");
        assert_eq!(saved.state, "caught-up");
        let synced = saved.last_synced_at.expect("synced");
        let gone = SyncStatus::Disconnected {
            reason: "hub closed the session".into(),
            retry_in: Duration::from_millis(100),
        };
        let saved = board.report(&gone).expect("saved");
        assert!(saved.last_synced_at.expect("still synced") >= synced);
        let s = board.status(&store).await.expect("status");
        assert!(!s.online && s.state == "disconnected" && s.session_version == Some(1));
        assert_eq!(s.last_synced_at, saved.last_synced_at);
        assert_eq!(s.detail.as_deref(), Some("hub closed the session"));
        // Dialing again: still offline, still saying why.
        assert!(board.report(&SyncStatus::Connecting).is_none());
        let s = board.status(&store).await.expect("status");
        assert!(!s.online && s.state == "disconnected");

        // A new run starts from what the last one saved.
        let next = StatusBoard::new("hubid".into(), None, Some(saved.clone()));
        let s = next.status(&store).await.expect("status");
        assert_eq!(s.last_synced_at, saved.last_synced_at);
        assert_eq!(s.state, "connecting");

        let stopped = NodeStatus::stopped(Some("hubid".into()), Some(&saved), 2);
        assert!(!stopped.online && stopped.pending_changes == 2);
        assert!(stopped
            .detail
            .expect("detail")
            .contains("no `hearth run` answers"));
    }

    #[test]
    fn the_path_is_kept_while_connected_and_cleared_on_disconnect() {
        let step = |status: SyncStatus, last: &SavedStatus| {
            SavedStatus::from_sync(&status, last).expect("saved")
        };
        let s = step(
            SyncStatus::Connected { version: 1 },
            &SavedStatus::default(),
        );
        assert_eq!((s.state.as_str(), s.path.as_deref()), ("connected", None));
        let s = step(
            SyncStatus::Path {
                path: ConnPath::Relay,
            },
            &s,
        );
        assert_eq!(
            (s.state.as_str(), s.path.as_deref()),
            ("connected", Some("relay"))
        );
        let s = step(
            SyncStatus::CaughtUp {
                received_whole: 0,
                sent_whole: 0,
                synced: 0,
                ms: 1,
                tx_bytes: 0,
                rx_bytes: 0,
            },
            &s,
        );
        assert_eq!(
            (s.state.as_str(), s.path.as_deref()),
            ("caught-up", Some("relay"))
        );
        let s = step(
            SyncStatus::Path {
                path: ConnPath::Direct,
            },
            &s,
        );
        assert_eq!(
            (s.state.as_str(), s.path.as_deref()),
            ("caught-up", Some("direct"))
        );
        assert_eq!(s.version, Some(1));
        let s = step(
            SyncStatus::Disconnected {
                reason: "gone".into(),
                retry_in: std::time::Duration::from_secs(1),
            },
            &s,
        );
        assert_eq!(
            (s.state.as_str(), s.path.as_deref()),
            ("disconnected", None)
        );
    }
}
