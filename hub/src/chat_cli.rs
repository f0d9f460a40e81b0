//! `hearth-hub chat`: a terminal client of the running hub's agent.
//!
//! A binary edge (anyhow allowed). Talks to the hub's HTTP API on loopback (address in
//! `$HEARTH_HOME/hub.http`), prints streamed text and tool activity as it happens, and
//! answers approval requests inline. Never prints secrets: it only relays what the
//! hub's redacted events contain.

use std::{
    io::{BufRead, Write},
    path::Path,
};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::agent::sse::SseDecoder;

fn http_client() -> anyhow::Result<reqwest::Client> {
    // reqwest is built without a crypto provider of its own; use ring, as iroh does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder().build()?)
}

/// Runs the chat: one message, or a conversation read from standard input.
pub async fn run(
    home: &Path,
    project: &str,
    channel: &str,
    message: Option<String>,
    yes: bool,
) -> anyhow::Result<()> {
    let addr = std::fs::read_to_string(home.join("hub.http"))
        .context("the hub is not running here (no hub.http): start `hearth-hub` first")?;
    let base = format!("http://{}", addr.trim());
    let client = http_client()?;
    match message {
        Some(m) => turn(&client, &base, project, channel, &m, yes).await,
        None => {
            let stdin = std::io::stdin();
            loop {
                print!("you> ");
                std::io::stdout().flush()?;
                let mut line = String::new();
                if stdin.lock().read_line(&mut line)? == 0 {
                    return Ok(());
                }
                if line.trim().is_empty() {
                    continue;
                }
                turn(&client, &base, project, channel, line.trim(), yes).await?;
            }
        }
    }
}

async fn turn(
    client: &reqwest::Client,
    base: &str,
    project: &str,
    channel: &str,
    message: &str,
    yes: bool,
) -> anyhow::Result<()> {
    let mut resp = client
        .post(format!("{base}/api/v1/chat"))
        .header("content-type", "application/json")
        .body(json!({ "message": message, "project": project, "channel": channel }).to_string())
        .send()
        .await
        .context("cannot reach the hub")?;
    if !resp.status().is_success() {
        let status = resp.status();
        bail!(
            "the hub said {status}: {}",
            resp.text().await.unwrap_or_default()
        );
    }
    let mut decoder = SseDecoder::default();
    let mut out = std::io::stdout();
    while let Some(chunk) = resp.chunk().await? {
        for ev in decoder.feed(&chunk)? {
            let v: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
            match v["type"].as_str() {
                Some("text") => {
                    print!("{}", v["text"].as_str().unwrap_or_default());
                    out.flush()?;
                }
                Some("restart") => println!("\n[the model was interrupted; retrying]"),
                Some("tool_call") => {
                    println!("\n⚙ {} {}", v["name"].as_str().unwrap_or("?"), v["args"])
                }
                Some("tool_result") => {
                    let mark = if v["is_error"] == true { "✗" } else { "✓" };
                    let text = v["output"].as_str().unwrap_or_default();
                    let short: String = text.chars().take(200).collect();
                    println!("{mark} {short}");
                }
                Some("approval_requested") => {
                    let id = v["id"].as_u64().unwrap_or(0);
                    let approve = if yes {
                        true
                    } else {
                        print!(
                            "\nAllow {} {}? [y/N] ",
                            v["name"].as_str().unwrap_or("?"),
                            v["args"]
                        );
                        out.flush()?;
                        let answer = tokio::task::spawn_blocking(|| {
                            let mut l = String::new();
                            std::io::stdin().lock().read_line(&mut l).map(|_| l)
                        })
                        .await??;
                        matches!(answer.trim(), "y" | "Y" | "yes")
                    };
                    client
                        .post(format!("{base}/api/v1/approvals/{id}"))
                        .header("content-type", "application/json")
                        .body(json!({ "approve": approve }).to_string())
                        .send()
                        .await?;
                }
                Some("finished") => {
                    let reason = v["reason"].as_str().unwrap_or_default();
                    if reason.starts_with("error") {
                        println!("\n[{reason}]");
                    } else {
                        println!();
                    }
                    return Ok(());
                }
                _ => {}
            }
        }
    }
    Ok(())
}
