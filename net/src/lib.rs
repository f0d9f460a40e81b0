//! hearth-net: what hub and node both need to talk over iroh.
//!
//! - [`identity`]: the device's ed25519 secret key file (0600, created once, never logged);
//! - [`endpoint`]: building an iroh endpoint from [`NetSettings`] (bind address, relay
//!   mode; never a preset that publishes addresses to public DNS);
//! - [`sync_conn`]: running a `hearth/sync/1` replication session over a QUIC connection;
//! - [`discovery`]: mDNS advertising and browsing (optional, never fatal);
//! - [`ticket`]: the pair ticket for first contact from anywhere.
//!
//! Architecture Invariant: this crate decides nothing about who may connect; the hub's
//! access check and the node's pinning live in those crates.

pub mod discovery;
pub mod endpoint;
pub mod identity;
pub mod sync_conn;
pub mod ticket;

pub use endpoint::{bind_endpoint, NetError, NetSettings, NoHooks, RelaySetting};
pub use identity::{load_or_create_secret_key, IdentityError};
pub use sync_conn::{accept_sync, dial_sync, SyncConnError};
pub use ticket::PairTicket;
