//! A fake model server on 127.0.0.1 for the provider and agent tests: it answers each
//! request with the next scripted reply, streaming SSE bodies in 7-byte chunks, and
//! records every request.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};

use axum::{
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::Response,
    routing::post,
    Router,
};
use serde_json::json;

/// What the fake server answers, one entry per request, in order.
#[derive(Clone)]
pub enum Reply {
    Sse(String),
    /// These SSE bytes, then a body that never ends (a model still writing).
    Stalled(String),
    Status(u16, String),
}

#[derive(Clone, Default)]
pub struct Fake {
    pub replies: Arc<Mutex<Vec<Reply>>>,
    pub requests: Arc<Mutex<Vec<(HeaderMap, serde_json::Value)>>>,
}

async fn answer(State(f): State<Fake>, headers: HeaderMap, body: String) -> Response {
    let json: serde_json::Value = serde_json::from_str(&body).unwrap_or(json!(null));
    f.requests.lock().map(|mut r| r.push((headers, json))).ok();
    let reply = f
        .replies
        .lock()
        .ok()
        .and_then(|mut r| (!r.is_empty()).then(|| r.remove(0)));
    match reply {
        Some(Reply::Sse(text)) => {
            // Cut into 7-byte chunks so events and UTF-8 sequences straddle chunk borders.
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = text
                .into_bytes()
                .chunks(7)
                .map(|c| Ok(c.to_vec()))
                .collect();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(futures_util::stream::iter(chunks)))
                .unwrap_or_default()
        }
        Some(Reply::Stalled(text)) => {
            use futures_util::StreamExt;
            let head = futures_util::stream::iter([Ok::<_, std::io::Error>(text.into_bytes())]);
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(
                    head.chain(futures_util::stream::pending()),
                ))
                .unwrap_or_default()
        }
        Some(Reply::Status(code, body)) => Response::builder()
            .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap_or_default(),
        None => Response::builder()
            .status(500)
            .body(Body::from("no scripted reply"))
            .unwrap_or_default(),
    }
}

pub async fn serve(replies: Vec<Reply>) -> (String, Fake) {
    let fake = Fake {
        replies: Arc::new(Mutex::new(replies)),
        ..Fake::default()
    };
    let app = Router::new()
        .route("/v1/messages", post(answer))
        .route("/v1/chat/completions", post(answer))
        .route("/v1/embeddings", post(answer))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), fake)
}
