//! The `hearth/pair/N` protocol handler: device-code pairing, open to any key.
//!
//! Every key that reaches the hub's UDP port may open this ALPN, so the handler treats
//! each connection as an adversary's. [`PairGate`] caps pairing connections overall, per
//! remote address and for relayed connections together. The router's incoming filter
//! ([`PairService::incoming_filter`]) refuses a pairing attempt whose bucket is full from
//! its first packet, before any handshake work or connection state, and asks unvalidated
//! addresses to retry (QUIC address validation) once the gate is half full, so spoofed
//! packets cannot hold slots; `on_accepting` takes the slot itself, before the TLS
//! handshake completes. A connection that does not finish its handshake, send its
//! `Start` or poll within a few seconds is closed; frames are limited to
//! `PAIR_MAX_FRAME`. One stream per attempt: the node sends `Start`, gets a code, then
//! polls until the owner decides or the code expires. Every decision goes through [`DeviceRegistry`]; this
//! handler never keeps pairing state beyond the code of its one connection, and never
//! spawns a task of its own. On `hearth/pair/2` the approval also names the hub's relay
//! ([`PairService::with_relay`]), so a device paired at home reaches its hub away from it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use hearth_protocol::{
    alpn_version, encode_frame, Family, PairRequest, PairResponse, PAIR_MAX_FRAME,
};
use hearth_sync::read_frame;
use iroh::{
    endpoint::{Accepting, Connection, Incoming, IncomingAddr, SendStream},
    protocol::{AcceptError, IncomingFilter, IncomingFilterOutcome, ProtocolHandler},
    RelayUrl,
};
use tokio::sync::Notify;

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
            // Real pairings are rare and short. A held pairing connection costs the hub
            // about 100 KiB (noq and iroh connection state, TLS, the task; measured by the
            // flood test), so 128 of them stay near 13 MiB; one address holds at most 4,
            // and when the gate is full a newcomer from a less busy address takes a slot
            // from the busiest.
            total: 128,
            per_addr: 4,
            // A relayed connection has no remote IP (the relay forwards it), so relayed
            // connections cannot be told apart by address: they share this one bucket,
            // half the total, so a flood through relays cannot lock out the LAN, and
            // per-address limits never apply to them, so devices behind one relay are not
            // locked out together by a per-address cap of 4.
            relayed: 64,
            handshake_timeout: Duration::from_secs(5),
            first_message_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
        }
    }
}

/// One held slot, as the gate sees it.
#[derive(Debug)]
struct Slot {
    id: u64,
    evict: Arc<Notify>,
}

#[derive(Debug, Default)]
struct GateState {
    total: usize,
    next_id: u64,
    /// Slots per bucket, oldest first.
    buckets: HashMap<String, Vec<Slot>>,
}

impl GateState {
    fn count(&self, bucket: &str) -> usize {
        self.buckets.get(bucket).map_or(0, Vec::len)
    }

    fn remove(&mut self, bucket: &str, id: u64) -> bool {
        let Some(slots) = self.buckets.get_mut(bucket) else {
            return false;
        };
        let before = slots.len();
        slots.retain(|s| s.id != id);
        let removed = slots.len() < before;
        if slots.is_empty() {
            self.buckets.remove(bucket);
        }
        if removed {
            self.total = self.total.saturating_sub(1);
        }
        removed
    }
}

/// Counts open pairing connections and hands out [`PairPermit`]s within [`PairLimits`].
///
/// When the gate is full, a newcomer whose bucket holds fewer slots than the busiest
/// bucket by two or more takes the busiest bucket's oldest slot (that connection is told
/// to close): many addresses holding several slots each cannot keep out a device from an
/// address that holds none. A device pairing alone from its address is never evicted.
#[derive(Debug)]
pub struct PairGate {
    limits: PairLimits,
    state: Mutex<GateState>,
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
    id: u64,
    evict: Arc<Notify>,
}

