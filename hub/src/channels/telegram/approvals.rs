//! Approval buttons: the message that asks (the tool, its arguments — already redacted
//! by the agent — and [Approve] [Deny] with `callback_data` `ap:<approval id>:y|n`), and
//! what a press does.
//!
//! A press counts only from an allowed chat, and only for an approval that chat may
//! decide: one of its own conversations' (`telegram-<chat>-…`), or — for a notification's
//! approval — one whose project lies within the chat's bound project's subtree, never
//! another chat's. It is decided through `Agent::decide` for that very conversation,
//! answered (`answerCallbackQuery`), and the message then says the outcome. A press from
//! a chat not on the list is acknowledged with no text and logged, nothing else.

use std::sync::Arc;

use hearth_sync::DocId;

use super::{
    client::BotApi,
    format::escape_within,
    store::AllowedChat,
    wire::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup},
    Shared,
};
use crate::agent::runner::{Approval, Decided};

/// Telegram's limit on `callback_data`.
const DATA_LIMIT: usize = 64;

/// The arguments shown in an approval message, at most.
const ARGS_SHOWN: usize = 1500;

/// The `callback_data` of an answer to approval `id`, if it fits.
pub(super) fn callback_data(id: &str, approve: bool) -> Option<String> {
    let data = format!("ap:{id}:{}", if approve { 'y' } else { 'n' });
    (data.len() <= DATA_LIMIT && valid_id(id)).then_some(data)
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Reads `callback_data`: the approval id and whether it approves.
pub(super) fn parse_callback(data: &str) -> Option<(&str, bool)> {
    if data.len() > DATA_LIMIT {
        return None;
    }
    let rest = data.strip_prefix("ap:")?;
    let (id, answer) = rest.rsplit_once(':')?;
    let approve = match answer {
        "y" => true,
        "n" => false,
        _ => return None,
    };
    valid_id(id).then_some((id, approve))
}

/// The [Approve] [Deny] keyboard of approval `id` (none if its id cannot fit).
pub(super) fn buttons(id: &str) -> Option<InlineKeyboardMarkup> {
    Some(InlineKeyboardMarkup {
        inline_keyboard: vec![vec![
            InlineKeyboardButton {
                text: "✅ Approve".into(),
                callback_data: callback_data(id, true)?,
            },
            InlineKeyboardButton {
                text: "❌ Deny".into(),
                callback_data: callback_data(id, false)?,
            },
        ]],
    })
}

/// The asking message's HTML: the tool and its arguments.
pub(super) fn asking_html(tool: &str, args: &serde_json::Value) -> String {
    let args = serde_json::to_string_pretty(args).unwrap_or_default();
    let (shown, whole) = escape_within(&args, ARGS_SHOWN);
    let more = if whole { "" } else { "\n…" };
    format!(
        "🔐 Approve <b>{}</b>?\n<pre>{shown}{more}</pre>",
        escape_within(tool, 200).0
    )
}

/// The line that says how an approval ended.
pub(super) fn outcome(resolution: &str) -> &'static str {
    match resolution {
        "approved" => "✅ Approved",
        "denied" => "❌ Denied",
        "timed_out" => "⌛ Timed out",
        _ => "⏹ Stopped",
    }
}

/// Who may decide an approval from a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decider {
    /// The chat's own turn asked: its stream reports the outcome.
    OwnTurn,
    /// Another conversation within the chat's project subtree (a notification's).
    Subtree,
    /// Not this chat's to decide.
    No,
}

/// Whether `chat` (bound to `bound`) may decide `approval`; `within` says whether a
/// project lies in `bound`'s subtree.
pub(super) fn decider(
    chat: &AllowedChat,
    bound: DocId,
    approval: &Approval,
    within: bool,
) -> Decider {
    let own = format!("telegram-{}-", chat.chat);
    if approval.conversation.starts_with(&own) {
        Decider::OwnTurn
    } else if approval.conversation.starts_with("telegram-") {
        // Another chat's turn: its buttons are in that chat alone.
        Decider::No
    } else if within || approval.project == bound {
        Decider::Subtree
    } else {
        Decider::No
    }
}

async fn answer(bot: &BotApi, query: &str, text: Option<&str>) {
    if let Err(e) = bot.answer_callback(query, text).await {
        tracing::warn!(error = %e, "Telegram answerCallbackQuery failed");
    }
}

