//! The `hearth/pair/1` protocol handler: device-code pairing, open to any key.
//!
//! Every key that reaches the hub's UDP port may open this ALPN, so the handler treats
//! each connection as an adversary's. [`PairGate`] caps pairing connections overall, per
//! remote address and for relayed connections together, and refuses the surplus in
//! `on_accepting`, before the TLS handshake completes and before this handler allocates
//! anything for it; a connection that does not finish its handshake, send its `Start` or
//! poll within a few seconds is closed; frames are limited to `PAIR_MAX_FRAME`. One
//! stream per attempt: the node sends `Start`, gets a code, then polls until the owner
//! decides or the code expires. Every decision goes through [`DeviceRegistry`]; this
//! handler never keeps pairing state beyond the code of its one connection, and never
//! spawns a task of its own.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use hearth_protocol::{encode_frame, PairRequest, PairResponse, PAIR_MAX_FRAME};
use hearth_sync::read_frame;
use iroh::{
    endpoint::{Accepting, Connection, IncomingAddr, SendStream},
    protocol::{AcceptError, ProtocolHandler},
};

use crate::devices::{DeviceError, DeviceRegistry, Origin, PollState, StartOutcome, CODE_LIFETIME};

/// Limits on the pairing connections a hub keeps open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairLimits {
    /// Pairing connections open at once, from everywhere.
    pub total: usize,
    /// Pairing connections open at once from one direct address (an IPv4 address or an
    /// IPv6 /64, see [`Origin::bucket`]).
    pub per_addr: usize,
    /// Pairing connections open at once through relays, together.
    pub relayed: usize,
    /// Time for the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time from the end of the handshake until the `Start` has fully arrived.
    pub first_message_timeout: Duration,
    /// Time allowed between two later messages (a node polls every second).
    pub idle_timeout: Duration,
}

impl Default for PairLimits {
    fn default() -> Self {
        Self {
            // Real pairings are rare and short; 256 connections stay a few MiB (the
            // cross-process flood test measures it) and leave room for the owner's
            // devices while one address holds at most 4.
            total: 256,
            per_addr: 4,
            // A relayed connection has no remote IP (the relay forwards it), so
            // relayed connections cannot be told apart by address: they share this one
            // bucket, which is half the total, so a flood through relays cannot lock out
            // the LAN; per-address limits never apply to them, so one relay user cannot
            // lock out every device behind the same relay beyond this bucket.
            relayed: 128,
            handshake_timeout: Duration::from_secs(5),
            first_message_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Default)]
struct GateCounts {
    total: usize,
    per_bucket: HashMap<String, usize>,
}

/// Counts open pairing connections and hands out [`PairPermit`]s within [`PairLimits`].
#[derive(Debug)]
pub struct PairGate {
    limits: PairLimits,
    counts: Mutex<GateCounts>,
    /// Permits of connections whose handshake finished, waiting for `accept` (the router
    /// calls `on_accepting` then `accept` in one task).
    handed_over: Mutex<HashMap<usize, PairPermit>>,
}

/// One slot of the [`PairGate`], released when dropped.
#[derive(Debug)]
pub struct PairPermit {
    gate: Arc<PairGate>,
    origin: Origin,
    bucket: String,
}

impl Drop for PairPermit {
    fn drop(&mut self) {
        let mut counts = self.gate.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_bucket.get_mut(&self.bucket) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_bucket.remove(&self.bucket);
            }
        }
    }
}

impl PairGate {
    /// A gate with `limits`.
    pub fn new(limits: PairLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            counts: Mutex::new(GateCounts::default()),
            handed_over: Mutex::new(HashMap::new()),
        })
    }

    fn counts(&self) -> MutexGuard<'_, GateCounts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a connection from `origin`, or `None` when that would pass a limit.
    pub fn try_enter(self: &Arc<Self>, origin: Origin) -> Option<PairPermit> {
        let bucket = origin.bucket();
        let cap = match origin {
            Origin::Direct(_) => self.limits.per_addr,
            Origin::Relayed => self.limits.relayed,
        };
        let mut counts = self.counts();
        let in_bucket = counts.per_bucket.get(&bucket).copied().unwrap_or(0);
        if counts.total >= self.limits.total || in_bucket >= cap {
            return None;
        }
        counts.total += 1;
        counts.per_bucket.insert(bucket.clone(), in_bucket + 1);
        drop(counts);
        Some(PairPermit {
            gate: self.clone(),
            origin,
            bucket,
        })
    }

    /// Pairing connections open now.
    pub fn open(&self) -> usize {
        self.counts().total
    }

    fn hand_over(&self, id: usize, permit: PairPermit) {
        let previous = self
            .handed_over
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, permit);
        drop(previous);
    }

    fn take(&self, id: usize) -> Option<PairPermit> {
        self.handed_over
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
    }
}

