//! The `hearth/rpc/N` handler: the requests a paired node relays from its UI (chat,
//! approvals, conversation history, usage, settings, devices) and the event stream it
//! reads, answered by the hub's own API handlers.
//!
//! One bidirectional stream per request (`hearth_protocol::RpcRequest`, then a head and
//! body chunks back). For every request, in order:
//! 1. the frame is read within [`REQUEST_TIMEOUT`] and bounded by `RPC_MAX_FRAME`; a bad
//!    one is answered 400;
//! 2. a route outside the relay table (`hearth_ui::RELAYED`) is 404 `not_relayed`: no
//!    document route, no `/auth/*`, nothing else;
//! 3. the device's grant (paired and unrevoked, scope, admin flag) is read from the
//!    registry for this request: the hub does not trust the connection's age;
//! 4. `api::caller::check_route` applies the route's rule (scoped devices stay away
//!    from settings, devices and the audit log; widening power needs an admin device);
//! 5. the request is dispatched into the API's own handlers ([`api::relay_router`])
//!    with a [`RelayedDevice`] extension, whose `Caller` the handlers check objects
//!    against (a scoped device reaches only its subtree's projects); or, for `GET
//!    /events`, the hub's numbered events stream back as newline-delimited JSON,
//!    filtered for the device (chat and approvals of its subtree, device events for
//!    full-scope devices only, never document events: the node has its own replica's).
//!
//! A device has one rpc connection (the tracker's): revoking it, changing its scope or
//! its admin flag closes it at once, ending any open stream.
//!
//! Never trusts the node to filter anything; never serves a request before the API's
//! state exists (503 `hub_starting`).

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use axum::{
    body::Body,
    extract::Query,
    http::{header, Request, StatusCode},
    response::{IntoResponse, Response},
};
use futures_util::StreamExt;
use hearth_protocol::{
    encode_response, RpcMethod, RpcRequest, RpcResponse, RPC_MAX_CHUNK, RPC_MAX_FRAME,
};
use hearth_sync::{DocId, DocumentStore};
use hearth_ui::{find_relayed, RelayKind, Verb};
use iroh::{
    endpoint::{Connection, RecvStream, SendStream},
    protocol::{AcceptError, ProtocolHandler},
    EndpointId,
};
use serde::Deserialize;
use tokio::{
    sync::{watch, Semaphore},
    task::JoinSet,
};
use tower::ServiceExt;

use crate::{
    access::{ConnectionTracker, CLOSE_NOT_ALLOWED, NOT_PAIRED_REASON},
    api::{
        self,
        caller::{check_route, RelayedDevice},
        ApiError, ApiState,
    },
    devices::{DeviceRegistry, Grant},
    events::{Event, EventHub, Next},
};

/// How long a node may take to send its request frame.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one body chunk may wait for the node to take it before the stream is
/// dropped (a node that stops reading never holds up the hub).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests one connection may have in flight; more wait before their stream is taken.
pub const MAX_STREAMS: usize = 32;
/// How long a scoped device's subtree, as an event filter, is trusted before it is read
/// again when an event names a project outside it (a project created below the root).
const REACH_TTL: Duration = Duration::from_secs(1);
/// QUIC stream error code: the answer broke off (the hub's side failed mid-body).
const RESET_BROKEN: u32 = 1;

/// Serves relayed requests; registered for every rpc version the hub speaks.
#[derive(Debug, Clone)]
pub struct RpcService {
    registry: Arc<DeviceRegistry>,
    tracker: Arc<ConnectionTracker>,
    relay: Arc<OnceLock<Relay>>,
    stop: Arc<watch::Sender<bool>>,
}

impl RpcService {
    /// A service over the registry; it answers 503 until [`Self::serve`] gives it the API.
    pub fn new(registry: Arc<DeviceRegistry>, tracker: Arc<ConnectionTracker>) -> Self {
        Self {
            registry,
            tracker,
            relay: Arc::default(),
            stop: Arc::new(watch::channel(false).0),
        }
    }

