//! A turn's events as Telegram messages. Text streams into one message: sent on the
//! first words, edited at most once a second as more arrive (plain text while it
//! grows), and given its final form when the text ends — converted to Telegram's HTML
//! and split into as many messages as its length needs. A `restart` drops the partial
//! text; a tool call ends the message (later text starts a new one, below it); an
//! approval request is a message with buttons, edited with the outcome; `finished`
//! says how a turn ended when it did not end normally.
//!
//! Runs in the service's `JoinSet`, one task per turn; it ends with its stream (which
//! the chat service ends at shutdown) and clears the chat's turn-in-progress mark however
//! it ends. Never decides anything: it only shows.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::{Stream, StreamExt};
use serde_json::Value;

use super::{
    approvals,
    client::BotApi,
    format::{self, cut, MESSAGE_LIMIT},
    Shared,
};

/// At most one edit per this, per chat (Telegram's flood limits).
const EDIT_EVERY: Duration = Duration::from_secs(1);

/// A turn's events, as the chat service streams them (numbered JSON).
pub(super) type Events = Pin<Box<dyn Stream<Item = Arc<str>> + Send>>;

/// Clears the chat's turn-in-progress mark when the consumer ends, even aborted.
struct Active {
    shared: Arc<Shared>,
    chat: i64,
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Ok(mut a) = self.shared.active.lock() {
            a.remove(&self.chat);
        }
    }
}

/// The message text is streaming into.
struct Reply {
    bot: Arc<BotApi>,
    chat: i64,
    /// The Markdown so far.
    text: String,
    /// The message showing it, once sent.
    message: Option<i64>,
    /// What that message shows now.
    shown: String,
    last_edit: Instant,
    /// Whether any text was delivered in this turn.
    said: bool,
}

impl Reply {
    fn preview_text(&self) -> String {
        let text = self.text.trim();
        let shown = cut(text, MESSAGE_LIMIT - 2);
        if shown.len() < text.len() {
            format!("{shown} …")
        } else {
            shown.to_string()
        }
    }

    /// When the next edit is due, if the text moved on.
    fn due(&self) -> Option<tokio::time::Instant> {
        (self.message.is_some() && self.preview_text() != self.shown)
            .then(|| tokio::time::Instant::from_std(self.last_edit + EDIT_EVERY))
    }

    /// Shows the text so far: sends the message, or edits it.
    async fn preview(&mut self) {
        let text = self.preview_text();
        if text.is_empty() || text == self.shown {
            return;
        }
        let sent = match self.message {
            None => self
                .bot
                .send_message(self.chat, &text, false, false, None)
                .await
                .map(|m| self.message = Some(m.message_id)),
            Some(id) => {
                self.bot
                    .edit_message(self.chat, id, &text, false, None)
                    .await
            }
        };
        self.last_edit = Instant::now();
        match sent {
            Ok(()) => self.shown = text,
            Err(e) => {
                tracing::warn!(error = %e, chat = self.chat, "Telegram streaming update failed")
            }
        }
    }

    /// Gives the text its final form (HTML, split) and starts afresh.
    async fn finish(&mut self) {
        let parts = format::parts(&self.text, MESSAGE_LIMIT);
        let mut message = self.message.take();
        if parts.is_empty() {
            if let Some(id) = message {
                // Text was shown, then dropped by a restart, and nothing replaced it.
                let _ = self.bot.edit_message(self.chat, id, "…", false, None).await;
            }
        }
        for part in &parts {
            let result = match message.take() {
                Some(id) => {
                    let html = self
                        .bot
                        .edit_message(self.chat, id, &part.html, true, None)
                        .await;
                    match html {
                        Err(e) if e.bad_html() => {
                            self.bot
                                .edit_message(self.chat, id, &part.plain, false, None)
                                .await
                        }
                        other => other,
                    }
                }
                None => self
                    .bot
                    .send_html(self.chat, &part.html, &part.plain, false, None)
                    .await
                    .map(|_| ()),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, chat = self.chat, "Telegram reply failed");
            }
        }
        self.said |= !parts.is_empty();
        self.text.clear();
        self.shown.clear();
    }
}

