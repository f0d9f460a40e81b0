//! hearth-node: the node side of Hearth, a library under the `hearth` CLI.
//!
//! - [`config`]: the node's settings and the hub it follows (`node.json`), the one place
//!   configuration is read;
//! - [`pair`]: the pairing client (device codes);
//! - [`status`]: the last sync status `hearth run` saw, saved for `hearth status`;
//! - [`sync_loop`]: keeps a replication session with the pinned hub open, reconnecting
//!   with backoff, and reports milestones;
//! - [`cli`]: the `hearth` command line, one file per subcommand group.
//!
//! Architecture Invariant: the node only ever syncs with the hub it pinned at pairing (its
//! id is authenticated by the QUIC handshake) and accepts no incoming connections.

pub mod cli;
pub mod config;
pub mod pair;
pub mod status;
pub mod sync_loop;

pub use config::{HubAddr, NodeConfig, NodeError};
pub use sync_loop::{run_sync_loop, HubLocator, SyncStatus};
