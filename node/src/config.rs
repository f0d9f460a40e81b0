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

    /// Saves `node.json` atomically.
    pub fn save(&self, home: &Path) -> Result<(), NodeError> {
        let path = Self::path(home);
        let io = |source| NodeError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(home).map_err(io)?;
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| NodeError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        fs::write(&tmp, text).map_err(io)?;
        fs::rename(&tmp, &path).map_err(io)
    }
}

/// The default data directory: `~/.hearth`.
pub fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".hearth"),
        None => PathBuf::from(".hearth"),
    }
}