    /// Starts answering from the API over `state` (the hub builds it after the router).
    pub fn serve(&self, state: ApiState) {
        let _ = self.relay.set(Relay::new(state));
    }
}

/// Answers relayed requests from the API's own handlers.
#[derive(Clone)]
pub struct Relay {
    router: axum::Router,
    registry: Arc<DeviceRegistry>,
    events: Arc<EventHub>,
    store: DocumentStore,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

fn verb_of(m: RpcMethod) -> Verb {
    match m {
        RpcMethod::Get => Verb::Get,
        RpcMethod::Post => Verb::Post,
        RpcMethod::Put => Verb::Put,
        RpcMethod::Patch => Verb::Patch,
        RpcMethod::Delete => Verb::Delete,
    }
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    after: Option<u64>,
}

impl Relay {
    /// A relay over the API's state.
    pub fn new(state: ApiState) -> Self {
        Self {
            registry: state.registry.clone(),
            events: state.chat.events.clone(),
            store: state.store.clone(),
            router: api::relay_router(state),
        }
    }

    /// Answers one request relayed by device `peer` (the key the QUIC handshake
    /// authenticated): every check of this module's steps 2–5, then the API's answer.
    pub async fn answer(&self, peer: EndpointId, req: RpcRequest) -> Response {
        let method = req.method.as_str();
        let path = req.path_only().to_string();
        let resp = match self.checked(peer, req).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        };
        tracing::debug!(%peer, method, %path, status = resp.status().as_u16(), "relayed request");
        resp
    }

    async fn checked(&self, peer: EndpointId, req: RpcRequest) -> Result<Response, ApiError> {
        req.check()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let verb = verb_of(req.method);
        let found = find_relayed(verb, req.path_only()).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_relayed",
                format!(
                    "{} {} is not relayed to the hub",
                    verb.as_str(),
                    req.path_only()
                ),
            )
        })?;
        let reg = self.registry.clone();
        let grant = tokio::task::spawn_blocking(move || reg.grant(&peer))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::from)?
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "revoked",
                    "this device is not paired with the hub (or was revoked)",
                )
            })?;
        let device = device_of(peer, grant)?;
        check_route(found.route, &device)?;
        let uri: axum::http::Uri = req
            .path
            .parse()
            .map_err(|e| ApiError::bad_request(format!("bad path: {e}")))?;
        if found.route.kind == RelayKind::Events {
            let q = Query::<EventsQuery>::try_from_uri(&uri)
                .map_err(|e| ApiError::bad_request(e.body_text()))?;
            return Ok(self.event_stream(device, q.after));
        }
        let mut request = Request::builder()
            .method(verb.as_str())
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(req.body))
            .map_err(ApiError::internal)?;
        request.extensions_mut().insert(device);
        match self.router.clone().oneshot(request).await {
            Ok(resp) => Ok(resp),
            Err(never) => match never {},
        }
    }

    /// `GET /events` for `device`: the numbered stream from `after` (or live), one JSON
    /// object per line, filtered for the device. Ends when the device falls behind
    /// (the node resumes after the last `seq` it saw) or the hub shuts down.
    fn event_stream(&self, device: RelayedDevice, after: Option<u64>) -> Response {
        let feed = Feed {
            sub: self.events.subscribe(after),
            filter: EventFilter::new(device, self.store.clone()),
            done: false,
        };
        let lines = futures_util::stream::unfold(feed, |mut f| async move {
            if f.done {
                return None;
            }
            loop {
                match f.sub.next().await {
                    Next::Event(ev) => {
                        if f.filter.admits(&ev).await {
                            return Some((Ok::<_, std::convert::Infallible>(line(&ev.json)), f));
                        }
                    }
                    Next::Resync { after } => {
                        let text = serde_json::json!({ "type": "resync", "after": after });
                        return Some((Ok(line(&text.to_string())), f));
                    }
                    Next::Lagged { last } => {
                        tracing::info!(last, "a relayed event stream fell behind; ending it");
                        f.done = true;
                        let text = serde_json::json!({ "type": "lagged", "after": last });
                        return Some((Ok(line(&text.to_string())), f));
                    }
                    Next::Closed => return None,
                }
            }
        });
        (
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            Body::from_stream(lines),
        )
            .into_response()
    }
}

