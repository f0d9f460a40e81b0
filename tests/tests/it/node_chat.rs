//! `hearth chat` end to end with separate processes on 127.0.0.1: a hub with a fake
//! provider (a real Anthropic SSE stream from this test), a node running `hearth run`,
//! and the terminal chat talking to the hub's agent through the node's API and
//! `hearth/rpc/1`. A risky tool call is denied by `--no`, then approved on "standard
//! input" in an interactive chat; the replies are printed as they stream. With the hub
//! stopped the chat fails at once with one line saying so; with `hearth run` stopped (or
//! dead, its address left behind) it says to start it.

use std::{
    net::SocketAddr,
    process::{Output, Stdio},
    time::{Duration, Instant},
};

use hearth_tests::{
    agent_bench::{anthropic_text_turn, anthropic_tool_turn},
    allow, eventually, fake_model, http_request, hub_cli, set_provider_key, HubProc, NodeHome,
    Proc,
};
use serde_json::{json, Value};

use crate::{bins, sub, tempdir};

const WAIT: Duration = Duration::from_secs(30);

/// Runs `hearth chat <args>` on `node` with `stdin` as its input; its output, or an
/// error if it took longer than [`WAIT`].
async fn chat(node: &NodeHome, args: &[&str], stdin: &str) -> anyhow::Result<Output> {
    let mut cmd = bins().node(&node.home);
    cmd.arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let mut child = cmd.spawn()?;
    if let Some(mut input) = child.stdin.take() {
        tokio::io::AsyncWriteExt::write_all(&mut input, stdin.as_bytes()).await?;
    }
    Ok(tokio::time::timeout(WAIT, child.wait_with_output()).await??)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hearth_chat_streams_the_hubs_reply_answers_approvals_and_says_when_the_hub_is_away(
) -> anyhow::Result<()> {
    let replies = fake_model::Script::default();
    let model_addr = fake_model::serve_scripted(replies.clone()).await?;

    let bins = bins();
    let dir = tempdir();
    let hub_home = sub(&dir, "hub");
    set_provider_key(&bins, &hub_home, "anthropic", "sk-test-chat")?;
    let node = NodeHome::new(&bins, sub(&dir, "laptop"))?;
    let hub_id = hub_cli(&bins, &hub_home, &["id"])?.trim().to_string();
    allow(&bins, &hub_home, &node.id)?;

    let mut hub = {
        let (b, h, url) = (
            bins.clone(),
            hub_home.clone(),
            format!("http://{model_addr}"),
        );
        tokio::task::spawn_blocking(move || {
            HubProc::start_with_env(&b, &h, 0, &[("HEARTH_ANTHROPIC_URL", &url)])
        })
        .await??
    };
    let mut laptop: Proc = {
        let (b, home, id, addr) = (bins.clone(), node.home.clone(), hub_id.clone(), hub.addr);
        tokio::task::spawn_blocking(move || NodeHome::new(&b, home)?.start(&id, addr)).await??
    };
    let node_http: SocketAddr = node.http_addr()?;
    let node_token = node.owner_token()?;
    let relayed_status = move || -> anyhow::Result<u16> {
        Ok(http_request(
            node_http,
            Some(&node_token),
            "GET",
            "/api/v1/approvals",
            None,
        )?
        .0)
    };
    {
        let probe = relayed_status.clone();
        tokio::task::spawn_blocking(move || eventually(WAIT, || Ok(probe()? == 200))).await??;
    }

    // The owner lets the agent delete notes in `general` (a risky tool: it asks first).
    let (code, projects) = hub.api("GET", "/api/v1/projects?limit=200", None)?;
    assert_eq!(code, 200, "{projects}");
    let projects: Value = serde_json::from_str(&projects)?;
    let general = hearth_tests::project_id(&projects, "general")?;
    let (code, body) = hub.api(
        "PUT",
        &format!("/api/v1/projects/{general}/tools/notes_delete"),
        Some(&json!({"allowed": true}).to_string()),
    )?;
    assert_eq!(code, 200, "{body}");
    let (code, body) = hub.api(
        "POST",
        "/api/v1/notes",
        Some(&json!({"title": "Old plan", "content": "drop me", "project": general}).to_string()),
    )?;
    assert_eq!(code, 201, "{body}");
    let old_id = serde_json::from_str::<Value>(&body)?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let delete_old = || anthropic_tool_turn("toolu_1", "notes_delete", &json!({"id": old_id}));

    // One turn with `--message`: the tool call is denied by `--no`, the reply streams.
    if let Ok(mut r) = replies.lock() {
        r.extend([
            delete_old().into(),
            anthropic_text_turn("Kept the old plan.").into(),
        ]);
    }
    let out = chat(
        &node,
        &[
            "--message",
            "drop the old plan",
            "--project",
            "general",
            "--no",
        ],
        "",
    )
    .await?;
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said} {}", text(&out.stderr));
    for want in [
        format!("⚙ notes_delete {}", json!({"id": old_id})),
        format!(
            "approve notes_delete {}? [y/N] no (--no)",
            json!({"id": old_id})
        ),
        "✗ the owner denied this tool call".into(),
        "Kept the old plan.".into(),
    ] {
        assert!(said.contains(&want), "no {want:?} in {said:?}");
    }
    let (code, _) = hub.api("GET", &format!("/api/v1/notes/{old_id}"), None)?;
    assert_eq!(code, 200, "the denied delete did not run");

    // Interactive: a message per input line; the approval is answered on the same input.
    if let Ok(mut r) = replies.lock() {
        r.extend([
            delete_old().into(),
            anthropic_text_turn("Dropped the old plan.").into(),
        ]);
    }
    let out = chat(&node, &[], "drop the old plan\ny\n").await?;
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said} {}", text(&out.stderr));
    for want in [
        "you> ",
        &format!("approve notes_delete {}? [y/N] ", json!({"id": old_id})),
        "✓ ",
        "Dropped the old plan.",
    ] {
        assert!(said.contains(want), "no {want:?} in {said:?}");
    }
    let (code, _) = hub.api("GET", &format!("/api/v1/notes/{old_id}"), None)?;
    assert_ne!(code, 200, "the approved delete ran");
    // Both turns went to the terminal's own conversation.
    let (code, body) = hub.api(
        "GET",
        &format!("/api/v1/projects/{general}/conversations"),
        None,
    )?;
    assert_eq!(code, 200, "{body}");
    let page: Value = serde_json::from_str(&body)?;
    let terminal = page["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "terminal")
        .cloned()
        .unwrap_or_default();
    assert!(terminal["messages"].as_u64() >= Some(2), "{page}");

    // The hub stops: once the node has noticed, the chat says so at once and fails.
    hub.proc.terminate();
    {
        let probe = relayed_status.clone();
        tokio::task::spawn_blocking(move || eventually(WAIT, || Ok(probe()? == 503))).await??;
    }
    let asked = Instant::now();
    let out = chat(&node, &["--message", "are you there?"], "").await?;
    let took = asked.elapsed();
    eprintln!("node chat test: the out-of-reach answer came in {took:?}");
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        err.contains("the hub is out of reach: ")
            && err.contains("; notes and tasks still work offline"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");

    // No `hearth run` answers: the chat says to start it.
    laptop.terminate();
    let out = chat(&node, &["--message", "hello?"], "").await?;
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("start `hearth run`"), "{err}");
    // A `hearth run` that died without tidying up left its address behind.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    std::fs::write(node.home.join("node.http"), dead.to_string())?;
    let out = chat(&node, &["--message", "hello?"], "").await?;
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!(
            "no `hearth run` answers at {dead}: start `hearth run` first"
        )),
        "{err}"
    );
    Ok(())
}
