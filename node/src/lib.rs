//! hearth-node: the node side of Hearth, a library under the `hearth` CLI.
//!
//! - [`config`]: the node's settings and the hub it follows (`node.json`), the one place
//!   configuration is read;
//! - [`sync_loop`]: keeps a replication session with the pinned hub open, reconnecting
//!   with backoff, and reports milestones;
//! - the `hearth` binary's subcommands live in `src/cli/`, one file per group.
//!
//! Architecture Invariant: the node only ever dials the hub it was configured with (its
//! id is authenticated by the QUIC handshake) and accepts no incoming connections.

pub mod config;
pub mod sync_loop;

pub use config::{HubAddr, NodeConfig, NodeError};
pub use sync_loop::{run_sync_loop, SyncStatus};
