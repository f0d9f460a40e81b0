//! Keeps the node's replica in sync with its hub.
//!
//! One long-lived task: dial (offering every sync version the node speaks), run the
//! session until it ends, wait with exponential backoff (reset once a session has caught
//! up), dial again; stops when `shutdown` completes. Status changes go out on a channel so
//! the CLI can print them. A hub that shares no protocol version is reported as
//! [`SyncStatus::Incompatible`], saying which side to update, and retried slowly (it may
//! be updated meanwhile). The hub is dialed at its direct addresses and its relay together,
//! so iroh reaches it through whichever works and moves to a direct path when one appears;
//! the path in use is reported too ([`SyncStatus::Path`]).

use std::{future::Future, sync::Arc, time::Duration};

use hearth_sync::{DocumentStore, SessionEvent, SessionStats};
use iroh::{Endpoint, EndpointAddr};
use tokio::sync::{mpsc, watch};

/// What the sync loop reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncStatus {
    /// Dialing the hub.
    Connecting,
    /// Connected; the session runs on this `hearth/sync/N` version.
    Connected {
        /// The version both sides chose (the highest they share).
        version: u16,
    },
    /// The hub and this node share no protocol version: nothing syncs until one side is
    /// updated.
    Incompatible {
        /// What to do, naming both sides' versions.
        message: String,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The connection to the hub took this path (reported when the session starts and
    /// whenever iroh moves it, say from the relay to a direct path once one works).
    Path {
        /// Direct or through the relay.
        path: hearth_net::ConnPath,
    },
    /// Initial exchange done.
    CaughtUp {
        /// Documents received whole.
        received_whole: usize,
        /// Documents sent whole.
        sent_whole: usize,
        /// Documents reconciled with Automerge sync.
        synced: usize,
        /// Milliseconds since the session started.
        ms: u128,
        /// Frame bytes sent.
        tx_bytes: u64,
        /// Frame bytes received.
        rx_bytes: u64,
    },
    /// The session ended; retrying after the delay.
    Disconnected {
        /// Why.
        reason: String,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
}

/// How the node finds its pinned hub: by id, with the addresses saved at pairing, the
/// hub's relay if it has one, and (after a failed attempt, when enabled) whatever mDNS
/// finds on the LAN for that id, so a hub whose address changed is still reached.
#[derive(Debug, Clone)]
pub struct HubLocator {
    /// The pinned hub id.
    pub id: iroh::EndpointId,
    /// Addresses saved at pairing or given on the command line.
    pub addrs: Vec<std::net::SocketAddr>,
    /// The hub's relay, if it uses one.
    pub relay: Option<iroh::RelayUrl>,
    /// Look the hub up on the LAN over mDNS after a failed attempt.
    pub mdns: bool,
}

impl HubLocator {
    /// Where to dial the hub now: saved addresses and relay, plus what mDNS finds on
    /// the LAN when `after_failure` (and mDNS is on).
    pub async fn locate(&self, after_failure: bool) -> EndpointAddr {
        let mut addr = EndpointAddr::new(self.id);
        for a in &self.addrs {
            addr = addr.with_ip_addr(*a);
        }
        if let Some(relay) = &self.relay {
            addr = addr.with_relay_url(relay.clone());
        }
        if self.mdns && after_failure {
            let id = self.id;
            let found = tokio::task::spawn_blocking(move || {
                hearth_net::discovery::discover(Duration::from_millis(1500))
            })
            .await;
            match found {
                Ok(Ok(hubs)) => {
                    for h in hubs.into_iter().filter(|h| h.id == id) {
                        for a in h.addrs {
                            addr = addr.with_ip_addr(a);
                        }
                    }
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "mDNS lookup failed"),
                Err(e) => tracing::debug!(error = %e, "mDNS lookup panicked"),
            }
        }
        addr
    }
}

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Retry delay while the hub shares no protocol version with this node.
const INCOMPATIBLE_RETRY: Duration = Duration::from_secs(60);

/// Runs until `shutdown` completes, offering the `hearth/sync/N` versions in `versions`
/// (normally `hearth_protocol::SYNC_VERSIONS`).
pub async fn run_sync_loop(
    endpoint: Endpoint,
    hub: HubLocator,
    versions: Vec<u16>,
    store: DocumentStore,
    status: mpsc::UnboundedSender<SyncStatus>,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let body = async {
        let mut backoff = BACKOFF_MIN;
        let mut first_attempt = true;
        loop {
            let _ = status.send(SyncStatus::Connecting);
            let (etx, mut erx) = mpsc::unbounded_channel::<SessionEvent>();
            let stats = Arc::new(SessionStats::default());
            let status2 = status.clone();
            // Forward session milestones while the session runs.
            let forward = async {
                let mut caught_up = false;
                while let Some(ev) = erx.recv().await {
                    let SessionEvent::CaughtUp {
                        received_whole,
                        sent_whole,
                        synced,
                        elapsed,
                        bytes_sent,
                        bytes_received,
                    } = ev;
                    caught_up = true;
                    let _ = status2.send(SyncStatus::CaughtUp {
                        received_whole,
                        sent_whole,
                        synced,
                        ms: elapsed.as_millis(),
                        tx_bytes: bytes_sent,
                        rx_bytes: bytes_received,
                    });
                }
                caught_up
            };
            let addr = hub.locate(!first_attempt).await;
            let session = async {
                let (conn, version) = hearth_net::connect_sync(&endpoint, addr, &versions).await?;
                let _ = status.send(SyncStatus::Connected { version });
                let watched = conn.clone();
                let run = hearth_net::run_dialed_sync(
                    conn,
                    store.clone(),
                    stats,
                    Some(etx),
                    stopped(stop_rx.clone()),
                );
                // Reports the path until the connection closes; the session decides when.
                let watch = async {
                    hearth_net::watch_path(&watched, |path| {
                        let _ = status.send(SyncStatus::Path { path });
                    })
                    .await;
                    std::future::pending().await
                };
                tokio::select! {
                    ended = run => ended,
                    never = watch => never,
                }
            };
            let (result, caught_up) = tokio::join!(session, forward);
            first_attempt = false;
            if *stop_rx.borrow() {
                return;
            }
            if caught_up {
                backoff = BACKOFF_MIN;
            }
            // Spread reconnects of many nodes after a hub restart.
            let jitter = Duration::from_millis(u64::from(std::process::id() % 50));
            let delay = match result {
                Err(hearth_net::SyncConnError::Version(message)) => {
                    let delay = INCOMPATIBLE_RETRY + jitter;
                    let _ = status.send(SyncStatus::Incompatible {
                        message,
                        retry_in: delay,
                    });
                    delay
                }
                other => {
                    let reason = match other {
                        Ok(()) => "hub closed the session".to_string(),
                        Err(e) => e.to_string(),
                    };
                    let delay = backoff + jitter;
                    let _ = status.send(SyncStatus::Disconnected {
                        reason,
                        retry_in: delay,
                    });
                    delay
                }
            };
            let mut rx = stop_rx.clone();
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = rx.wait_for(|s| *s) => return,
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    };
    tokio::pin!(body);
    tokio::select! {
        _ = &mut body => return,
        _ = shutdown => {}
    }
    // Let the running session close its stream cleanly.
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), body).await;
}
