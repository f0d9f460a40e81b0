//! The node's line to its hub's agent: one `hearth/rpc/N` connection to the pinned hub,
//! kept open by one task, over which the node relays its UI's chat, approvals, history,
//! usage, settings and device requests, and reads the hub's event stream.
//!
//! - [`HubLink::start`] dials the pinned hub (the [`HubLocator`] of the sync loop),
//!   reconnects with backoff capped at [`BACKOFF_MAX`] when the connection ends, and
//!   stops on [`HubLink::shutdown`]; [`HubLink::state`] watches it (online, offline).
//! - [`HubLink::request`] relays one request on its own stream. While the link is
//!   offline it fails at once with [`LinkError::Unreachable`] (it never waits for a
//!   dial); an answer's head must come within [`HEAD_TIMEOUT`]; a connection lost
//!   mid-answer ends the body stream with an error. A dead hub is noticed within
//!   [`hearth_net::IDLE_TIMEOUT`] (keep-alives every [`hearth_net::KEEP_ALIVE`]).
//! - [`HubLink::events`] is the hub's event stream for this device, resumed after the
//!   last `seq` seen across reconnects.
//!
//! Decides nothing about access: the hub checks every relayed request against this
//! device's current grant. Dials only the pinned hub (its key is checked by the QUIC
//! handshake).

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures_util::Stream;
use hearth_protocol::{
    alpn_version, alpns, encode_request, Family, RpcError, RpcMethod, RpcRequest, RpcResponse,
    RPC_MAX_FRAME, RPC_VERSIONS,
};
use iroh::{
    endpoint::{ConnectOptions, Connection, RecvStream},
    Endpoint,
};
use serde_json::Value;
use tokio::{sync::watch, task::JoinHandle};

use crate::HubLocator;

/// The first delay before dialing again.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest delay between dials: the link comes back within this of the hub.
pub const BACKOFF_MAX: Duration = Duration::from_secs(3);
/// How long a dial may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer's head may take (a chat's head comes once its turn has started).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(15);
/// The longest event line the node buffers (a chat event with a large tool output).
const MAX_EVENT_LINE: usize = 16 * 1024 * 1024;

/// Whether the link is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// Dialing for the first time.
    Connecting,
    /// Connected on `hearth/rpc/<version>`.
    Online {
        /// The version both sides chose.
        version: u16,
    },
    /// Not connected; dialing again after a delay.
    Offline {
        /// Why, for the log and the UI.
        reason: String,
    },
    /// Shut down.
    Stopped,
}

/// Why a relayed request failed (on the node's side of the line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The hub is not connected now.
    #[error("the hub is unreachable")]
    Unreachable,
    /// The hub did not answer in time.
    #[error("the hub did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection failed during the request.
    #[error("the connection to the hub failed: {0}")]
    Connection(String),
    /// The request cannot be relayed as it is (too large, bad path).
    #[error("cannot relay this request: {0}")]
    Request(#[from] RpcError),
    /// The hub's answer broke the protocol.
    #[error("bad answer from the hub: {0}")]
    Protocol(String),
}

/// A relayed answer's body: chunks as the hub produces them; an error ends it.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, LinkError>> + Send>>;

/// A relayed answer.
pub struct RelayedResponse {
    /// HTTP status.
    pub status: u16,
    /// Content type (empty for none).
    pub content_type: String,
    /// The body, streamed.
    pub body: BodyStream,
}

impl std::fmt::Debug for RelayedResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayedResponse")
            .field("status", &self.status)
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

impl RelayedResponse {
    /// Reads the whole body (at most `max` bytes).
    pub async fn bytes(mut self, max: usize) -> Result<Vec<u8>, LinkError> {
        use futures_util::StreamExt;
        let mut out = Vec::new();
        while let Some(chunk) = self.body.next().await {
            out.extend(chunk?);
            if out.len() > max {
                return Err(LinkError::Protocol(format!(
                    "answer longer than {max} bytes"
                )));
            }
        }
        Ok(out)
    }
}

