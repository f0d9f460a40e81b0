//! Notifications end to end against a real hub and a paired laptop, each made the hub's
//! own way: a turn in a scheduled run's conversation (`schedule-daily-<n>`) whose fake
//! model asks for `notes_create`, which the owner set to ask first, so the approval
//! waits and the hub notifies it.
//!
//! - `notifications_arrive_are_listed_decided_and_kept_quiet_in_the_browser`: the
//!   journey `tests/browser/notifications.mjs` (toast and bell, the list, approve and
//!   deny from it, the laptop told through its relay and deciding too, quiet hours set
//!   on the settings page silencing the next one); afterwards the hub's API and notes
//!   agree with what the pages did.
//! - `a_laptops_event_socket_carries_the_hubs_notifications`: the laptop's own
//!   `GET /events` WebSocket (its UI's source) carries the hub's `notification` event,
//!   and its relayed `GET /notifications` lists it.

use std::{
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::Duration,
};

use anyhow::Context;
use futures_util::StreamExt;
use hearth_tests::{
    agent_bench::anthropic_tool_turn,
    browser::{Journey, UiLab},
    fake_model::{serve_scripted, Answer, Script},
    http_request,
};
use serde_json::{json, Value};
use tokio_tungstenite::{
    client_async,
    tungstenite::{client::IntoClientRequest, http::HeaderValue, Message},
};

use crate::{bins, tempdir};

fn ok_json(what: &str, (status, body): (u16, String)) -> anyhow::Result<Value> {
    anyhow::ensure!((200..300).contains(&status), "{what}: {status} {body}");
    Ok(serde_json::from_str(&body)?)
}

/// A lab whose hub talks to a scripted fake model and makes `notes_create` ask first.
fn lab_with_model(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
) -> anyhow::Result<(UiLab, Script)> {
    let script = Script::default();
    let model = rt.block_on(serve_scripted(script.clone()))?;
    let url = format!("http://{model}");
    let lab = UiLab::start(&bins(), dir, &[("HEARTH_ANTHROPIC_URL", &url)])?;
    ok_json(
        "provider key",
        lab.hub_api(
            "PUT",
            "/api/v1/settings/providers/anthropic",
            Some(&json!({"key": "sk-test-notify"}).to_string()),
        )?,
    )?;
    let projects = ok_json(
        "projects",
        lab.hub_api("GET", "/api/v1/projects?limit=200", None)?,
    )?;
    let general = hearth_tests::project_id(&projects, "general")?;
    ok_json(
        "notes_create asks first",
        lab.hub_api(
            "PUT",
            &format!("/api/v1/projects/{general}/tools/notes_create"),
            Some(&json!({"allowed": true, "ask": true}).to_string()),
        )?,
    )?;
    Ok((lab, script))
}

/// Turns started in scheduled runs' conversations; each waits for its approval.
struct Asker {
    hub: std::net::SocketAddr,
    token: String,
    script: Script,
    turns: Vec<JoinHandle<anyhow::Result<()>>>,
    /// How many turns were started.
    asked: usize,
}