fn line(json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 1);
    out.extend_from_slice(json.as_bytes());
    out.push(b'\n');
    out
}

fn device_of(id: EndpointId, grant: Grant) -> Result<RelayedDevice, ApiError> {
    let scope = match grant.scope.as_deref().map(str::parse::<DocId>).transpose() {
        Ok(s) => s,
        Err(_) => {
            tracing::error!(peer = %id, "device scope is not a project id; refusing its requests");
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "out_of_scope",
                "this device's scope is invalid: ask the owner to set it again",
            ));
        }
    };
    Ok(RelayedDevice {
        id,
        scope,
        admin: grant.admin,
    })
}

struct Feed {
    sub: crate::events::Subscription,
    filter: EventFilter,
    done: bool,
}

/// Which events a device may see: chat and approvals of projects it reaches,
/// notifications of projects it reaches (one tied to no project: full-scope devices
/// only), device events if it is full-scope, never document events.
struct EventFilter {
    device: RelayedDevice,
    store: DocumentStore,
    /// Per project: whether it is reachable, and when that was judged.
    seen: HashMap<DocId, (bool, Instant)>,
}

#[derive(Deserialize)]
struct EventKind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a str>,
    #[serde(borrow)]
    source: Option<&'a str>,
    /// A notification's project (an id: never escaped, but a `Cow` reads any string).
    #[serde(borrow)]
    project: Option<std::borrow::Cow<'a, str>>,
}

impl EventFilter {
    fn new(device: RelayedDevice, store: DocumentStore) -> Self {
        Self {
            device,
            store,
            seen: HashMap::new(),
        }
    }

    async fn admits(&mut self, ev: &Event) -> bool {
        if let Some(chat) = &ev.chat {
            return self.reaches(chat.project).await;
        }
        let kind: EventKind<'_> = match serde_json::from_str(&ev.json) {
            Ok(k) => k,
            Err(_) => return false,
        };
        match (kind.kind, kind.source) {
            // The node has its own replica's document events.
            (Some("document"), _) | (Some("lost"), Some("documents")) => false,
            (Some("notification"), _) => match kind.project.as_deref().map(str::parse::<DocId>) {
                Some(Ok(project)) => self.reaches(project).await,
                Some(Err(_)) => false,
                None => self.device.scope.is_none(),
            },
            // Device events, and anything else tied to no conversation: full-scope
            // devices only.
            _ => self.device.scope.is_none(),
        }
    }

    async fn reaches(&mut self, project: DocId) -> bool {
        let Some(root) = self.device.scope else {
            return true;
        };
        if let Some((ok, at)) = self.seen.get(&project) {
            if *ok || at.elapsed() < REACH_TTL {
                return *ok;
            }
        }
        let store = self.store.clone();
        let ok = match tokio::task::spawn_blocking(move || store.scope_blocking(root)).await {
            Ok(Ok(scope)) => scope.contains_project(&project),
            _ => false,
        };
        self.seen.insert(project, (ok, Instant::now()));
        ok
    }
}

