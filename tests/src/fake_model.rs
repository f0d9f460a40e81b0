//! `hearth-testbin fake-model --bind <ip:port> --text <reply>`: a model provider for tests
//! that run the hub in a network namespace, where an in-process fake cannot be reached.
//!
//! Serves `POST /v1/messages` (point the hub at it with `HEARTH_ANTHROPIC_URL`) and
//! answers every request with `<reply>` as an Anthropic streaming answer, byte for byte
//! the provider's SSE format ([`crate::agent_bench::anthropic_text_turn`]). Prints
//! `fake-model ready url=http://…` once it listens and stops on SIGTERM or Ctrl-C. Binds
//! only the address it is given; never reaches anything itself. [`serve_scripted`] is
//! the in-process form, playing back a script of answers (tool calls included).

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

/// The replies a scripted fake model still has to give, in order.
pub type Script = Arc<Mutex<Vec<String>>>;

/// A fake model in this process on 127.0.0.1, answering each turn with the next SSE
/// stream of `script` (an empty answer once it runs out); tests may append to the script
/// while it runs. Returns its address for `HEARTH_ANTHROPIC_URL`.
pub async fn serve_scripted(script: Script) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route(
        "/v1/messages",
        post(move || {
            let next = script
                .lock()
                .ok()
                .and_then(|mut r| (!r.is_empty()).then(|| r.remove(0)))
                .unwrap_or_default();
            async move { sse(next) }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}
