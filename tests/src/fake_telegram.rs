//! A fake Telegram Bot API on 127.0.0.1 for the channel's tests, speaking the real JSON:
//! `getMe`, `getUpdates` (a long poll held open until an update is queued or its
//! `timeout` passes; an `offset` confirms every update below it), `sendMessage`,
//! `editMessageText`, `answerCallbackQuery` and `sendChatAction`, at
//! `POST /bot<token>/<method>`, each answered in the `{"ok":…}` envelope.
//!
//! It checks what the real one checks where a test could be fooled: the token (401
//! otherwise), Telegram's HTML (only its tags, balanced, only its entities: else 400
//! "can't parse entities"), 4,096 characters after parsing, 64-byte callback data, and
//! "message is not modified". It records every call, and a test queues updates (a user's
//! text, a button press) and scripted failures (a 429 with `retry_after`). Binds only
//! loopback and never reaches anything itself.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use serde_json::{json, Value};

/// One call the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method (`sendMessage`…).
    pub method: String,
    /// Its JSON body.
    pub body: Value,
    /// What the fake answered with `ok: true` (the sent message…), or `None`.
    pub result: Option<Value>,
}

impl Call {
    /// The body's `chat_id`, if any.
    pub fn chat(&self) -> Option<i64> {
        self.body["chat_id"].as_i64()
    }

    /// The body's `text`.
    pub fn text(&self) -> &str {
        self.body["text"].as_str().unwrap_or_default()
    }
}

/// A failure to answer instead of the next call of a method.
#[derive(Debug, Clone)]
struct Failure {
    code: u16,
    description: String,
    retry_after: Option<u64>,
}

#[derive(Default)]
struct Inner {
    /// Updates not yet confirmed by an offset.
    queue: Vec<Value>,
    next_update: i64,
    next_message: i64,
    /// The highest offset the client asked for.
    confirmed: i64,
    calls: Vec<Call>,
    /// Each message's text as shown (entities parsed), raw text and keyboard.
    messages: HashMap<(i64, i64), (String, String, Value)>,
    failures: HashMap<String, Vec<Failure>>,
    failures_served: usize,
    refused_tokens: usize,
}

struct Shared {
    token: String,
    inner: Mutex<Inner>,
    pushed: tokio::sync::watch::Sender<u64>,
}

/// The running fake.
#[derive(Clone)]
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

/// The bot the fake plays.
pub const BOT_USERNAME: &str = "hearth_test_bot";
const BOT_ID: i64 = 424_242;

fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Hearth", "username": BOT_USERNAME,
           "can_join_groups": true, "can_read_all_group_messages": false,
           "supports_inline_queries": false})
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

fn error(code: u16, description: &str, retry_after: Option<u64>) -> Response {
    let mut body = json!({"ok": false, "error_code": code, "description": description});
    if let Some(s) = retry_after {
        body["parameters"] = json!({"retry_after": s});
    }
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
        Json(body),
    )
        .into_response()
}

fn bad(description: &str) -> Response {
    error(400, &format!("Bad Request: {description}"), None)
}

const TAGS: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-spoiler",
    "span",
    "tg-emoji",
];

