//! `hearth-hub chat`: a terminal client of the running hub's agent.
//!
//! A binary edge (anyhow allowed). Talks to the hub's HTTP API on loopback through
//! [`HubClient`] (address in `$HEARTH_HOME/hub.http`, the owner token as the credential),
//! prints streamed text and tool activity as it happens, and answers approval requests
//! inline. Never prints secrets: it only relays what the hub's redacted events contain.

use std::{
    io::{BufRead, Write},
    path::Path,
};

use serde_json::{json, Value};

use crate::{agent::sse::SseDecoder, hub_client::HubClient};

/// Runs the chat: one message, or a conversation read from standard input.
pub async fn run(
    home: &Path,
    project: &str,
    channel: &str,
    message: Option<String>,
    yes: bool,
) -> anyhow::Result<()> {
    let client = HubClient::connect(home)?;
    match message {
        Some(m) => turn(&client, project, channel, &m, yes).await,
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
                turn(&client, project, channel, line.trim(), yes).await?;
            }
        }
    }
}

async fn turn(
    client: &HubClient,
    project: &str,
    channel: &str,
    message: &str,
    yes: bool,
) -> anyhow::Result<()> {
    let mut resp = client
        .post(
            "/chat",
            &json!({ "message": message, "project": project, "conversation": channel }),
        )
        .await?;
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
                    let id = v["id"].as_str().unwrap_or_default().to_string();
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
                    let decided = client
                        .post(
                            &format!("/approvals/{id}"),
                            &json!({ "approve": approve, "project": v["project"],
                                     "conversation": v["conversation"] }),
                        )
                        .await;
                    if let Err(e) = decided {
                        // Another screen may have answered first.
                        println!("[{e:#}]");
                    }
                }
                Some("error") => {
                    println!("\n[error: {}]", v["message"].as_str().unwrap_or_default());
                    return Ok(());
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