impl ProtocolHandler for RpcService {
    async fn accept(&self, conn: Connection) -> Result<(), AcceptError> {
        let peer = conn.remote_id();
        let registry = self.registry.clone();
        let grant = match tokio::task::spawn_blocking(move || registry.grant(&peer)).await {
            Ok(Ok(Some(g))) => g,
            Ok(Ok(None)) => {
                tracing::warn!(%peer, "refused rpc from a key that is not a paired device");
                conn.close(CLOSE_NOT_ALLOWED.into(), NOT_PAIRED_REASON);
                return Ok(());
            }
            _ => {
                tracing::error!(%peer, "cannot read the device's grant; closing");
                conn.close(
                    CLOSE_NOT_ALLOWED.into(),
                    b"the hub cannot check this device right now",
                );
                return Ok(());
            }
        };
        // Tracked with the grant it opened under: a change of scope or admin flag, or a
        // revocation, closes it (and every stream on it) at once.
        self.tracker.add_rpc(&conn, &grant);
        tracing::info!(%peer, scope = ?grant.scope, admin = grant.admin, "rpc connection opened");
        let mut stop = self.stop.subscribe();
        let slots = Arc::new(Semaphore::new(MAX_STREAMS));
        let mut streams = JoinSet::new();
        loop {
            let slot = tokio::select! {
                s = slots.clone().acquire_owned() => s,
                _ = stop.wait_for(|s| *s) => break,
            };
            let Ok(slot) = slot else { break };
            let (send, recv) = tokio::select! {
                s = conn.accept_bi() => match s {
                    Ok(s) => s,
                    Err(_) => break,
                },
                _ = stop.wait_for(|s| *s) => break,
            };
            let relay = self.relay.get().cloned();
            streams.spawn(async move {
                serve_stream(relay, peer, send, recv).await;
                drop(slot);
            });
            while streams.try_join_next().is_some() {}
        }
        self.tracker.remove(&conn);
        // Streams end with their connection; abort any still writing.
        streams.shutdown().await;
        conn.close(0u32.into(), b"bye");
        tracing::info!(%peer, "rpc connection closed");
        Ok(())
    }

    async fn shutdown(&self) {
        let _ = self.stop.send(true);
    }
}

/// Reads one request from the stream, answers it, finishes the stream.
async fn serve_stream(
    relay: Option<Relay>,
    peer: EndpointId,
    mut send: SendStream,
    mut recv: RecvStream,
) {
    let mut buf = Vec::new();
    let read = tokio::time::timeout(
        REQUEST_TIMEOUT,
        hearth_sync::read_frame::<RpcRequest, _>(&mut recv, &mut buf, RPC_MAX_FRAME),
    )
    .await;
    let resp = match read {
        Ok(Ok(Some(req))) => match relay {
            Some(relay) => relay.answer(peer, req).await,
            None => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "hub_starting",
                "the hub is starting; try again in a moment",
            )
            .into_response(),
        },
        // The node opened a stream and closed it unused.
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "bad rpc request frame");
            ApiError::bad_request(format!("bad request frame: {e}")).into_response()
        }
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            "the request did not arrive in time",
        )
        .into_response(),
    };
    if let Err(why) = write_response(&mut send, resp).await {
        tracing::debug!(%peer, %why, "relayed answer broke off");
        let _ = send.reset(RESET_BROKEN.into());
        return;
    }
    let _ = send.finish();
}

/// Writes the head, then the body as it is produced, in chunks of at most
/// `RPC_MAX_CHUNK`. Stops when the node stops the stream or the connection closes
/// (even while the body waits for its next bytes), or when a write takes longer than
/// [`WRITE_TIMEOUT`].
async fn write_response(send: &mut SendStream, resp: Response) -> Result<(), String> {
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let stopped = send.stopped();
    tokio::pin!(stopped);
    write_frame(
        send,
        &RpcResponse::Head {
            status,
            content_type,
        },
    )
    .await?;
    let mut body = resp.into_body().into_data_stream();
    loop {
        let next = tokio::select! {
            n = body.next() => n,
            _ = &mut stopped => return Err("the node stopped reading".into()),
        };
        let bytes = match next {
            None => return Ok(()),
            Some(Ok(b)) => b,
            Some(Err(e)) => return Err(format!("the answer's body failed: {e}")),
        };
        for piece in bytes.chunks(RPC_MAX_CHUNK) {
            write_frame(send, &RpcResponse::Chunk(piece.to_vec())).await?;
        }
    }
}

async fn write_frame(send: &mut SendStream, frame: &RpcResponse) -> Result<(), String> {
    let bytes = encode_response(frame).map_err(|e| e.to_string())?;
    match tokio::time::timeout(WRITE_TIMEOUT, send.write_all(&bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the node did not take the answer in time".into()),
    }
}