/// Parses Telegram's HTML as the Bot API does: its tags only, balanced, `<a>` with an
/// `href`, its named entities only. The text shown, or why it cannot be parsed.
pub fn parse_html(html: &str) -> Result<String, String> {
    let mut shown = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        let at = html.len() - rest.len();
        match c {
            '<' => {
                let end = rest
                    .find('>')
                    .ok_or_else(|| format!("Unclosed start tag at byte offset {at}"))?;
                let tag = &rest[1..end];
                rest = &rest[end + 1..];
                if let Some(name) = tag.strip_prefix('/') {
                    match open.pop() {
                        Some(o) if o == name.trim() => {}
                        _ => return Err(format!("Unexpected end tag at byte offset {at}")),
                    }
                } else {
                    let name = tag.split_whitespace().next().unwrap_or("").to_string();
                    if !TAGS.contains(&name.as_str()) {
                        return Err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {at}"
                        ));
                    }
                    if name == "a" && !tag.contains("href=\"") {
                        return Err(format!("Can't find href in a tag at byte offset {at}"));
                    }
                    open.push(name);
                }
            }
            '&' => {
                let end = rest[..rest.len().min(12)].find(';').ok_or_else(|| {
                    format!("Can't find end of the entity starting at byte offset {at}")
                })?;
                let entity = &rest[1..end];
                let ch = match entity {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "quot" => '"',
                    e if e.starts_with('#') => e[1..]
                        .parse::<u32>()
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or_else(|| format!("Unsupported entity at byte offset {at}"))?,
                    _ => {
                        return Err(format!(
                            "Unsupported HTML entity \"&{entity};\" at byte offset {at}"
                        ))
                    }
                };
                shown.push(ch);
                rest = &rest[end + 1..];
            }
            '>' => {
                return Err(format!(
                    "Character '>' is reserved and must be escaped at byte offset {at}"
                ))
            }
            c => {
                shown.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    match open.pop() {
        Some(name) => Err(format!(
            "Can't find end tag corresponding to start tag \"{name}\""
        )),
        None => Ok(shown),
    }
}

/// The text a message shows, or the error Telegram answers.
fn shown_text(body: &Value) -> Result<String, String> {
    let text = body["text"].as_str().unwrap_or_default();
    let shown = match body["parse_mode"].as_str() {
        Some("HTML") => parse_html(text).map_err(|e| format!("can't parse entities: {e}"))?,
        Some(other) => return Err(format!("unsupported parse_mode {other}")),
        None => text.to_string(),
    };
    if shown.trim().is_empty() {
        return Err("message text is empty".into());
    }
    if shown.encode_utf16().count() > 4096 {
        return Err("message is too long".into());
    }
    for row in body["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for button in row.as_array().into_iter().flatten() {
            let data = button["callback_data"].as_str().unwrap_or_default();
            if data.is_empty() || data.len() > 64 {
                return Err("BUTTON_DATA_INVALID".into());
            }
        }
    }
    Ok(shown)
}

fn message_json(chat: i64, id: i64, text: &str, markup: &Value) -> Value {
    let mut m = json!({
        "message_id": id,
        "from": bot_user(),
        "chat": {"id": chat, "type": if chat < 0 { "supergroup" } else { "private" }},
        "date": 1_760_000_000,
        "text": text,
    });
    if !markup.is_null() {
        m["reply_markup"] = markup.clone();
    }
    m
}

/// What a call gets: an answer now, or a long poll from `offset`.
enum Next {
    Now(Response),
    Poll { offset: i64, timeout: u64 },
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    body: String,
) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(json!({}));
    // The lock is taken and released in `respond`, never held across the poll.
    match respond(&shared, &bot, &method, &body) {
        Next::Now(r) => r,
        Next::Poll { offset, timeout } => long_poll(shared, offset, timeout).await,
    }
}