/// Where a connection comes from, as the transport saw it.
fn origin_of(addr: IncomingAddr) -> Origin {
    match addr {
        IncomingAddr::Ip(sa) => Origin::Direct(sa.ip()),
        // Relayed (or a custom transport): no IP to count by.
        _ => Origin::Relayed,
    }
}

/// Why a pairing connection was turned away before its handshake finished.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairRefusal {
    /// Too many pairing connections open from there or overall.
    #[error("too many pairing connections from {0} or overall")]
    Busy(String),
    /// The handshake took too long.
    #[error("pairing handshake timed out")]
    HandshakeTimeout,
}

/// Serves pairing requests.
#[derive(Debug, Clone)]
pub struct PairService {
    registry: Arc<DeviceRegistry>,
    hub_name: String,
    require_ticket: bool,
    gate: Arc<PairGate>,
}

impl PairService {
    /// A pairing service over `registry`, with the default [`PairLimits`].
    pub fn new(registry: Arc<DeviceRegistry>, hub_name: String, require_ticket: bool) -> Self {
        Self::with_limits(registry, hub_name, require_ticket, PairLimits::default())
    }

    /// A pairing service with explicit limits.
    pub fn with_limits(
        registry: Arc<DeviceRegistry>,
        hub_name: String,
        require_ticket: bool,
        limits: PairLimits,
    ) -> Self {
        Self {
            registry,
            hub_name,
            require_ticket,
            gate: PairGate::new(limits),
        }
    }
}

const MIN_POLL_INTERVAL: Duration = Duration::from_millis(500);

async fn send(stream: &mut SendStream, msg: &PairResponse) -> Result<(), AcceptError> {
    let frame = encode_frame(msg).map_err(AcceptError::from_err)?;
    stream
        .write_all(&frame)
        .await
        .map_err(AcceptError::from_err)
}

fn refusal(e: DeviceError) -> PairResponse {
    match e {
        DeviceError::Throttled { retry_after_secs } => PairResponse::Throttled { retry_after_secs },
        DeviceError::Db(_) | DeviceError::Random(_) => {
            tracing::error!(error = %e, "pairing failed on the hub");
            PairResponse::Refused {
                reason: "the hub could not record the request; try again".into(),
            }
        }
        other => PairResponse::Refused {
            reason: other.to_string(),
        },
    }
}

impl ProtocolHandler for PairService {
    async fn on_accepting(&self, accepting: Accepting) -> Result<Connection, AcceptError> {
        // Counted before the handshake completes: a refused connection costs the hub
        // only what noq already spent on its first packet.
        let origin = origin_of(accepting.remote_addr());
        let Some(permit) = self.gate.try_enter(origin) else {
            tracing::debug!(origin = %origin.bucket(), "pairing connection refused: too many open");
            return Err(AcceptError::from_err(PairRefusal::Busy(origin.bucket())));
        };
        let conn = match tokio::time::timeout(self.gate.limits.handshake_timeout, accepting).await {
            Ok(conn) => conn.map_err(AcceptError::from_err)?,
            Err(_) => return Err(AcceptError::from_err(PairRefusal::HandshakeTimeout)),
        };
        self.gate.hand_over(conn.stable_id(), permit);
        Ok(conn)
    }

    async fn accept(&self, conn: Connection) -> Result<(), AcceptError> {
        let Some(permit) = self.gate.take(conn.stable_id()) else {
            // Not counted by `on_accepting`: never serve it.
            conn.close(503u32.into(), b"pairing is busy; try again");
            return Ok(());
        };
        let result = self.serve(&conn, permit.origin).await;
        drop(permit);
        result
    }
}