/// Handles a button press.
pub(super) async fn on_callback(shared: &Arc<Shared>, bot: &Arc<BotApi>, query: CallbackQuery) {
    let Some(msg) = query.message.as_ref() else {
        answer(bot, &query.id, None).await;
        return;
    };
    let chat_id = msg.chat.id;
    let allowed = match shared.db(move |s| s.chat(chat_id)).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, chat = chat_id, "cannot read the Telegram allow-list");
            None
        }
    };
    let Some(chat) = allowed else {
        tracing::warn!(
            chat = chat_id,
            name = %super::updates::chat_name(&msg.chat, Some(&query.from)),
            "a button press from a Telegram chat not on the allow-list; ignored"
        );
        answer(bot, &query.id, None).await;
        return;
    };
    let Some((id, approve)) = query.data.as_deref().and_then(parse_callback) else {
        answer(bot, &query.id, Some("Unknown button.")).await;
        return;
    };
    let agent = &shared.chat.agent;
    let bound = shared.project_of(&chat);
    let approval = agent.approvals().into_iter().find(|a| a.id == id);
    let who = match &approval {
        Some(a) => {
            let within = shared.within(bound, a.project).await;
            decider(&chat, bound, a, within)
        }
        None => Decider::No,
    };
    let decided = match (&approval, who) {
        (Some(a), Decider::OwnTurn | Decider::Subtree) => {
            agent.decide(id, Some((a.project, a.conversation.as_str())), approve)
        }
        _ => Decided::Unknown,
    };
    let (notice, line) = match decided {
        Decided::Now => {
            let r = if approve { "approved" } else { "denied" };
            (outcome(r).to_string(), Some(outcome(r)))
        }
        Decided::Already(r) => (
            format!("Already answered: {}", r.as_str()),
            Some(outcome(r.as_str())),
        ),
        Decided::Unknown => ("This request is no longer waiting.".into(), None),
    };
    answer(bot, &query.id, Some(&notice)).await;
    // The chat's own turn edits its message when the agent reports the outcome; any
    // other message says it here (and loses its buttons).
    if who == Decider::OwnTurn && matches!(decided, Decided::Now) {
        return;
    }
    let line = line.unwrap_or("(no longer waiting)");
    let text = format!("{}\n\n{line}", msg.text.as_deref().unwrap_or_default());
    if let Err(e) = bot
        .edit_message(chat_id, msg.message_id, text.trim(), false, None)
        .await
    {
        tracing::warn!(error = %e, chat = chat_id, "cannot edit the Telegram approval message");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_data_round_trips_within_64_bytes() {
        let id = "0123456789abcdef0123456789abcdef";
        let yes = callback_data(id, true).expect("fits");
        assert_eq!(yes, format!("ap:{id}:y"));
        assert!(yes.len() <= 64);
        assert_eq!(parse_callback(&yes), Some((id, true)));
        assert_eq!(
            parse_callback(&callback_data(id, false).expect("fits")),
            Some((id, false))
        );
        // Too long for Telegram: no buttons rather than cut data.
        assert_eq!(callback_data(&"a".repeat(60), true), None);
        assert!(buttons(&"a".repeat(60)).is_none());
        for bad in [
            "", "ap:", "ap::y", "ap:abc:x", "ap:abc", "xx:abc:y", "ap:a b:y", "ap:a:b:y",
        ] {
            assert_eq!(parse_callback(bad), None, "{bad:?}");
        }
        assert_eq!(parse_callback(&format!("ap:{}:y", "a".repeat(70))), None);
    }

    fn chat(id: i64) -> AllowedChat {
        AllowedChat {
            chat: id,
            label: String::new(),
            project: None,
            conversation: 3,
            notify: true,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn approval(project: DocId, conversation: &str) -> Approval {
        Approval {
            id: "abc".into(),
            project,
            conversation: conversation.into(),
            tool: "notes_delete".into(),
            args: serde_json::json!({}),
            asked_at: 0,
            resolution: None,
        }
    }

    #[test]
    fn a_chat_decides_its_own_and_its_subtrees_approvals_only() {
        let (home, elsewhere) = (DocId::random(), DocId::random());
        let c = chat(42);
        assert_eq!(
            decider(&c, home, &approval(home, "telegram-42-3"), true),
            Decider::OwnTurn
        );
        // Its earlier conversation is still its own.
        assert_eq!(
            decider(&c, home, &approval(home, "telegram-42-1"), true),
            Decider::OwnTurn
        );
        // Another chat's turn, even in the same project: not this chat's.
        assert_eq!(
            decider(&c, home, &approval(home, "telegram-420-1"), true),
            Decider::No
        );
        assert_eq!(
            decider(&c, home, &approval(home, "telegram-4-1"), true),
            Decider::No
        );
        // A scheduled run's approval (sent as a notification) within the subtree.
        assert_eq!(
            decider(&c, home, &approval(home, "schedule-s1-4"), false),
            Decider::Subtree
        );
        assert_eq!(
            decider(&c, home, &approval(elsewhere, "schedule-s1-4"), true),
            Decider::Subtree
        );
        assert_eq!(
            decider(&c, home, &approval(elsewhere, "schedule-s1-4"), false),
            Decider::No
        );
    }

    #[test]
    fn the_asking_message_escapes_and_bounds_the_arguments() {
        let html = asking_html(
            "notes<x>",
            &serde_json::json!({"content": "<".repeat(4000)}),
        );
        assert!(html.starts_with("🔐 Approve <b>notes&lt;x&gt;</b>?"));
        assert!(html.contains("&lt;&lt;") && !html.contains("<<"));
        assert!(html.ends_with("\n…</pre>"));
        assert!(super::super::format::tg_len(&html) < 4096);
        assert_eq!(outcome("approved"), "✅ Approved");
        assert_eq!(outcome("stopped"), "⏹ Stopped");
    }
}
