//! Replication over an iroh connection: one bidirectional stream per session.
//!
//! The dialing side (a node) offers every `hearth/sync/N` version it speaks as ALPNs; the
//! hub's TLS handshake picks the highest both share ([`connect_sync`] returns it). When
//! they share none, the dialer asks the hub's `hearth/versions` for its range
//! ([`ask_versions`]) so the error says which side to update. The dialer then opens the
//! stream and speaks first (`Hello`), which is what makes a QUIC stream visible to the
//! accepting side. The pairing client negotiates `hearth/pair/N` the same way
//! ([`connect_versioned`]). Either side's session ends when the stream or the connection closes.
//!
//! Never decides who may connect; never runs a session on a version neither side named.

use std::{future::Future, sync::Arc};

use std::time::Duration;

use hearth_protocol::{
    alpn_version, alpns, mismatch_message, Family, VersionInfo, ALPN_VERSIONS, MAX_VERSION_INFO,
    SYNC_VERSIONS,
};
use hearth_sync::{
    run_session, DocumentStore, SessionConfig, SessionError, SessionEvent, SessionStats,
};
use iroh::{
    endpoint::{
        ConnectOptions, ConnectingError, Connection, ConnectionError, QuicTransportConfig,
        TransportErrorCode,
    },
    Endpoint, EndpointAddr,
};
use tokio::sync::mpsc;

/// Keep-alive interval of a node's connections to its hub.
pub const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// A connection to the hub silent for this long is dead: a laptop that leaves the
/// network, or whose hub vanishes without closing, shows offline within seconds rather
/// than after QUIC's default idle timeout.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(8);

/// The transport every connection a node dials to its hub uses ([`KEEP_ALIVE`],
/// [`IDLE_TIMEOUT`]).
pub fn link_transport() -> QuicTransportConfig {
    let builder = QuicTransportConfig::builder().keep_alive_interval(KEEP_ALIVE);
    match IDLE_TIMEOUT.try_into() {
        Ok(idle) => builder.max_idle_timeout(Some(idle)),
        // 8 s always fits QUIC's varint; keep the default rather than fail a dial.
        Err(_) => builder,
    }
    .build()
}

/// TLS alert `no_application_protocol` (RFC 7301), as a QUIC crypto error code: the
/// handshake found no ALPN both sides speak.
const NO_APPLICATION_PROTOCOL: u8 = 120;
/// How long the `hearth/versions` exchange may take.
const VERSIONS_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// The hub and this node share no protocol version; the message says which side to
    /// update (retrying will not help until one is updated).
    #[error("{0}")]
    Version(String),
}

/// Accepts the replication stream on an incoming `hearth/sync/N` connection and runs the
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

/// Dials `hub` offering `hearth/sync/N` for every N in `versions` and returns the
/// connection with the version the hub chose (the highest both speak). When they share
/// none, asks the hub for its versions and fails with [`SyncConnError::Version`].
pub async fn connect_sync(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    versions: &[u16],
) -> Result<(Connection, u16), SyncConnError> {
    connect_versioned(endpoint, hub, Family::Sync, versions).await
}

/// Dials `hub` offering `family`'s ALPN for every version in `versions` (the pairing
/// client uses it for `hearth/pair/N`, [`connect_sync`] for sync) and returns the
/// connection with the version the hub chose. When they share none, asks the hub for its
/// versions and fails with [`SyncConnError::Version`], saying which side to update.
pub async fn connect_versioned(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    family: Family,
    versions: &[u16],
) -> Result<(Connection, u16), SyncConnError> {
    let what = family.key();
    let offered = alpns(family, versions);
    let Some((first, rest)) = offered.split_first() else {
        return Err(SyncConnError::Version(format!(
            "this node speaks no {what} version"
        )));
    };
    let connecting = endpoint
        .connect_with_opts(
            hub.clone(),
            first,
            ConnectOptions::new()
                .with_additional_alpns(rest.to_vec())
                .with_transport_config(link_transport()),
        )
        .await
        .map_err(|e| SyncConnError::Connect(describe(&e)))?;
    let conn = match connecting.await {
        Ok(conn) => conn,
        Err(e) if no_shared_alpn(&e) => {
            let mut ours = VersionInfo::current();
            match family {
                Family::Sync => ours.sync = versions.to_vec(),
                Family::Pair => ours.pair = versions.to_vec(),
                Family::Rpc => ours.rpc = versions.to_vec(),
            }
            let message = match ask_versions(endpoint, hub, &ours).await {
                Ok(theirs) => mismatch_message(family, versions, theirs.of(family)),
                Err(e) => {
                    tracing::debug!(error = %e, "the hub did not say which versions it speaks");
                    None
                }
            }
            .unwrap_or_else(|| {
                format!(
                    "the hub speaks none of this node's {what} versions ({versions:?}) and did not say which it speaks: it is probably older; update the hub"
                )
            });
            tracing::debug!(%message, "no shared {what} version");
            return Err(SyncConnError::Version(message));
        }
        Err(e) => return Err(SyncConnError::Connect(describe(&e))),
    };
    let Some(version) = alpn_version(family, conn.alpn()).filter(|v| versions.contains(v)) else {
        conn.close(0u32.into(), b"unexpected protocol");
        return Err(SyncConnError::Connection(format!(
            "the hub chose {:?}, which this node did not offer",
            String::from_utf8_lossy(conn.alpn())
        )));
    };
    tracing::debug!(version, "{what} version negotiated");
    Ok((conn, version))
}

