//! The hub's event WebSocket (`GET /api/v1/events`) against a real hub process on
//! 127.0.0.1, with a fake Anthropic server on 127.0.0.1 for the chat turn: refusals
//! without a credential and from a foreign Origin, a note created through the API
//! arriving as a document event, a chat turn's numbered events (the same numbers on the
//! socket and in `POST /chat`'s stream), resuming with `after` (no gap, no duplicate),
//! a resync for a gap the hub no longer holds, and the close at shutdown.

use std::{net::SocketAddr, time::Duration};

use axum::{body::Body, response::Response, routing::post, Router};
use futures_util::StreamExt;
use hearth_tests::{agent_bench::anthropic_text_turn, http_request, set_provider_key, HubProc};
use serde_json::Value;
use tokio_tungstenite::{
    client_async,
    tungstenite::{client::IntoClientRequest, http::HeaderValue, Error as WsError, Message},
    WebSocketStream,
};

use crate::{bins, sub, tempdir};

type Ws = WebSocketStream<tokio::net::TcpStream>;

const REPLY: &str = "Hello from the fake model.";

async fn connect(
    http: SocketAddr,
    token: Option<&str>,
    origin: Option<&str>,
    after: Option<u64>,
) -> Result<Ws, WsError> {
    let path = match after {
        Some(a) => format!("/api/v1/events?after={a}"),
        None => "/api/v1/events".into(),
    };
    let mut req = format!("ws://{http}{path}").into_client_request()?;
    let mut set = |name: &'static str, value: String| -> Result<(), WsError> {
        let v = HeaderValue::from_str(&value).map_err(|e| {
            WsError::HttpFormat(tokio_tungstenite::tungstenite::http::Error::from(e))
        })?;
        req.headers_mut().insert(name, v);
        Ok(())
    };
    if let Some(t) = token {
        set("authorization", format!("Bearer {t}"))?;
    }
    if let Some(o) = origin {
        set("origin", o.to_string())?;
    }
    let tcp = tokio::net::TcpStream::connect(http).await?;
    Ok(client_async(req, tcp).await?.0)
}

fn refused_with(r: Result<Ws, WsError>) -> u16 {
    match r {
        Err(WsError::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("the upgrade was accepted"),
    }
}

/// The next JSON message (pings and pongs skipped).
async fn next_json(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("an event within 20 s")
            .expect("the socket is open")
            .expect("a message");
        match msg {
            Message::Text(t) => return serde_json::from_str(&t).expect("json event"),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => continue,
        }
    }
}

/// Events up to and including the first that `last` matches.
async fn until(ws: &mut Ws, last: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let v = next_json(ws).await;
        let done = last(&v);
        out.push(v);
        if done {
            return out;
        }
    }
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().filter_map(|e| e["seq"].as_u64()).collect()
}

