//! Replication over an iroh connection: one bidirectional stream per session.
//!
//! The dialing side (a node) opens the stream and speaks first (`Hello`), which is what
//! makes a QUIC stream visible to the accepting side. Either side's session ends when the
//! stream or the connection closes.

use std::{future::Future, sync::Arc};

use hearth_protocol::ALPN_SYNC;
use hearth_sync::{
    run_session, DocumentStore, SessionConfig, SessionError, SessionEvent, SessionStats,
};
use iroh::{endpoint::Connection, Endpoint, EndpointAddr};
use tokio::sync::mpsc;

/// Why a sync connection failed before or during its session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncConnError {
    /// The QUIC connection could not be set up (or was refused by the peer).
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The stream could not be opened or accepted.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The session failed.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Accepts the replication stream on an incoming `hearth/sync/1` connection and runs the
/// session until it ends or `shutdown` completes.
pub async fn accept_sync(
    store: DocumentStore,
    conn: &Connection,
    config: SessionConfig,
    stats: Arc<SessionStats>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SyncConnError> {
    let (send, recv) = conn
        .accept_bi()
        .await
        .map_err(|e| SyncConnError::Connection(e.to_string()))?;
    run_session(store, recv, send, config, stats, None, shutdown).await?;
    Ok(())
}

/// Dials `hub` on `hearth/sync/1` and runs a session until it ends or `shutdown`
/// completes. `events` receives the session's milestones.
pub async fn dial_sync(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    store: DocumentStore,
    stats: Arc<SessionStats>,
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SyncConnError> {
    let conn = endpoint
        .connect(hub, ALPN_SYNC)
        .await
        .map_err(|e| SyncConnError::Connect(describe(&e)))?;
    let (send, recv) = conn
        .open_bi()
        .await
        .map_err(|e| SyncConnError::Connection(e.to_string()))?;
    let result = run_session(
        store,
        recv,
        send,
        SessionConfig::default(),
        stats,
        events,
        shutdown,
    )
    .await;
    let reason = conn.close_reason();
    conn.close(0u32.into(), b"bye");
    match (result, reason) {
        // A session that died because the hub closed the connection reports the hub's reason.
        (Err(SessionError::Io(_)), Some(reason)) => {
            Err(SyncConnError::Connection(reason.to_string()))
        }
        (r, _) => Ok(r?),
    }
}

fn describe(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}
