//! The Telegram channel end to end: a hub process (real HTTP server, real SQLite) with
//! the fake model provider (Anthropic's SSE, streamed word by word) and the channel
//! pointed at the fake Bot API on 127.0.0.1. An allow-listed chat gets a streamed answer
//! (sent, edited as it grows, finished as HTML); approves a risky tool call with a
//! button (the note is gone); is told "still working" mid-turn; `/stop`, `/new` and
//! `/help` work; a chat not on the list gets nothing, and its button press decides
//! nothing. A token Telegram refuses is a clear API (and CLI) error; a 429 is waited
//! out; switching the channel off and on and taking a chat off the list work; the token
//! shows up in no log line, CLI output or API answer.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use hearth_tests::{
    agent_bench::{anthropic_text_turn, anthropic_tool_turn},
    eventually,
    fake_model::{serve_scripted, Answer, Script},
    fake_telegram::{Call, FakeTelegram, BOT_USERNAME},
    hub_cli, set_provider_key, HubProc,
};
use serde_json::{json, Value};

use crate::{bins, sub, tempdir};

const TOKEN: &str = "123456789:AAtest-hearth_Token";
const OWNER: i64 = 1001;
const STRANGER: i64 = 666;
const WAIT: Duration = Duration::from_secs(30);

/// Every API answer, to check none carries the token.
type Answers = Arc<Mutex<Vec<String>>>;

