//! `GET /events`: a hub's or node's numbered event stream ([`super::EventRing`]) over a
//! WebSocket, the same on both.
//!
//! Every message from the server is one JSON object in a text frame:
//! - `{"seq", "type": "document", "id", "kind", "origin": "local"|"peer"|"external",
//!   "deleted"}` (never content);
//! - chat, each with `project` and `conversation`: `started` (`message`), `text`
//!   (`text`), `restart`, `tool_call` (`name`, `args`), `tool_result` (`name`, `output`,
//!   `is_error`), `approval_requested` (`id`, `name`, `args`), `approval_resolved` (`id`,
//!   `resolution`), `finished` (`reason`), `error` (`message`); all redacted (the hub's
//!   own, and on a node those it relays from its hub);
//! - `{"seq", "type": "device", "event": "paired"|"revoked"|"online"|"offline"|
//!   "pair_requested", "id", "name"}` (the hub's);
//! - `{"seq", "type": "lost", "source", "count"}`: the server itself missed events of a
//!   source (reload that source's state);
//! - `{"type": "resync", "after"}` (not numbered): the events the client asked for are
//!   gone; reload state, and the stream goes on after `after`.
//!
//! Resuming: connect with `?after=<the last seq you saw>` and the stream starts right
//! after it (from the ring of the last 10,000 events), then goes on live: no gap, no
//! duplicate. Without `after` it starts live.
//!
//! A client that falls more than 1,024 events behind, or does not take a message within
//! 10 s, is closed (code 4008, the reason names the `after` to reconnect with): it never
//! holds up the server. At shutdown every socket is closed with 1001. Messages from the
//! client are ignored (pings are answered).

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{
        ws::{rejection::WebSocketUpgradeRejection, CloseFrame, Message, WebSocket},
        State, WebSocketUpgrade,
    },
    http::StatusCode,
    response::Response,
};
use serde::Deserialize;
use serde_json::json;

use super::{EventRing, Next};
use crate::{access::Server, ApiError, ApiQuery, ApiResult, ApiRoutes, Verb};

/// How long one message may take to reach a client before it is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Close code for a client that fell behind (application range).
const CLOSE_TOO_SLOW: u16 = 4008;
/// Close code at shutdown ("going away").
const CLOSE_AWAY: u16 = 1001;

/// `GET /events` over `ring`, for `server`; merge it into routes of any state.
pub fn routes<S: Clone + Send + Sync + 'static>(
    ring: Arc<EventRing>,
    server: Server,
) -> ApiRoutes<S> {
    ApiRoutes::new("events")
        .route(
            Verb::Get,
            "/events",
            "The numbered event stream (WebSocket upgrade)",
            events,
        )
        .query(&["after"])
        .with_state((ring, server))
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    /// Resume after this event number.
    after: Option<u64>,
}

async fn events(
    State((ring, server)): State<(Arc<EventRing>, Server)>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let ws = ws.map_err(|e| {
        ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "websocket_required",
            format!("this route is a WebSocket: {e}"),
        )
    })?;
    Ok(ws
        .max_message_size(64 * 1024)
        .on_upgrade(move |socket| serve(socket, ring, server, q.after)))
}

async fn serve(mut socket: WebSocket, ring: Arc<EventRing>, server: Server, after: Option<u64>) {
    let mut sub = ring.subscribe(after);
    drop(ring);
    loop {
        let next = tokio::select! {
            n = sub.next() => n,
            msg = socket.recv() => match msg {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => continue,
            },
        };
        let out = match next {
            Next::Event(ev) => Message::text(ev.json.as_ref()),
            Next::Resync { after } => {
                Message::text(json!({ "type": "resync", "after": after }).to_string())
            }
            Next::Lagged { last } => {
                tracing::info!(last, "an event client fell behind; closing it");
                let reason = format!("too slow: reconnect with after={last}");
                close(socket, CLOSE_TOO_SLOW, &reason).await;
                return;
            }
            Next::Closed => {
                let reason = format!("the {} is shutting down", server.noun());
                close(socket, CLOSE_AWAY, &reason).await;
                return;
            }
        };
        match tokio::time::timeout(SEND_TIMEOUT, socket.send(out)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                tracing::info!(
                    last = sub.last(),
                    "an event client stopped reading; dropping it"
                );
                return;
            }
        }
    }
}

async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let frame = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(frame)).await;
}
