//! `hearth-testbin fake-model --bind <ip:port> --text <reply>`: a model provider for tests
//! that run the hub in a network namespace, where an in-process fake cannot be reached.
//!
//! Serves `POST /v1/messages` (point the hub at it with `HEARTH_ANTHROPIC_URL`) and
//! answers every request with `<reply>` as an Anthropic streaming answer, byte for byte
//! the provider's SSE format ([`crate::agent_bench::anthropic_text_turn`]). Prints
//! `fake-model ready url=http://…` once it listens and stops on SIGTERM or Ctrl-C. Binds
//! only the address it is given; never reaches anything itself. [`serve_scripted`] is
//! the in-process form, playing back a script of answers (tool calls included), each
//! whole or paced event by event ([`Answer::words`]) so a test can watch it stream.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use anyhow::{bail, Context};
use axum::{body::Body, response::Response, routing::post, Router};

use crate::agent_bench::anthropic_text_turn;

/// Runs the fake model with `args` (`--bind <ip:port> --text <reply>`, in any order)
/// until the process is asked to stop.
pub fn main_with_args(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    const USAGE: &str = "usage: hearth-testbin fake-model --bind <ip:port> --text <reply>";
    let (mut bind, mut text) = (None, None);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest
            .next()
            .and_then(|v| v.to_str())
            .context(USAGE)?
            .to_string();
        match flag.to_str() {
            Some("--bind") => {
                bind = Some(
                    value
                        .parse::<SocketAddr>()
                        .context("--bind takes ip:port")?,
                )
            }
            Some("--text") => text = Some(value),
            _ => bail!(USAGE),
        }
    }
    let (Some(bind), Some(text)) = (bind, text) else {
        bail!(USAGE)
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .with_context(|| format!("listening on {bind}"))?;
        let app = text_app(&text);
        println!("fake-model ready url=http://{}", listener.local_addr()?);
        axum::serve(listener, app)
            .with_graceful_shutdown(hearth_net::shutdown_signal())
            .await
            .context("serving the fake model")
    })
}

fn sse(body: String) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap_or_default()
}

/// The fake model's routes, answering every turn with `text`.
pub fn text_app(text: &str) -> Router {
    let answer = anthropic_text_turn(text);
    Router::new().route(
        "/v1/messages",
        post(move || {
            let answer = answer.clone();
            async move { sse(answer) }
        }),
    )
}

/// One scripted answer: its SSE events, each sent after `pause` (so a test can watch
/// an answer grow).
pub struct Answer {
    /// The SSE text of each event (or of a whole answer, as one piece).
    pub events: Vec<String>,
    /// The pause before each event.
    pub pause: std::time::Duration,
}

impl From<String> for Answer {
    /// A whole SSE answer, sent at once.
    fn from(sse: String) -> Self {
        Self {
            events: vec![sse],
            pause: std::time::Duration::ZERO,
        }
    }
}

impl Answer {
    /// A text answer streamed one word per event, `pause` before each.
    pub fn words(text: &str, pause: std::time::Duration) -> Self {
        use serde_json::json;
        let mut events = vec![
            json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ];
        events.extend(text.split_inclusive(' ').map(|word| {
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":word}})
        }));
        events.extend([
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}),
            json!({"type":"message_stop"}),
        ]);
        Self {
            events: events
                .iter()
                .map(|e| crate::agent_bench::anthropic_sse(std::slice::from_ref(e)))
                .collect(),
            pause,
        }
    }
}

/// The answers a scripted fake model still has to give, in order.
pub type Script = Arc<Mutex<Vec<Answer>>>;

/// A fake model in this process on 127.0.0.1, answering each turn with the next answer
/// of `script` (an empty answer once it runs out); tests may append to the script while
/// it runs. Returns its address for `HEARTH_ANTHROPIC_URL`.
pub async fn serve_scripted(script: Script) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route(
        "/v1/messages",
        post(move || {
            let next = script
                .lock()
                .ok()
                .and_then(|mut r| (!r.is_empty()).then(|| r.remove(0)));
            async move {
                let Answer { events, pause } = next.unwrap_or(Answer {
                    events: Vec::new(),
                    pause: std::time::Duration::ZERO,
                });
                let body =
                    futures_util::stream::unfold(events.into_iter(), move |mut rest| async move {
                        let event = rest.next()?;
                        tokio::time::sleep(pause).await;
                        Some((Ok::<_, std::convert::Infallible>(event), rest))
                    });
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(body))
                    .unwrap_or_default()
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}