struct Shared {
    conn: watch::Receiver<Option<Connection>>,
    state: watch::Receiver<LinkState>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// The node's line to its hub; clones share it.
#[derive(Clone)]
pub struct HubLink {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for HubLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubLink")
            .field("state", &*self.shared.state.borrow())
            .finish_non_exhaustive()
    }
}

impl HubLink {
    /// Starts keeping a connection to `hub` from `endpoint` (this device's key).
    pub fn start(endpoint: Endpoint, hub: HubLocator) -> Self {
        let (conn_tx, conn_rx) = watch::channel(None);
        let (state_tx, state_rx) = watch::channel(LinkState::Connecting);
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(keep_connected(endpoint, hub, conn_tx, state_tx, stop_rx));
        Self {
            shared: Arc::new(Shared {
                conn: conn_rx,
                state: state_rx,
                stop: stop_tx,
                task: Mutex::new(Some(task)),
            }),
        }
    }

    /// Watches the link's state.
    pub fn state(&self) -> watch::Receiver<LinkState> {
        self.shared.state.clone()
    }

    /// Closes the connection and stops dialing; open requests end with an error.
    pub async fn shutdown(&self) {
        let _ = self.shared.stop.send(true);
        let task = self
            .shared
            .task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Relays one request (`path` with its query, relative to the API root). Fails at
    /// once with [`LinkError::Unreachable`] while the link is offline.
    pub async fn request(
        &self,
        method: RpcMethod,
        path: &str,
        body: Vec<u8>,
    ) -> Result<RelayedResponse, LinkError> {
        let frame = encode_request(&RpcRequest {
            method,
            path: path.to_string(),
            body,
        })?;
        let conn = self
            .shared
            .conn
            .borrow()
            .clone()
            // A connection that closed a moment ago, before the link's task noticed, is
            // as unreachable as none.
            .filter(|c| c.close_reason().is_none())
            .ok_or(LinkError::Unreachable)?;
        let io = |e: &dyn std::error::Error| LinkError::Connection(e.to_string());
        let head = async {
            let (mut send, mut recv) = conn.open_bi().await.map_err(|e| io(&e))?;
            send.write_all(&frame).await.map_err(|e| io(&e))?;
            send.finish().map_err(|e| io(&e))?;
            let mut buf = Vec::new();
            match read_response(&mut recv, &mut buf).await? {
                Some(RpcResponse::Head {
                    status,
                    content_type,
                }) => Ok((status, content_type, recv)),
                Some(RpcResponse::Chunk(_)) => {
                    Err(LinkError::Protocol("a body chunk before the head".into()))
                }
                None => Err(LinkError::Connection(
                    "the hub closed the stream without answering".into(),
                )),
            }
        };
        let (status, content_type, recv) = tokio::time::timeout(HEAD_TIMEOUT, head)
            .await
            .map_err(|_| LinkError::Timeout(HEAD_TIMEOUT))??;
        let body = futures_util::stream::unfold(Some((recv, Vec::new())), |state| async move {
            let (mut recv, mut buf) = state?;
            match read_response(&mut recv, &mut buf).await {
                Ok(Some(RpcResponse::Chunk(bytes))) => Some((Ok(bytes), Some((recv, buf)))),
                Ok(Some(RpcResponse::Head { .. })) => {
                    Some((Err(LinkError::Protocol("a second head".into())), None))
                }
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(RelayedResponse {
            status,
            content_type,
            body: Box::pin(body),
        })
    }

    /// The hub's events for this device (JSON objects, `seq` first; a `resync` says the
    /// events asked for are gone: reload), starting after `after` (or live), resumed
    /// after the last `seq` seen whenever the connection comes back. Ends when the link
    /// is shut down.
    pub fn events(&self, after: Option<u64>) -> impl Stream<Item = Value> + Send + 'static {
        let feed = EventFeed {
            link: self.clone(),
            last: after,
            body: None,
            pending: Vec::new(),
            ready: VecDeque::new(),
        };
        futures_util::stream::unfold(feed, |mut feed| async move {
            let next = feed.next().await?;
            Some((next, feed))
        })
    }
}

/// Reads one response frame; `Ok(None)` at a clean end of stream.
async fn read_response(
    recv: &mut RecvStream,
    buf: &mut Vec<u8>,
) -> Result<Option<RpcResponse>, LinkError> {
    let frame = hearth_sync::read_frame::<RpcResponse, _>(recv, buf, RPC_MAX_FRAME)
        .await
        .map_err(|e| LinkError::Connection(e.to_string()))?;
    match frame {
        Some(resp) => {
            resp.check()
                .map_err(|e| LinkError::Protocol(e.to_string()))?;
            Ok(Some(resp))
        }
        None => Ok(None),
    }
}

/// The state of [`HubLink::events`].
struct EventFeed {
    link: HubLink,
    last: Option<u64>,
    body: Option<BodyStream>,
    pending: Vec<u8>,
    ready: VecDeque<Value>,
}

impl EventFeed {
    async fn next(&mut self) -> Option<Value> {
        use futures_util::StreamExt;
        loop {
            if let Some(v) = self.ready.pop_front() {
                return Some(v);
            }
            let Some(body) = self.body.as_mut() else {
                self.body = Some(self.subscribe().await?);
                continue;
            };
            match body.next().await {
                Some(Ok(bytes)) => self.take(&bytes),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "the hub's event stream broke off; resuming");
                    self.body = None;
                }
                None => self.body = None,
            }
        }
    }

    /// Opens the stream once the link is online; `None` once it is stopped.
    async fn subscribe(&mut self) -> Option<BodyStream> {
        let mut state = self.link.state();
        loop {
            let online = {
                let s = state.borrow_and_update();
                match &*s {
                    LinkState::Stopped => return None,
                    LinkState::Online { .. } => true,
                    _ => false,
                }
            };
            if online {
                self.pending.clear();
                let path = match self.last {
                    Some(after) => format!("/events?after={after}"),
                    None => "/events".to_string(),
                };
                match self.link.request(RpcMethod::Get, &path, Vec::new()).await {
                    Ok(r) if r.status == 200 => return Some(r.body),
                    Ok(r) => tracing::warn!(status = r.status, "the hub refused its event stream"),
                    Err(e) => tracing::debug!(error = %e, "cannot open the hub's event stream"),
                }
                // Try again when the link changes, or after a pause.
                let _ = tokio::time::timeout(BACKOFF_MAX, state.changed()).await;
                continue;
            }
            if state.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Splits `bytes` into event lines.
    fn take(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                tracing::warn!("the hub sent an event that is not JSON; skipped");
                continue;
            };
            match v["type"].as_str() {
                // The hub ended the stream because this side fell behind: resume.
                Some("lagged") => {
                    self.last = v["after"].as_u64().or(self.last);
                    continue;
                }
                Some("resync") => self.last = v["after"].as_u64().or(self.last),
                _ => {
                    if let Some(seq) = v["seq"].as_u64() {
                        self.last = Some(seq);
                    }
                }
            }
            self.ready.push_back(v);
        }
        if self.pending.len() > MAX_EVENT_LINE {
            tracing::warn!("an event line from the hub is too long; resubscribing");
            self.pending.clear();
            self.body = None;
        }
    }
}

/// The link's task: dial, hold the connection until it closes, wait, dial again.
async fn keep_connected(
    endpoint: Endpoint,
    hub: HubLocator,
    conn_tx: watch::Sender<Option<Connection>>,
    state_tx: watch::Sender<LinkState>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut first = true;
    loop {
        let attempt = async {
            let addr = hub.locate(!first).await;
            dial(&endpoint, addr).await
        };
        let dialed = tokio::select! {
            d = attempt => d,
            _ = stop.wait_for(|s| *s) => break,
        };
        first = false;
        let reason = match dialed {
            Ok((conn, version)) => {
                tracing::info!(version, "connected to the hub's agent");
                backoff = BACKOFF_MIN;
                conn_tx.send_replace(Some(conn.clone()));
                state_tx.send_replace(LinkState::Online { version });
                let reason = tokio::select! {
                    e = conn.closed() => e.to_string(),
                    _ = stop.wait_for(|s| *s) => {
                        conn_tx.send_replace(None);
                        conn.close(0u32.into(), b"node stopping");
                        break;
                    }
                };
                conn_tx.send_replace(None);
                reason
            }
            Err(reason) => reason,
        };
        tracing::info!(%reason, retry_in = ?backoff, "the hub's agent is unreachable");
        state_tx.send_replace(LinkState::Offline { reason });
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    state_tx.send_replace(LinkState::Stopped);
}

/// Dials `addr` offering every rpc version this build speaks.
async fn dial(endpoint: &Endpoint, addr: iroh::EndpointAddr) -> Result<(Connection, u16), String> {
    let offered = alpns(Family::Rpc, RPC_VERSIONS);
    let Some((first, rest)) = offered.split_first() else {
        return Err("this node speaks no rpc version".into());
    };
    let opts = ConnectOptions::new()
        .with_additional_alpns(rest.to_vec())
        .with_transport_config(hearth_net::link_transport());
    let connect = async {
        let connecting = endpoint
            .connect_with_opts(addr, first, opts)
            .await
            .map_err(|e| e.to_string())?;
        connecting.await.map_err(|e| e.to_string())
    };
    let conn = tokio::time::timeout(DIAL_TIMEOUT, connect)
        .await
        .map_err(|_| format!("no answer within {DIAL_TIMEOUT:?}"))??;
    match alpn_version(Family::Rpc, conn.alpn()).filter(|v| RPC_VERSIONS.contains(v)) {
        Some(v) => Ok((conn, v)),
        None => {
            conn.close(0u32.into(), b"unexpected protocol");
            Err("the hub chose an rpc version this node did not offer".into())
        }
    }
}

/// Feeds the link into the node's own event stream until `ring` shuts down: every hub
/// event relayed for this device (its `seq` kept as `hub_seq`, renumbered by the ring so
/// a client of the node resumes on the node's numbers), a `{"type":"lost","source":
/// "hub"}` when the hub no longer has the events the link asked for (reload chat and
/// approvals), and `{"type":"hub","online":…}` whenever the link goes up or down, so a
/// UI can show that the hub is out of reach.
pub fn publish_into(link: &HubLink, ring: &Arc<hearth_ui::events::EventRing>) {
    use futures_util::StreamExt;

    let events = link.events(None);
    let mut state = link.state();
    let stopping = ring.stopping();
    let out = ring.clone();
    ring.spawn(async move {
        tokio::pin!(events);
        tokio::pin!(stopping);
        let mut online = None;
        loop {
            let now = matches!(*state.borrow_and_update(), LinkState::Online { .. });
            if online != Some(now) {
                online = Some(now);
                out.publish(serde_json::json!({ "type": "hub", "online": now }), None);
            }
            tokio::select! {
                _ = &mut stopping => return,
                changed = state.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                ev = events.next() => match ev {
                    Some(Value::Object(mut fields)) => {
                        if fields.get("type").and_then(Value::as_str) == Some("resync") {
                            out.publish(
                                serde_json::json!({ "type": "lost", "source": "hub", "count": 0 }),
                                None,
                            );
                            continue;
                        }
                        if let Some(seq) = fields.remove("seq") {
                            fields.insert("hub_seq".into(), seq);
                        }
                        out.publish(Value::Object(fields), None);
                    }
                    Some(_) => {}
                    None => return,
                },
            }
        }
    });
}
