//! The node's last sync status, saved by `hearth run` in `$HEARTH_HOME/status.json` so
//! `hearth status` (another process) can say what is going on: connected on which
//! protocol version, caught up, disconnected and why, or unable to sync with its hub
//! because one side must be updated; and whether the connection runs direct or through
//! the hub's relay.
//!
//! Holds no secrets and decides nothing; a missing or unreadable file just means "unknown".

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{NodeError, SyncStatus};

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
    /// The path of the current connection: `direct` or `relay`.
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

    /// What to save for `status`, given the last saved one (the version carries over);
    /// `None` for transient states not worth a write.
    pub fn from_sync(status: &SyncStatus, last: &SavedStatus) -> Option<Self> {
        let mut path = None;
        let (state, detail, version) = match status {
            SyncStatus::Connecting => return None,
            SyncStatus::Connected { version } => ("connected", None, Some(*version)),
            SyncStatus::Path { path: now } => {
                path = Some(now.to_string());
                (last.state.as_str(), last.detail.clone(), last.version)
            }
            SyncStatus::CaughtUp { .. } => {
                path = last.path.clone();
                ("caught-up", None, last.version)
            }
            SyncStatus::Disconnected { reason, .. } => {
                ("disconnected", Some(reason.clone()), last.version)
            }
            SyncStatus::Incompatible { message, .. } => {
                ("incompatible", Some(message.clone()), None)
            }
        };
        Some(Self {
            state: state.into(),
            detail,
            version,
            path,
            at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
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

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_net::ConnPath;

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