fn api(
    hub: &HubProc,
    seen: &Answers,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    let (code, text) = hub.api(
        method,
        &format!("/api/v1{path}"),
        body.map(|b| b.to_string()).as_deref(),
    )?;
    if let Ok(mut s) = seen.lock() {
        s.push(text.clone());
    }
    Ok((code, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

fn status(hub: &HubProc, seen: &Answers) -> anyhow::Result<Value> {
    let (code, body) = api(hub, seen, "GET", "/channels/telegram", None)?;
    anyhow::ensure!(code == 200, "status {code}: {body}");
    Ok(body)
}

/// Waits until the hub handled update `id` (it asked for updates past it).
fn handled(tg: &FakeTelegram, id: i64) -> anyhow::Result<()> {
    eventually(WAIT, || Ok(tg.confirmed() > id))
}

/// The messages sent to `chat` after the first `skip` calls to it.
fn sent_since(tg: &FakeTelegram, chat: i64, skip: usize) -> Vec<Call> {
    tg.calls_to(chat)
        .into_iter()
        .skip(skip)
        .filter(|c| c.method == "sendMessage")
        .collect()
}

#[test]
fn an_allowed_chat_talks_to_the_agent_and_a_stranger_gets_nothing() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let script: Script = Arc::default();
    let model = rt.block_on(serve_scripted(script.clone()))?;
    let tg = rt.block_on(FakeTelegram::start(TOKEN))?;
    let push = |a: Answer| script.lock().map(|mut s| s.push(a)).ok();

    let bins = bins();
    let dir = tempdir();
    let home = sub(&dir, "hub");
    set_provider_key(&bins, &home, "anthropic", "sk-test-telegram")?;
    let hub = HubProc::start_with_env(
        &bins,
        &home,
        0,
        &[
            ("HEARTH_ANTHROPIC_URL", &format!("http://{model}")),
            ("HEARTH_TELEGRAM_API", &tg.url()),
        ],
    )?;
    let seen: Answers = Arc::default();

    // A token Telegram refuses is a clear error, and is not stored.
    let (code, body) = api(
        &hub,
        &seen,
        "PUT",
        "/channels/telegram",
        Some(json!({"token": "987654:WRONG-token"})),
    )?;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_token", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("refused"),
        "{body}"
    );
    assert!(tg.refused_tokens() >= 1);
    let (code, body) = api(
        &hub,
        &seen,
        "PUT",
        "/channels/telegram",
        Some(json!({"token": "not a token/../x"})),
    )?;
    assert_eq!(code, 400, "{body}");
    let st = status(&hub, &seen)?;
    assert_eq!(
        (st["token_set"].as_bool(), st["running"].as_bool()),
        (Some(false), Some(false)),
        "{st}"
    );

    // The command line checks a token too, reading it from standard input.
    let mut cli = bins.hub(&home);
    cli.args(["telegram", "set-token", "--token-stdin"])
        .env("HEARTH_TELEGRAM_API", tg.url())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cli.spawn()?;
    if let Some(mut input) = child.stdin.take() {
        use std::io::Write;
        input.write_all(b"555:ALSO-wrong\n")?;
    }
    let out = child.wait_with_output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("was not stored") && err.contains("401"),
        "{err}"
    );
    assert!(!err.contains("ALSO-wrong"), "{err}");

    // The owner allows their chat from the command line, then sets the token.
    let out = hub_cli(
        &bins,
        &home,
        &[
            "telegram",
            "allow",
            &OWNER.to_string(),
            "--project",
            "general",
            "--label",
            "phone",
        ],
    )?;
    assert!(
        out.contains("1001") && out.contains("telegram-1001-1"),
        "{out}"
    );
    let (code, body) = api(
        &hub,
        &seen,
        "PUT",
        "/channels/telegram",
        Some(json!({"token": TOKEN})),
    )?;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["token_set"], true);
    eventually(WAIT, || {
        let st = status(&hub, &seen)?;
        Ok(st["running"] == true && st["bot_username"] == BOT_USERNAME && st["configured"] == true)
    })?;
    let st = status(&hub, &seen)?;
    assert_eq!(st["chats"][0]["chat"], OWNER, "{st}");
    assert_eq!(st["chats"][0]["project_name"], "general", "{st}");
    assert_eq!(st["chats"][0]["label"], "phone", "{st}");

    // A stranger writes: nothing at all goes back to it; the owner can see who it was.
    let id = tg.send_text(STRANGER, "hello? who are you");
    handled(&tg, id)?;
    assert!(
        tg.calls_to(STRANGER).is_empty(),
        "{:?}",
        tg.calls_to(STRANGER)
    );
    let st = status(&hub, &seen)?;
    assert_eq!(st["refused"][0]["chat"], STRANGER, "{st}");
    assert_eq!(st["refused"][0]["name"], "@user666", "{st}");

    // A streamed answer: sent on the first words, edited as it grows, finished as HTML.
    push(Answer::words(
        "Hello **owner**, here is *your* answer with `code` in it and a few more words to stream slowly.",
        Duration::from_millis(120),
    ));
    let id = tg.send_text(OWNER, "hi");
    handled(&tg, id)?;
    let want =
        "Hello owner, here is your answer with code in it and a few more words to stream slowly.";
    eventually(WAIT, || Ok(tg.chat_texts(OWNER).iter().any(|t| t == want)))?;
    let calls = tg.calls_to(OWNER);
    let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
    assert_eq!(methods.first(), Some(&"sendChatAction"), "{methods:?}");
    let first_send = methods
        .iter()
        .position(|m| *m == "sendMessage")
        .expect("a message");
    let edits: Vec<&Call> = calls[first_send..]
        .iter()
        .filter(|c| c.method == "editMessageText")
        .collect();
    assert!(
        edits.len() >= 2,
        "a streaming edit and the final one: {methods:?}"
    );
    assert!(
        calls[first_send].body["parse_mode"].is_null(),
        "streaming text is plain"
    );
    let last = edits.last().expect("final edit");
    assert_eq!(last.body["parse_mode"], "HTML");
    assert!(
        last.text().contains("<b>owner</b>") && last.text().contains("<code>code</code>"),
        "{}",
        last.text()
    );

    // A risky tool call: the approval arrives as buttons; a stranger's press decides
    // nothing; the owner's press runs the tool.
    let (code, projects) = api(&hub, &seen, "GET", "/projects?limit=200", None)?;
    assert_eq!(code, 200);
    let general = hearth_tests::project_id(&projects, "general")?;
    let (code, body) = api(
        &hub,
        &seen,
        "PUT",
        &format!("/projects/{general}/tools/notes_delete"),
        Some(json!({"allowed": true})),
    )?;
    assert_eq!(code, 200, "{body}");
    let (code, note) = api(
        &hub,
        &seen,
        "POST",
        "/notes",
        Some(json!({"title": "Old plan", "content": "drop me", "project": general})),
    )?;
    assert_eq!(code, 201, "{note}");
    let note_id = note["id"].as_str().unwrap_or_default().to_string();
    push(anthropic_tool_turn("toolu_1", "notes_delete", &json!({"id": note_id})).into());
    push(anthropic_text_turn("Deleted **the** old plan.").into());
    let before = tg.calls_to(OWNER).len();
    tg.send_text(OWNER, "delete the old plan");
    let mut asking = None;
    eventually(WAIT, || {
        asking = sent_since(&tg, OWNER, before)
            .into_iter()
            .find(|c| c.body["reply_markup"]["inline_keyboard"].is_array());
        Ok(asking.is_some())
    })?;
    let asking = asking.expect("approval message");
    assert!(asking.text().contains("notes_delete"), "{}", asking.text());
    let buttons = &asking.body["reply_markup"]["inline_keyboard"][0];
    let approve = buttons[0]["callback_data"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        approve.starts_with("ap:") && approve.ends_with(":y") && approve.len() <= 64,
        "{approve}"
    );
    let message = asking
        .result
        .as_ref()
        .and_then(|r| r["message_id"].as_i64())
        .expect("message id");

    // The stranger presses the same button (as if the data leaked): acknowledged with no
    // text, nothing decided.
    let id = tg.press(STRANGER, message, &approve);
    handled(&tg, id)?;
    let acks: Vec<Call> = tg
        .calls()
        .into_iter()
        .filter(|c| c.method == "answerCallbackQuery")
        .collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(acks[0].body["text"].is_null(), "{acks:?}");
    assert!(tg.calls_to(STRANGER).is_empty());
    let (code, _) = api(&hub, &seen, "GET", &format!("/notes/{note_id}"), None)?;
    assert_eq!(code, 200, "the note is still there");

    let id = tg.press(OWNER, message, &approve);
    handled(&tg, id)?;
    eventually(WAIT, || {
        Ok(api(&hub, &seen, "GET", &format!("/notes/{note_id}"), None)?.0 != 200)
    })?;
    let acks: Vec<Call> = tg
        .calls()
        .into_iter()
        .filter(|c| c.method == "answerCallbackQuery")
        .collect();
    assert_eq!(
        acks.last().map(|c| c.body["text"].clone()),
        Some(json!("✅ Approved")),
        "{acks:?}"
    );
    eventually(WAIT, || {
        let texts = tg.chat_texts(OWNER);
        Ok(texts.iter().any(|t| t == "Deleted the old plan.")
            && texts
                .iter()
                .any(|t| t.contains("notes_delete") && t.ends_with("✅ Approved")))
    })?;

    // A long answer: a second message mid-turn is told to wait; /stop stops the turn.
    let story = "Once upon a time there was a very long story that went on and on ".repeat(4);
    push(Answer::words(&story, Duration::from_millis(250)));
    let before = tg.calls_to(OWNER).len();
    tg.send_text(OWNER, "tell me a long story");
    eventually(WAIT, || Ok(!sent_since(&tg, OWNER, before).is_empty()))?;
    let id = tg.send_text(OWNER, "are you there?");
    handled(&tg, id)?;
    eventually(WAIT, || {
        Ok(sent_since(&tg, OWNER, before)
            .iter()
            .any(|c| c.text().starts_with("Still working on the last message")))
    })?;
    tg.send_text(OWNER, "/stop");
    eventually(WAIT, || {
        Ok(sent_since(&tg, OWNER, before)
            .iter()
            .any(|c| c.text() == "⏹ Stopped."))
    })?;
    let shown = tg.chat_texts(OWNER);
    assert!(
        !shown.iter().any(|t| t.trim() == story.trim()),
        "the story was cut short"
    );

    // /new: a fresh conversation, answered there.
    let before = tg.calls_to(OWNER).len();
    tg.send_text(OWNER, "/new");
    eventually(WAIT, || {
        Ok(sent_since(&tg, OWNER, before)
            .iter()
            .any(|c| c.text().contains("telegram-1001-2")))
    })?;
    assert_eq!(status(&hub, &seen)?["chats"][0]["conversation"], 2);
    push(anthropic_text_turn("A fresh start.").into());
    tg.send_text(OWNER, "hello again");
    eventually(WAIT, || {
        Ok(tg.chat_texts(OWNER).iter().any(|t| t == "A fresh start."))
    })?;
    let (code, convs) = api(
        &hub,
        &seen,
        "GET",
        &format!("/projects/{general}/conversations"),
        None,
    )?;
    assert_eq!(code, 200, "{convs}");
    assert!(convs.to_string().contains("telegram-1001-2"), "{convs}");

    // /help names the bound project.
    let before = tg.calls_to(OWNER).len();
    tg.send_text(OWNER, "/help");
    eventually(WAIT, || {
        Ok(sent_since(&tg, OWNER, before)
            .iter()
            .any(|c| c.text().contains("<b>general</b>") && c.text().contains("/stop")))
    })?;

    // Flood control: a 429 on a poll is waited out (`retry_after`), then polling goes on.
    tg.fail_next(
        "getUpdates",
        429,
        "Too Many Requests: retry after 1",
        Some(1),
    );
    push(anthropic_text_turn("Still here.").into());
    tg.send_text(OWNER, "still there?");
    eventually(WAIT, || {
        Ok(tg.chat_texts(OWNER).iter().any(|t| t == "Still here."))
    })?;
    eventually(WAIT, || Ok(tg.failures_served() == 1))?;
    push(anthropic_text_turn("And here.").into());
    tg.send_text(OWNER, "and now?");
    eventually(WAIT, || {
        Ok(tg.chat_texts(OWNER).iter().any(|t| t == "And here."))
    })?;

    // Off and on again.
    let (code, _) = api(
        &hub,
        &seen,
        "PUT",
        "/channels/telegram",
        Some(json!({"enabled": false})),
    )?;
    assert_eq!(code, 200);
    eventually(WAIT, || Ok(status(&hub, &seen)?["running"] == false))?;
    let (code, _) = api(
        &hub,
        &seen,
        "PUT",
        "/channels/telegram",
        Some(json!({"enabled": true})),
    )?;
    assert_eq!(code, 200);
    eventually(WAIT, || Ok(status(&hub, &seen)?["running"] == true))?;

    // Taken off the list: its next message gets nothing.
    let (code, _) = api(
        &hub,
        &seen,
        "DELETE",
        &format!("/channels/telegram/chats/{OWNER}"),
        None,
    )?;
    assert_eq!(code, 204);
    let (code, _) = api(
        &hub,
        &seen,
        "DELETE",
        &format!("/channels/telegram/chats/{OWNER}"),
        None,
    )?;
    assert_eq!(code, 404);
    let before = tg.calls_to(OWNER).len();
    let id = tg.send_text(OWNER, "are you still listening?");
    handled(&tg, id)?;
    assert_eq!(tg.calls_to(OWNER).len(), before, "no answer once denied");

    // The token never left the hub but in request URLs.
    let secret = TOKEN.split_once(':').map(|(_, s)| s).unwrap_or(TOKEN);
    assert!(
        !hub.proc.stderr_text().contains(secret),
        "the token is in the hub's log"
    );
    let answers = seen.lock().map(|s| s.join("\n")).unwrap_or_default();
    assert!(!answers.contains(secret), "an API answer carries the token");
    let out = hub_cli(&bins, &home, &["telegram", "status"])?;
    assert!(
        out.contains("token: stored") && !out.contains(secret),
        "{out}"
    );
    assert!(out.contains("refused: chat 666"), "{out}");
    Ok(())
}
