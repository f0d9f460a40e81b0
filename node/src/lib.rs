//! hearth-node: the node side of Hearth, a library under the `hearth` CLI.
//!
//! - [`api`]: the node's HTTP API on loopback: the same `/api/v1` document routes as the
//!   hub's over the local replica, owner access, `/events`, `/status`;
//! - [`config`]: the node's settings and the hub it follows (`node.json`), the one place
//!   configuration is read;
//! - [`nodedb`]: the one owner of `node.db` (the owner's browser sessions);
//! - [`pair`]: the pairing client (device codes);
//! - [`status`]: the node's status (online, last sync, changes waiting for the hub), live
//!   for the API and saved for `hearth status`;
//! - [`sync_loop`]: keeps a replication session with the pinned hub open, reconnecting
//!   with backoff, and reports milestones;
//! - [`hub_link`]: the node's line to its hub's agent (`hearth/rpc/N`): relayed
//!   requests and the hub's event stream, failing at once while the hub is unreachable;
//! - [`relay_routes`]: the API routes the node relays to its hub (the shared table),
//!   answering 503 `hub_unreachable` at once while the link is down;
//! - [`cli`]: the `hearth` command line, one file per subcommand group.
//!
//! Architecture Invariant: the node only ever syncs with the hub it pinned at pairing (its
//! id is authenticated by the QUIC handshake) and accepts no incoming iroh connections;
//! its HTTP API listens on loopback unless the owner says otherwise, behind the owner
//! guard.

pub mod api;
pub mod cli;
pub mod config;
pub mod hub_link;
pub mod nodedb;
pub mod pair;
pub mod relay_routes;
pub mod status;
pub mod sync_loop;

pub use config::{HubAddr, NodeConfig, NodeError};
pub use hub_link::{HubLink, LinkError, LinkState, RelayedResponse};
pub use sync_loop::{run_sync_loop, HubLocator, SyncStatus};