/// Whether a failed handshake failed because no ALPN was shared.
fn no_shared_alpn(e: &ConnectingError) -> bool {
    match e {
        ConnectingError::ConnectionError {
            source: ConnectionError::ConnectionClosed(close),
            ..
        } => close.error_code == TransportErrorCode::crypto(NO_APPLICATION_PROTOCOL),
        ConnectingError::ConnectionError {
            source: ConnectionError::TransportError(t),
            ..
        } => t.code == TransportErrorCode::crypto(NO_APPLICATION_PROTOCOL),
        _ => false,
    }
}

/// Asks `peer` which protocol versions it speaks over the unversioned `hearth/versions`
/// exchange, telling it ours (so its log can say who must update).
pub async fn ask_versions(
    endpoint: &Endpoint,
    peer: EndpointAddr,
    ours: &VersionInfo,
) -> Result<VersionInfo, SyncConnError> {
    let exchange = async {
        let conn = endpoint
            .connect(peer, ALPN_VERSIONS)
            .await
            .map_err(|e| SyncConnError::Connect(describe(&e)))?;
        let io = |e: &dyn std::error::Error| SyncConnError::Connection(describe(e));
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| io(&e))?;
        send.write_all(&ours.encode()).await.map_err(|e| io(&e))?;
        send.finish().map_err(|e| io(&e))?;
        let bytes = recv
            .read_to_end(MAX_VERSION_INFO)
            .await
            .map_err(|e| io(&e))?;
        conn.close(0u32.into(), b"thanks");
        VersionInfo::decode(&bytes).map_err(|e| SyncConnError::Connection(e.to_string()))
    };
    tokio::time::timeout(VERSIONS_TIMEOUT, exchange)
        .await
        .map_err(|_| SyncConnError::Connection("the versions exchange timed out".into()))?
}

/// Answers a `hearth/versions` connection with `ours`; returns what the peer said it
/// speaks (for the log), if it said anything readable.
pub async fn answer_versions(
    conn: &Connection,
    ours: &VersionInfo,
) -> Result<Option<VersionInfo>, SyncConnError> {
    let exchange = async {
        let io = |e: &dyn std::error::Error| SyncConnError::Connection(describe(e));
        let (mut send, mut recv) = conn.accept_bi().await.map_err(|e| io(&e))?;
        let theirs = recv
            .read_to_end(MAX_VERSION_INFO)
            .await
            .ok()
            .and_then(|b| VersionInfo::decode(&b).ok());
        send.write_all(&ours.encode()).await.map_err(|e| io(&e))?;
        send.finish().map_err(|e| io(&e))?;
        // Let the peer read the answer and close.
        let _ = conn.closed().await;
        Ok(theirs)
    };
    tokio::time::timeout(VERSIONS_TIMEOUT, exchange)
        .await
        .map_err(|_| SyncConnError::Connection("the versions exchange timed out".into()))?
}

/// Dials `hub` with every sync version this build speaks and runs a session until it
/// ends or `shutdown` completes. `events` receives the session's milestones.
pub async fn dial_sync(
    endpoint: &Endpoint,
    hub: EndpointAddr,
    store: DocumentStore,
    stats: Arc<SessionStats>,
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SyncConnError> {
    let (conn, _version) = connect_sync(endpoint, hub, SYNC_VERSIONS).await?;
    run_dialed_sync(conn, store, stats, events, shutdown).await
}

/// Runs a session on a connection from [`connect_sync`] until it ends or `shutdown`
/// completes, then closes the connection.
pub async fn run_dialed_sync(
    conn: Connection,
    store: DocumentStore,
    stats: Arc<SessionStats>,
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SyncConnError> {
    let (send, recv) = conn
        .open_bi()
        .await
        .map_err(|e| SyncConnError::Connection(e.to_string()))?;
    // The dialing side is a node: it follows its hub and counts what the hub holds.
    let config = SessionConfig {
        follow_upstream: true,
        ..SessionConfig::default()
    };
    let result = run_session(store, recv, send, config, stats, events, shutdown).await;
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
