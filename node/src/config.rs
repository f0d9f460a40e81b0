//! Node configuration: data directory, network settings and the pinned hub.
//!
//! The hub's id and addresses are saved in `$HEARTH_HOME/node.json` the first time they
//! are given, so later `hearth run` needs no flags.

use std::{
    fs,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use iroh::EndpointId;
use serde::{Deserialize, Serialize};

/// Why the node's configuration could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// File trouble.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The saved file does not parse.
    #[error("{path} is not valid node configuration: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No hub is configured yet.
    #[error("no hub configured: run `hearth pair` first (or `hearth run --hub <hub-id> --hub-addr <ip:port>`)")]
    NoHub,
}

/// The hub this node follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubAddr {
    /// The hub's node id, pinned.
    pub id: String,
    /// Direct addresses to try.
    pub addrs: Vec<SocketAddr>,
    /// The hub's relay URL, if it had one when paired.
    #[serde(default)]
    pub relay: Option<String>,
}

impl HubAddr {
    /// The hub's id, parsed.
    pub fn endpoint_id(&self) -> Result<EndpointId, NodeError> {
        self.id.parse().map_err(|e| NodeError::Corrupt {
            path: PathBuf::from("node.json"),
            reason: format!("hub id {:?}: {e}", self.id),
        })
    }
}

/// Saved node configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// The pinned hub, once known.
    pub hub: Option<HubAddr>,
    /// The project this device was paired for, if scoped: new notes and tasks go there.
    #[serde(default)]
    pub scope: Option<String>,
}

impl NodeConfig {
    fn path(home: &Path) -> PathBuf {
        home.join("node.json")
    }

    /// Loads `node.json`, or the default if there is none.
    pub fn load(home: &Path) -> Result<Self, NodeError> {
        let path = Self::path(home);
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| NodeError::Corrupt {
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(NodeError::Io { path, source }),
        }
    }

    /// Saves `node.json` atomically and durably: a synced temporary file (0600) renamed
    /// over the old one, then the directory synced, in a 0700 data directory.
    pub fn save(&self, home: &Path) -> Result<(), NodeError> {
        let path = Self::path(home);
        let io = |source| NodeError::Io {
            path: path.clone(),
            source,
        };
        hearth_net::files::ensure_private_dir(home).map_err(io)?;
        let text = serde_json::to_string_pretty(self).map_err(|e| NodeError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        hearth_net::files::write_atomic(&path, text.as_bytes()).map_err(io)
    }
}

/// The default data directory: `~/.hearth`.
pub fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".hearth"),
        None => PathBuf::from(".hearth"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_json_round_trips_private_with_no_temporary_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("node");
        let config = NodeConfig {
            hub: Some(HubAddr {
                id: "abc".into(),
                addrs: vec!["127.0.0.1:7447".parse().expect("addr")],
                relay: None,
            }),
            scope: Some("work".into()),
        };
        config.save(&home).expect("save");
        config.save(&home).expect("save again");
        assert_eq!(NodeConfig::load(&home).expect("load"), config);
        let names: Vec<_> = fs::read_dir(&home)
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["node.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode(&home.join("node.json")), 0o600);
            assert_eq!(mode(&home), 0o700);
        }
    }
}