#[test]
fn the_event_socket_carries_numbered_documents_and_chat_and_resumes_without_gaps(
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let model_addr = listener.local_addr()?;
    let app = Router::new().route(
        "/v1/messages",
        post(|| async {
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(anthropic_text_turn(REPLY)))
                .unwrap_or_default()
        }),
    );
    rt.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let bins = bins();
    let dir = tempdir();
    let home = sub(&dir, "hub");
    set_provider_key(&bins, &home, "anthropic", "sk-events-test")?;
    let url = format!("http://{model_addr}");
    let mut hub = HubProc::start_with_env(&bins, &home, 0, &[("HEARTH_ANTHROPIC_URL", &url)])?;
    let http = hub.http.ok_or_else(|| anyhow::anyhow!("no HTTP"))?;
    let token = hub.owner_token()?;

    rt.block_on(async {
        // Refusals: no credential, a wrong one, a foreign Origin (with the right token).
        assert_eq!(refused_with(connect(http, None, None, None).await), 401);
        assert_eq!(
            refused_with(connect(http, Some("wrong"), None, None).await),
            401
        );
        assert_eq!(
            refused_with(connect(http, Some(&token), Some("http://evil.example"), None).await),
            403
        );
        let mut live = connect(http, Some(&token), None, None).await?;

        // A note created through the API (the store) arrives as a document event, with
        // no content in it.
        let t = token.clone();
        let (status, body) = tokio::task::spawn_blocking(move || {
            http_request(
                http,
                Some(&t),
                "POST",
                "/api/v1/notes",
                Some(r#"{"title":"Secret plans","content":"do not show"}"#),
            )
        })
        .await??;
        assert!(status == 200 || status == 201, "{status} {body}");
        let id = serde_json::from_str::<Value>(&body)?["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no id in {body}"))?;
        let docs = until(&mut live, |v| v["type"] == "document" && v["id"] == id).await;
        let doc = docs.last().cloned().unwrap_or_default();
        assert_eq!(doc["kind"], "note");
        assert_eq!(doc["origin"], "local");
        assert!(doc["seq"].as_u64().is_some(), "{doc}");
        assert!(!doc.to_string().contains("Secret plans"), "{doc}");

        // A chat turn: started, two text deltas, finished, numbered one after another;
        // `POST /chat`'s stream carries the same events with the same numbers.
        let t = token.clone();
        let (status, sse) = tokio::task::spawn_blocking(move || {
            http_request(
                http,
                Some(&t),
                "POST",
                "/api/v1/chat",
                Some(r#"{"message":"hello","conversation":"events-test"}"#),
            )
        })
        .await??;
        assert_eq!(status, 200, "{sse}");
        let chat = until(&mut live, |v| v["type"] == "finished").await;
        let chat: Vec<Value> = chat
            .into_iter()
            .filter(|v| v["conversation"] == "events-test")
            .collect();
        let kinds: Vec<&str> = chat.iter().filter_map(|v| v["type"].as_str()).collect();
        assert_eq!(kinds, ["started", "text", "text", "finished"], "{chat:?}");
        let text: String = chat.iter().filter_map(|v| v["text"].as_str()).collect();
        assert_eq!(text, REPLY);
        let numbers = seqs(&chat);
        assert!(
            numbers.windows(2).all(|w| w[1] == w[0] + 1),
            "consecutive: {numbers:?}"
        );
        let sse_numbers: Vec<u64> = sse
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| v["seq"].as_u64())
            .collect();
        assert_eq!(sse_numbers, numbers, "{sse}");

        // A tab that saw only `started` reconnects after it: the rest, once each.
        let mut resumed = connect(http, Some(&token), None, Some(numbers[0])).await?;
        let rest = until(&mut resumed, |v| v["type"] == "finished").await;
        assert_eq!(seqs(&rest), numbers[1..].to_vec());
        // From the beginning: every event the hub numbered, from 1, without a gap.
        let mut all = connect(http, Some(&token), None, Some(0)).await?;
        let everything = until(&mut all, |v| v["type"] == "finished").await;
        let every = seqs(&everything);
        assert_eq!(every.first(), Some(&1));
        assert!(every.windows(2).all(|w| w[1] == w[0] + 1), "{every:?}");
        assert!(everything.iter().any(|v| v["id"] == id));
        // A position the hub never reached (a client of an earlier run): resync.
        let mut stale = connect(http, Some(&token), None, Some(1_000_000)).await?;
        let first = next_json(&mut stale).await;
        assert_eq!(first["type"], "resync", "{first}");
        assert!(first.get("seq").is_none());
        anyhow::Ok(())
    })?;

    // Shutdown closes the sockets with "going away".
    let mut open = rt.block_on(connect(http, Some(&token), None, None))?;
    hub.proc.terminate();
    let close = rt.block_on(async {
        loop {
            match tokio::time::timeout(Duration::from_secs(15), open.next()).await {
                Ok(Some(Ok(Message::Close(c)))) => return c.map(|c| u16::from(c.code)),
                Ok(Some(Ok(_))) => continue,
                _ => return None,
            }
        }
    });
    assert_eq!(close, Some(1001));
    Ok(())
}