fn respond(shared: &Shared, bot: &str, method: &str, body: &Value) -> Next {
    let Ok(mut inner) = shared.inner.lock() else {
        return Next::Now(error(500, "Internal Server Error", None));
    };
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        inner.refused_tokens += 1;
        return Next::Now(error(401, "Unauthorized", None));
    }
    let failure = inner
        .failures
        .get_mut(method)
        .and_then(|f| (!f.is_empty()).then(|| f.remove(0)));
    inner.calls.push(Call {
        method: method.to_string(),
        body: body.clone(),
        result: None,
    });
    if let Some(f) = failure {
        inner.failures_served += 1;
        return Next::Now(error(f.code, &f.description, f.retry_after));
    }
    let answered = match method {
        "getMe" => Ok(bot_user()),
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            inner.confirmed = inner.confirmed.max(offset);
            inner
                .queue
                .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            if inner.queue.is_empty() {
                let timeout = body["timeout"].as_u64().unwrap_or(0).min(60);
                return Next::Poll { offset, timeout };
            }
            Ok(Value::Array(inner.queue.clone()))
        }
        "sendMessage" => match (body["chat_id"].as_i64(), shown_text(body)) {
            (None, _) => Err(bad("chat not found")),
            (_, Err(e)) => Err(bad(&e)),
            (Some(chat), Ok(shown)) => {
                inner.next_message += 1;
                let id = inner.next_message;
                let markup = body["reply_markup"].clone();
                let raw = body["text"].as_str().unwrap_or_default().to_string();
                inner
                    .messages
                    .insert((chat, id), (shown.clone(), raw, markup.clone()));
                Ok(message_json(chat, id, &shown, &markup))
            }
        },
        "editMessageText" => {
            let key = (
                body["chat_id"].as_i64().unwrap_or(0),
                body["message_id"].as_i64().unwrap_or(0),
            );
            match (inner.messages.get(&key).cloned(), shown_text(body)) {
                (None, _) => Err(bad("message to edit not found")),
                (_, Err(e)) => Err(bad(&e)),
                (Some((_, raw, markup)), Ok(shown)) => {
                    let new_raw = body["text"].as_str().unwrap_or_default().to_string();
                    let new_markup = body["reply_markup"].clone();
                    if raw == new_raw && markup == new_markup {
                        Err(bad("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"))
                    } else {
                        inner
                            .messages
                            .insert(key, (shown.clone(), new_raw, new_markup.clone()));
                        Ok(message_json(key.0, key.1, &shown, &new_markup))
                    }
                }
            }
        }
        "answerCallbackQuery" => match body["callback_query_id"].as_str() {
            Some(_) => Ok(json!(true)),
            None => Err(bad(
                "query is too old and response timeout expired or query ID is invalid",
            )),
        },
        "sendChatAction" => match (body["chat_id"].as_i64(), body["action"].as_str()) {
            (Some(_), Some("typing")) => Ok(json!(true)),
            _ => Err(bad("wrong parameter action in request")),
        },
        _ => return Next::Now(error(404, "Not Found", None)),
    };
    Next::Now(match answered {
        Ok(result) => {
            if let Some(last) = inner.calls.last_mut() {
                last.result = Some(result.clone());
            }
            ok(result)
        }
        Err(e) => e,
    })
}

/// Holds a `getUpdates` open until an update at or past `offset` is queued or
/// `timeout` seconds pass.
async fn long_poll(shared: Arc<Shared>, offset: i64, timeout: u64) -> Response {
    let mut pushed = shared.pushed.subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let ready: Vec<Value> = match shared.inner.lock() {
            Ok(inner) => inner
                .queue
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                .cloned()
                .collect(),
            Err(_) => return error(500, "Internal Server Error", None),
        };
        if !ready.is_empty() {
            return ok(Value::Array(ready));
        }
        tokio::select! {
            changed = pushed.changed() => if changed.is_err() { return ok(json!([])) },
            _ = tokio::time::sleep_until(deadline) => return ok(json!([])),
        }
    }
}