impl PairService {
    async fn serve(&self, conn: &Connection, origin: Origin) -> Result<(), AcceptError> {
        let peer = conn.remote_id();
        let limits = self.gate.limits;
        // The stream and the whole `Start` must arrive within the first deadline.
        let first_deadline = tokio::time::Instant::now() + limits.first_message_timeout;
        let (mut tx, mut rx) = match tokio::time::timeout_at(first_deadline, conn.accept_bi()).await
        {
            Ok(streams) => streams?,
            Err(_) => {
                tracing::debug!(%peer, "pairing connection idle: closed");
                conn.close(408u32.into(), b"idle");
                return Ok(());
            }
        };
        let deadline = Instant::now() + CODE_LIFETIME + Duration::from_secs(60);
        let mut buf = Vec::new();
        let mut code: Option<String> = None;
        let mut started = false;
        let mut last_poll = Instant::now() - MIN_POLL_INTERVAL;
        while Instant::now() < deadline {
            let wait = if started {
                tokio::time::Instant::now() + limits.idle_timeout
            } else {
                first_deadline
            };
            let msg = match tokio::time::timeout_at(
                wait,
                read_frame::<PairRequest, _>(&mut rx, &mut buf, PAIR_MAX_FRAME),
            )
            .await
            {
                Ok(Ok(Some(m))) => m,
                Ok(Ok(None)) => break,
                Err(_) => {
                    tracing::debug!(%peer, "pairing connection idle: closed");
                    conn.close(408u32.into(), b"idle");
                    return Ok(());
                }
                Ok(Err(e)) => {
                    tracing::warn!(%peer, error = %e, "bad pairing message");
                    break;
                }
            };
            started = true;
            // A frame has been decoded; don't keep a large buffer around between polls.
            buf.shrink_to(64);
            let registry = self.registry.clone();
            let reply = match msg {
                PairRequest::Start {
                    device_name,
                    ticket_secret,
                } => {
                    let require = self.require_ticket;
                    let r = tokio::task::spawn_blocking(move || {
                        registry.start_pair(&peer, &device_name, ticket_secret, require, origin)
                    })
                    .await
                    .map_err(AcceptError::from_err)?;
                    match r {
                        // Already paired (say its settings were lost): nothing to approve;
                        // it learns the scope it has.
                        Ok(StartOutcome::AlreadyPaired { scope }) => PairResponse::Approved {
                            hub_name: self.hub_name.clone(),
                            scope,
                        },
                        Ok(StartOutcome::Pending(req)) => {
                            tracing::info!(%peer, code = %req.code, device = %req.device_name,
                                fingerprint = %req.fingerprint, previously_revoked = req.previously_revoked,
                                "pairing requested");
                            let left = (req.expires_at - req.created_at).max(0) / 1000;
                            code = Some(req.code.clone());
                            PairResponse::Code {
                                user_code: req.code,
                                expires_in_secs: left as u32,
                            }
                        }
                        Err(e) => refusal(e),
                    }
                }
                PairRequest::Poll => {
                    let since = last_poll.elapsed();
                    if since < MIN_POLL_INTERVAL {
                        tokio::time::sleep(MIN_POLL_INTERVAL - since).await;
                    }
                    last_poll = Instant::now();
                    match code.clone() {
                        None => PairResponse::Refused {
                            reason: "ask for a code first".into(),
                        },
                        Some(c) => {
                            match tokio::task::spawn_blocking(move || registry.poll(&peer, &c))
                                .await
                                .map_err(AcceptError::from_err)?
                            {
                                Ok(PollState::Pending) => PairResponse::Pending,
                                Ok(PollState::Approved(scope)) => PairResponse::Approved {
                                    hub_name: self.hub_name.clone(),
                                    scope,
                                },
                                Ok(PollState::Denied) => PairResponse::Denied,
                                Ok(PollState::Expired) => PairResponse::Expired,
                                Err(e) => refusal(e),
                            }
                        }
                    }
                }
            };
            let done = !matches!(reply, PairResponse::Pending | PairResponse::Code { .. });
            send(&mut tx, &reply).await?;
            if done {
                break;
            }
        }
        let _ = tx.finish();
        // Give the last frame time to arrive before the connection goes.
        let _ = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn ip(last: u8) -> Origin {
        Origin::Direct(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn gate_caps_per_address_relay_and_overall_and_releases_on_drop() {
        let gate = PairGate::new(PairLimits {
            total: 6,
            per_addr: 2,
            relayed: 3,
            ..PairLimits::default()
        });
        let a: Vec<_> = (0..2).map(|_| gate.try_enter(ip(1))).collect();
        assert!(a.iter().all(Option::is_some));
        assert!(gate.try_enter(ip(1)).is_none(), "per-address cap");
        // Another address is not locked out by the first.
        let b = gate.try_enter(ip(2)).expect("other address");
        // Relayed connections have no address: their own bucket, never the per-address cap.
        let r: Vec<_> = (0..3).map(|_| gate.try_enter(Origin::Relayed)).collect();
        assert!(
            r.iter().all(Option::is_some),
            "relay bucket is larger than per-address"
        );
        assert_eq!(gate.open(), 6);
        assert!(gate.try_enter(ip(3)).is_none(), "overall cap");
        drop(r);
        assert!(gate.try_enter(Origin::Relayed).is_some());
        drop(a);
        drop(b);
        assert_eq!(gate.open(), 0);
        assert!(gate.counts().per_bucket.is_empty());
    }

    #[test]
    fn handed_over_permits_are_found_once() {
        let gate = PairGate::new(PairLimits::default());
        let p = gate.try_enter(ip(9)).expect("permit");
        gate.hand_over(7, p);
        assert_eq!(gate.open(), 1);
        assert!(gate.take(7).is_some());
        assert!(gate.take(7).is_none());
        assert_eq!(gate.open(), 0);
    }
}