impl PairPermit {
    /// Completes when the gate gave this slot to a newcomer: close the connection.
    async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for PairPermit {
    fn drop(&mut self) {
        // An evicted slot was already removed; nothing to do then.
        self.gate.state().remove(&self.bucket, self.id);
    }
}

impl PairGate {
    /// A gate with `limits`.
    pub fn new(limits: PairLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(GateState::default()),
            handed_over: Mutex::new(HashMap::new()),
        })
    }

    fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cap(&self, origin: Origin) -> usize {
        match origin {
            Origin::Direct(_) => self.limits.per_addr,
            Origin::Relayed => self.limits.relayed,
        }
    }

    /// The busiest bucket, if it holds at least two slots more than `bucket` does.
    fn victim_bucket(state: &GateState, bucket: &str) -> Option<String> {
        let mine = state.count(bucket);
        state
            .buckets
            .iter()
            .max_by_key(|(_, slots)| slots.len())
            .filter(|(_, slots)| slots.len() > mine + 1)
            .map(|(b, _)| b.clone())
    }

    /// A slot for a connection from `origin`, or `None` when its bucket is full, or the
    /// gate is full and no bucket holds two slots more than this one.
    pub fn try_enter(self: &Arc<Self>, origin: Origin) -> Option<PairPermit> {
        let bucket = origin.bucket();
        let mut state = self.state();
        if state.count(&bucket) >= self.cap(origin) {
            return None;
        }
        if state.total >= self.limits.total {
            let victim = Self::victim_bucket(&state, &bucket)?;
            let slots = state.buckets.get_mut(&victim)?;
            let oldest = slots.remove(0);
            if slots.is_empty() {
                state.buckets.remove(&victim);
            }
            state.total = state.total.saturating_sub(1);
            // Stored if its task is not waiting right now: it sees it at its next wait.
            oldest.evict.notify_one();
            tracing::debug!(from = %victim, to = %bucket, "pairing slot reassigned");
        }
        state.total += 1;
        state.next_id += 1;
        let id = state.next_id;
        let evict = Arc::new(Notify::new());
        state.buckets.entry(bucket.clone()).or_default().push(Slot {
            id,
            evict: evict.clone(),
        });
        drop(state);
        Some(PairPermit {
            gate: self.clone(),
            origin,
            bucket,
            id,
            evict,
        })
    }

    /// Pairing connections open now.
    pub fn open(&self) -> usize {
        self.state().total
    }

    /// Whether a connection from `origin` would get a slot now (no slot is taken).
    fn has_room(&self, origin: Origin) -> bool {
        let bucket = origin.bucket();
        let state = self.state();
        state.count(&bucket) < self.cap(origin)
            && (state.total < self.limits.total || Self::victim_bucket(&state, &bucket).is_some())
    }

    /// The verdict on a connection's first packet (see [`PairService::incoming_filter`]).
    fn filter(&self, incoming: &Incoming) -> IncomingFilterOutcome {
        let origin = origin_of(incoming.remote_addr());
        let room = self.has_room(origin);
        let pressed = self.open() * 2 >= self.limits.total;
        if room && !pressed {
            return IncomingFilterOutcome::Accept;
        }
        // Only under pressure: read the ALPNs out of the ClientHello (one decrypt of the
        // Initial packet, far cheaper than a handshake). Sync and RPC go on to the access
        // hook; an attempt we cannot parse goes on to `on_accepting`, which counts it.
        if !offers_only_pairing(incoming) {
            return IncomingFilterOutcome::Accept;
        }
        if !room {
            return IncomingFilterOutcome::Reject;
        }
        if !incoming.remote_addr_validated() {
            return IncomingFilterOutcome::Retry;
        }
        IncomingFilterOutcome::Accept
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

/// Whether the ClientHello of `incoming` offers `hearth/pair/N` (any version) and
/// nothing else.
fn offers_only_pairing(incoming: &Incoming) -> bool {
    let Some(alpns) = incoming.decrypt().and_then(|d| d.alpns()) else {
        return false;
    };
    let mut pair = false;
    for alpn in alpns {
        match alpn {
            Ok(a) if alpn_version(Family::Pair, a.as_ref()).is_some() => pair = true,
            _ => return false,
        }
    }
    pair
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

/// Where the hub's relay is, asked at each approval (a hub on iroh's public relays
/// learns its home relay only after start).
#[derive(Clone)]
struct RelaySource(Arc<dyn Fn() -> Option<RelayUrl> + Send + Sync>);

impl std::fmt::Debug for RelaySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RelaySource").field(&(self.0)()).finish()
    }
}