impl FakeTelegram {
    /// Starts the fake for bot `token` on 127.0.0.1 (on the current tokio runtime).
    pub async fn start(token: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            token: token.to_string(),
            inner: Mutex::new(Inner {
                next_update: 1000,
                ..Inner::default()
            }),
            pushed: tokio::sync::watch::channel(0).0,
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(handle))
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared })
    }

    /// The base URL (`HEARTH_TELEGRAM_API`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = self.shared.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut inner)
    }

    fn queue(&self, update: impl FnOnce(i64) -> Value) -> i64 {
        let id = self.with(|i| {
            i.next_update += 1;
            let id = i.next_update;
            i.queue.push(update(id));
            id
        });
        self.shared.pushed.send_modify(|n| *n += 1);
        id
    }

    /// User `chat` writes `text` in its private chat with the bot; the update's id.
    pub fn send_text(&self, chat: i64, text: &str) -> i64 {
        let message_id = self.with(|i| {
            i.next_message += 1;
            i.next_message
        });
        let user = json!({"id": chat, "is_bot": false, "first_name": format!("User{chat}"),
                          "username": format!("user{chat}"), "language_code": "en"});
        let mut message = json!({
            "message_id": message_id,
            "from": user,
            "chat": {"id": chat, "type": "private", "first_name": format!("User{chat}"),
                     "username": format!("user{chat}")},
            "date": 1_760_000_000,
            "text": text,
        });
        if text.starts_with('/') {
            let len = text
                .split_whitespace()
                .next()
                .unwrap_or("")
                .encode_utf16()
                .count();
            message["entities"] = json!([{"type": "bot_command", "offset": 0, "length": len}]);
        }
        self.queue(|id| json!({"update_id": id, "message": message}))
    }

    /// User `chat` presses the button with `data` under message `message`; the update's id.
    pub fn press(&self, chat: i64, message: i64, data: &str) -> i64 {
        let (text, markup) = self.with(|i| {
            i.messages
                .get(&(chat, message))
                .map(|(shown, _, markup)| (shown.clone(), markup.clone()))
                .unwrap_or_default()
        });
        let user = json!({"id": chat, "is_bot": false, "first_name": format!("User{chat}"),
                          "username": format!("user{chat}")});
        let message = message_json(chat, message, &text, &markup);
        self.queue(|id| {
            json!({"update_id": id, "callback_query": {
                "id": format!("cb{id}"), "from": user, "message": message,
                "chat_instance": format!("ci{chat}"), "data": data,
            }})
        })
    }

    /// Answers the next call of `method` with an error (`retry_after`: flood control).
    pub fn fail_next(&self, method: &str, code: u16, description: &str, retry_after: Option<u64>) {
        self.with(|i| {
            i.failures
                .entry(method.to_string())
                .or_default()
                .push(Failure {
                    code,
                    description: description.to_string(),
                    retry_after,
                })
        });
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.with(|i| i.calls.clone())
    }

    /// The calls that reached chat `chat` (any method with its `chat_id`).
    pub fn calls_to(&self, chat: i64) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.chat() == Some(chat))
            .collect()
    }

    /// The highest `getUpdates` offset asked for: every update below it was handled.
    pub fn confirmed(&self) -> i64 {
        self.with(|i| i.confirmed)
    }

    /// The text message `message` of `chat` shows now.
    pub fn shown(&self, chat: i64, message: i64) -> Option<String> {
        self.with(|i| i.messages.get(&(chat, message)).map(|m| m.0.clone()))
    }

    /// The texts chat `chat`'s messages show now, in the order they were sent.
    pub fn chat_texts(&self, chat: i64) -> Vec<String> {
        self.with(|i| {
            let mut m: Vec<_> = i
                .messages
                .iter()
                .filter(|((c, _), _)| *c == chat)
                .map(|((_, id), (shown, _, _))| (*id, shown.clone()))
                .collect();
            m.sort();
            m.into_iter().map(|(_, s)| s).collect()
        })
    }

    /// Scripted failures answered so far.
    pub fn failures_served(&self) -> usize {
        self.with(|i| i.failures_served)
    }

    /// Requests refused for a wrong token.
    pub fn refused_tokens(&self) -> usize {
        self.with(|i| i.refused_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_html;

    #[test]
    fn the_fake_reads_html_as_telegram_does() {
        assert_eq!(
            parse_html("<b>a</b> &lt;&amp;&gt; <a href=\"https://x\">l</a> &#128512;").as_deref(),
            Ok("a <&> l 😀")
        );
        for bad in [
            "<script>x</script>",
            "<b>x",
            "<b>x</i>",
            "a > b",
            "&nbsp;",
            "<a>x</a>",
            "x & y",
        ] {
            assert!(parse_html(bad).is_err(), "{bad}");
        }
    }
}
