//! hearth-net: what hub and node both need to talk over iroh.
//!
//! - [`identity`]: the device's ed25519 secret key file (0600, created once, never logged);
//! - [`files`]: private files: the data directory (0700), databases (0600), files created
//!   exactly once and files replaced durably;
//! - [`endpoint`]: building an iroh endpoint from [`NetSettings`] (bind address, relay
//!   mode; never a preset that publishes addresses to public DNS);
//! - [`sync_conn`]: negotiating the `hearth/sync/N` version and running a replication
//!   session over a QUIC connection; the unversioned `hearth/versions` exchange;
//! - [`path`]: which path (direct or relay) a connection takes now, watched for changes;
//! - [`discovery`]: mDNS advertising and browsing (optional, never fatal);
//! - [`ticket`]: the pair ticket for first contact from anywhere;
//! - [`fingerprint`]: the short key fingerprint people compare when pairing;
//! - [`shutdown_signal`]: the daemons' stop signal.
//!
//! Architecture Invariant: this crate decides nothing about who may connect; the hub's
//! access check and the node's pinning live in those crates.

pub mod discovery;
pub mod endpoint;
pub mod files;
pub mod fingerprint;
pub mod identity;
pub mod path;
pub mod sync_conn;
pub mod ticket;

pub use endpoint::{bind_endpoint, NetError, NetSettings, NoHooks, RelaySetting};
pub use fingerprint::{fingerprint, fingerprint_of_id};
pub use identity::{load_or_create_secret_key, IdentityError};
pub use path::{current_path, watch_path, ConnPath};
pub use sync_conn::{
    accept_sync, answer_versions, ask_versions, connect_sync, connect_versioned, dial_sync,
    link_transport, run_dialed_sync, SyncConnError, IDLE_TIMEOUT, KEEP_ALIVE,
};
pub use ticket::PairTicket;

/// Completes on Ctrl-C or SIGTERM: how the hub and node daemons are asked to stop.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