/// Serves pairing requests.
#[derive(Debug, Clone)]
pub struct PairService {
    registry: Arc<DeviceRegistry>,
    hub_name: String,
    require_ticket: bool,
    gate: Arc<PairGate>,
    relay: Option<RelaySource>,
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
            relay: None,
        }
    }

    /// Names the hub's relay in approvals on `hearth/pair/2`: `relay` is asked at each
    /// approval and answers the URL devices should dial the hub through, if any.
    pub fn with_relay(
        mut self,
        relay: impl Fn() -> Option<RelayUrl> + Send + Sync + 'static,
    ) -> Self {
        self.relay = Some(RelaySource(Arc::new(relay)));
        self
    }

    /// The approval in the words of the connection's pairing version.
    fn approved(&self, version: u16, scope: Option<String>) -> PairResponse {
        let hub_name = self.hub_name.clone();
        if version < 2 {
            return PairResponse::Approved { hub_name, scope };
        }
        PairResponse::ApprovedWithRelay {
            hub_name,
            scope,
            relay: self
                .relay
                .as_ref()
                .and_then(|r| (r.0)())
                .map(|u| u.to_string()),
        }
    }

    /// The filter to install with `RouterBuilder::incoming_filter`: it turns away pairing
    /// attempts the gate has no room for at their first packet (QUIC `CONNECTION_REFUSED`,
    /// no handshake, no connection state), and makes unvalidated addresses prove they can
    /// receive (a QUIC retry) once the gate is half full. Other ALPNs always pass.
    pub fn incoming_filter(&self) -> IncomingFilter {
        let gate = self.gate.clone();
        Arc::new(move |incoming: &Incoming| gate.filter(incoming))
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
        let conn = tokio::select! {
            done = tokio::time::timeout(self.gate.limits.handshake_timeout, accepting) => match done {
                Ok(conn) => conn.map_err(AcceptError::from_err)?,
                Err(_) => return Err(AcceptError::from_err(PairRefusal::HandshakeTimeout)),
            },
            _ = permit.evicted() => return Err(AcceptError::from_err(PairRefusal::Busy(origin.bucket()))),
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
        let result = tokio::select! {
            served = self.serve(&conn, permit.origin) => served,
            _ = permit.evicted() => {
                tracing::debug!(peer = %conn.remote_id(), "pairing slot given to a newcomer: closed");
                conn.close(503u32.into(), b"pairing is busy; try again");
                Ok(())
            }
        };
        drop(permit);
        result
    }
}

impl PairService {
    async fn serve(&self, conn: &Connection, origin: Origin) -> Result<(), AcceptError> {
        let peer = conn.remote_id();
        // The router only hands this handler the pairing ALPNs it registered.
        let version = alpn_version(Family::Pair, conn.alpn()).unwrap_or(1);
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
                        Ok(StartOutcome::AlreadyPaired { scope }) => self.approved(version, scope),
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
                                Ok(PollState::Approved(scope)) => self.approved(version, scope),
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
            total: 8,
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
        assert!(
            gate.try_enter(Origin::Relayed).is_none(),
            "relay bucket cap"
        );
        assert_eq!(gate.open(), 6);
        drop(r);
        assert!(gate.try_enter(Origin::Relayed).is_some());
        drop(a);
        drop(b);
        assert_eq!(gate.open(), 0);
        assert!(gate.state().buckets.is_empty());
    }

    #[test]
    fn a_full_gate_of_single_slots_refuses() {
        let gate = PairGate::new(PairLimits {
            total: 3,
            ..PairLimits::default()
        });
        let held: Vec<_> = (1..=3).map(|i| gate.try_enter(ip(i))).collect();
        assert!(held.iter().all(Option::is_some));
        assert!(!gate.has_room(ip(4)));
        assert!(
            gate.try_enter(ip(4)).is_none(),
            "overall cap, nobody to evict"
        );
        assert_eq!(gate.open(), 3);
    }

    #[tokio::test]
    async fn one_host_cannot_lock_out_pairing_connections() {
        let gate = PairGate::new(PairLimits {
            total: 4,
            per_addr: 4,
            ..PairLimits::default()
        });
        let flood: Vec<_> = (0..4)
            .map(|_| gate.try_enter(ip(66)).expect("slot"))
            .collect();
        assert!(gate.has_room(ip(7)), "a newcomer from elsewhere has room");
        let device = gate
            .try_enter(ip(7))
            .expect("the newcomer takes a flood slot");
        assert_eq!(gate.open(), 4, "still within the overall cap");
        // The oldest flood connection is told to go; the others are not.
        tokio::time::timeout(Duration::from_secs(1), flood[0].evicted())
            .await
            .expect("oldest evicted");
        for p in &flood[1..] {
            assert!(
                tokio::time::timeout(Duration::from_millis(20), p.evicted())
                    .await
                    .is_err(),
                "only one is evicted"
            );
        }
        drop(flood);
        assert_eq!(gate.open(), 1, "an evicted slot is not released twice");
        // A device alone on its address is never evicted by one more of the same.
        let other = gate.try_enter(ip(8)).expect("slot");
        assert!(
            tokio::time::timeout(Duration::from_millis(20), device.evicted())
                .await
                .is_err()
        );
        drop((device, other));
        assert_eq!(gate.open(), 0);
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