/// Shows one turn's events in `chat` until its stream ends.
pub(super) async fn stream(shared: Arc<Shared>, bot: Arc<BotApi>, chat: i64, mut events: Events) {
    let _active = Active {
        shared: shared.clone(),
        chat,
    };
    let mut reply = Reply {
        bot: bot.clone(),
        chat,
        text: String::new(),
        message: None,
        shown: String::new(),
        last_edit: Instant::now(),
        said: false,
    };
    // Approval messages by approval id, with their HTML.
    let mut asked: HashMap<String, (i64, String, bool)> = HashMap::new();
    let _ = bot.typing(chat).await;
    loop {
        let due = reply.due();
        let next = tokio::select! {
            ev = events.next() => ev,
            _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                reply.preview().await;
                continue;
            }
        };
        let Some(ev) = next else { break };
        let Ok(ev) = serde_json::from_str::<Value>(&ev) else {
            continue;
        };
        let str_of = |k: &str| ev[k].as_str().unwrap_or_default().to_string();
        match ev["type"].as_str().unwrap_or_default() {
            "text" => {
                reply.text.push_str(ev["text"].as_str().unwrap_or_default());
                if reply.message.is_none() {
                    reply.preview().await;
                }
            }
            "restart" => reply.text.clear(),
            "tool_call" => {
                reply.finish().await;
                let _ = bot.typing(chat).await;
            }
            "approval_requested" => {
                reply.finish().await;
                let id = str_of("id");
                let html = approvals::asking_html(&str_of("name"), &ev["args"]);
                let keyboard = approvals::buttons(&id);
                let (html, plain) = match keyboard {
                    Some(_) => (html, format!("Approve {}?", str_of("name"))),
                    // An id too long for a button: answer it in the app.
                    None => (
                        format!("{html}\nAnswer it in the Hearth app."),
                        format!("Approve {}? Answer it in the Hearth app.", str_of("name")),
                    ),
                };
                match bot
                    .send_message(chat, &html, true, false, keyboard.as_ref())
                    .await
                {
                    Ok(m) => {
                        asked.insert(id, (m.message_id, html, true));
                    }
                    Err(e) if e.bad_html() => {
                        if let Ok(m) = bot
                            .send_message(chat, &plain, false, false, keyboard.as_ref())
                            .await
                        {
                            asked.insert(id, (m.message_id, plain, false));
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, chat, "Telegram approval message failed"),
                }
            }
            "approval_resolved" => {
                if let Some((message, text, html)) = asked.remove(&str_of("id")) {
                    let text = format!("{text}\n\n{}", approvals::outcome(&str_of("resolution")));
                    if let Err(e) = bot.edit_message(chat, message, &text, html, None).await {
                        tracing::warn!(error = %e, chat, "cannot edit the Telegram approval message");
                    }
                }
            }
            "finished" => {
                reply.finish().await;
                let reason = str_of("reason");
                let note = match reason.as_str() {
                    "end_turn" if reply.said => None,
                    "end_turn" => Some("(no answer)".to_string()),
                    "aborted" => Some("⏹ Stopped.".to_string()),
                    "step_limit" => Some("⏹ Stopped: the step limit was reached.".to_string()),
                    other => Some(format!("⚠ {other}")),
                };
                if let Some(note) = note {
                    if let Err(e) = bot.send_message(chat, &note, false, false, None).await {
                        tracing::warn!(error = %e, chat, "Telegram reply failed");
                    }
                }
                break;
            }
            "error" => {
                reply.finish().await;
                let note = format!("⚠ {}", str_of("message"));
                if let Err(e) = bot.send_message(chat, &note, false, false, None).await {
                    tracing::warn!(error = %e, chat, "Telegram reply failed");
                }
                break;
            }
            _ => {}
        }
    }
}