impl Asker {
    /// Waits for the turns under way (the journey decides each one before it asks
    /// again: a turn's last model call must not take the next turn's script).
    fn settle(&mut self) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        for turn in self.turns.drain(..) {
            while !turn.is_finished() {
                anyhow::ensure!(
                    std::time::Instant::now() < deadline,
                    "a turn still waits: the journey asked before deciding it"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            turn.join()
                .map_err(|_| anyhow::anyhow!("a turn's thread panicked"))??;
        }
        Ok(())
    }

    /// Starts a turn in `schedule-daily-<n>` whose model wants a note titled `title`.
    fn ask(&mut self, title: &str) -> anyhow::Result<Value> {
        self.settle()?;
        self.asked += 1;
        let n = self.asked;
        if let Ok(mut s) = self.script.lock() {
            s.extend([
                Answer::from(anthropic_tool_turn(
                    &format!("toolu_{n}"),
                    "notes_create",
                    &json!({"title": title, "content": "- made by a scheduled run"}),
                )),
                Answer::words("Done.", Duration::ZERO),
            ]);
        }
        let body = json!({
            "message": "Do the morning chores",
            "conversation": format!("schedule-daily-{n}"),
        })
        .to_string();
        let (hub, token) = (self.hub, self.token.clone());
        self.turns.push(std::thread::spawn(move || {
            let (status, text) =
                http_request(hub, Some(&token), "POST", "/api/v1/chat", Some(&body))?;
            anyhow::ensure!(status == 200, "the turn: {status} {text}");
            Ok(())
        }));
        Ok(Value::Null)
    }
}

/// The body of a chunked HTTP/1.1 answer (a relayed answer streams back in chunks).
fn dechunk(raw: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = raw;
    loop {
        let (size, after) = rest.split_once("\r\n").context("a chunk size")?;
        let size = usize::from_str_radix(size.trim(), 16).context("a hex chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(after.get(..size).context("a whole chunk")?);
        rest = after
            .get(size..)
            .and_then(|r| r.strip_prefix("\r\n"))
            .context("the chunk's end")?;
    }
}

/// The titles of the hub's notes.
fn note_titles(lab: &UiLab) -> anyhow::Result<Vec<String>> {
    let notes = ok_json(
        "notes",
        lab.hub_api("GET", "/api/v1/notes?limit=200", None)?,
    )?;
    Ok(notes["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n["title"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

#[test]
fn notifications_arrive_are_listed_decided_and_kept_quiet_in_the_browser() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let dir = tempdir();
    let (mut lab, script) = lab_with_model(&rt, dir.path())?;
    let asker = Arc::new(Mutex::new(Asker {
        hub: lab.hub_http,
        token: lab.hub_token()?,
        script: script.clone(),
        turns: Vec::new(),
        asked: 0,
    }));
    let config = lab.config()?;
    let journey_asker = asker.clone();
    Journey::new("notifications.mjs", config).run(|cmd, arg| match cmd {
        "ask" => Some(
            journey_asker
                .lock()
                .map_err(|_| anyhow::anyhow!("asker poisoned"))
                .and_then(|mut a| a.ask(arg.as_str().unwrap_or("Untitled"))),
        ),
        _ => lab.control(cmd),
    })?;
    asker
        .lock()
        .map_err(|_| anyhow::anyhow!("asker poisoned"))?
        .settle()?;

    let page = ok_json(
        "notifications",
        lab.hub_api("GET", "/api/v1/notifications?limit=50", None)?,
    )?;
    let rows = page["data"].as_array().context("data")?;
    let bodies: Vec<&str> = rows.iter().filter_map(|n| n["body"].as_str()).collect();
    anyhow::ensure!(rows.len() == 4, "four notifications: {page}");
    for (row, title, quiet) in [
        (0, "Quiet one", true),
        (1, "From the laptop", false),
        (2, "Lemons", false),
        (3, "Groceries", false),
    ] {
        anyhow::ensure!(
            bodies[row].contains(title) && rows[row]["quiet"] == quiet,
            "notification {row} is {title:?}, quiet {quiet}: {}",
            rows[row]
        );
        anyhow::ensure!(
            rows[row]["kind"] == "approval_waiting" && rows[row]["read_at"].is_i64(),
            "read: {}",
            rows[row]
        );
    }
    anyhow::ensure!(page["unread"] == 0, "nothing unread: {page}");
    let titles = note_titles(&lab)?;
    for made in ["Groceries", "From the laptop", "Quiet one"] {
        anyhow::ensure!(
            titles.iter().any(|t| t == made),
            "{made} was approved: {titles:?}"
        );
    }
    anyhow::ensure!(
        !titles.iter().any(|t| t == "Lemons"),
        "Lemons was denied: {titles:?}"
    );
    lab.stop_node();
    Ok(())
}

#[test]
fn a_laptops_event_socket_carries_the_hubs_notifications() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let dir = tempdir();
    let (lab, script) = lab_with_model(&rt, dir.path())?;
    let node_token = lab.node.owner_token()?;
    let node_http = lab.node_http;
    let mut socket = rt.block_on(async {
        let mut req = format!("ws://{node_http}/api/v1/events").into_client_request()?;
        req.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {node_token}"))?,
        );
        let tcp = tokio::net::TcpStream::connect(node_http).await?;
        anyhow::Ok(client_async(req, tcp).await?.0)
    })?;
    // The laptop's link to the hub is up before the hub notifies.
    hearth_tests::eventually(Duration::from_secs(30), || {
        let (status, _) = lab.node_api("GET", "/api/v1/notifications", None)?;
        Ok(status == 200)
    })?;
    let mut asker = Asker {
        hub: lab.hub_http,
        token: lab.hub_token()?,
        script,
        turns: Vec::new(),
        asked: 0,
    };
    asker.ask("Seen from the laptop")?;
    let event = rt.block_on(async {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), socket.next())
                .await
                .context("a notification within 30 s")?
                .context("the socket closed")??;
            if let Message::Text(t) = msg {
                let v: Value = serde_json::from_str(&t)?;
                if v["type"] == "notification" {
                    return anyhow::Ok(v);
                }
            }
        }
    })?;
    anyhow::ensure!(
        event["kind"] == "approval_waiting"
            && event["title"] == "Approval needed: notes_create"
            && event["body"]
                .as_str()
                .unwrap_or("")
                .contains("Seen from the laptop")
            && event["refs"]["conversation"] == "schedule-daily-1"
            && event["hub_seq"].is_u64(),
        "the hub's notification, renumbered by the laptop: {event}"
    );
    let (status, body) = lab.node_api("GET", "/api/v1/notifications", None)?;
    anyhow::ensure!(status == 200, "the laptop's relayed list: {status} {body}");
    let listed: Value = serde_json::from_str(&dechunk(&body)?)?;
    anyhow::ensure!(
        listed["unread"] == 1 && listed["data"][0]["id"] == event["id"],
        "listed through the relay: {listed}"
    );
    // Deny it so the turn ends.
    let approval = event["refs"]["approval"].as_str().context("approval id")?;
    let (status, body) = http_request(
        lab.node_http,
        Some(&lab.node.owner_token()?),
        "POST",
        &format!("/api/v1/approvals/{approval}"),
        Some(&json!({"approve": false}).to_string()),
    )?;
    anyhow::ensure!(status == 204, "denied from the laptop: {status} {body}");
    asker.settle()
}
