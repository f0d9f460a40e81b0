//! Which network path a connection to the hub takes now: direct (UDP between the two
//! machines) or through a relay.
//!
//! iroh opens and selects paths by itself (it dials a hub's direct addresses and its
//! relay together, holepunches, and moves to a direct path once one works); this module
//! only watches the selected path so a node can say where its traffic goes. Decides
//! nothing, sends nothing.

use std::fmt;

use iroh::endpoint::{Connection, PathList};
use tokio_stream::StreamExt;

/// The path a connection's application data takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnPath {
    /// UDP to the peer's IP address.
    Direct,
    /// Through an iroh relay.
    Relay,
}

impl fmt::Display for ConnPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Direct => "direct",
            Self::Relay => "relay",
        })
    }
}

fn selected(paths: &PathList<'_>) -> Option<ConnPath> {
    paths.iter().find(|p| p.is_selected()).map(|p| {
        if p.is_relay() {
            ConnPath::Relay
        } else {
            ConnPath::Direct
        }
    })
}

/// The path `conn` takes now, if one is selected.
pub fn current_path(conn: &Connection) -> Option<ConnPath> {
    selected(&conn.paths())
}

/// Calls `on_change` with the selected path when the connection starts and each time it
/// changes (relay to direct and back); returns when the connection closes.
pub async fn watch_path(conn: &Connection, mut on_change: impl FnMut(ConnPath)) {
    let mut last = None;
    let mut snapshots = conn.paths_stream();
    while let Some(paths) = snapshots.next().await {
        let now = selected(&paths);
        if now != last {
            if let Some(path) = now {
                on_change(path);
            }
            last = now;
        }
    }
}
