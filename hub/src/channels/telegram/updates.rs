//! What an update does: a button press goes to `approvals`; a message is judged against
//! the allow-list (read from `hub.db` for this very update), then is a command (`/start`
//! and `/help`: what the bot is and which project it works in; `/stop`: stop the turn;
//! `/new`: a fresh conversation) or text that starts a turn.
//!
//! A chat not on the list gets nothing back; it is logged with its id, title and user
//! name and remembered in the status so the owner can allow it. One turn per chat at a
//! time: a message sent while the chat's turn runs is answered with "still working"
//! (not queued: a queued message would run against an answer its writer has not seen).

use std::sync::Arc;

use super::{
    client::BotApi,
    format::escape,
    store::{AllowedChat, Refused},
    turn,
    wire::{Chat, Message, Update, User},
    ActiveTurn, Shared,
};
use crate::hubdb::now_ms;

/// What a message asks for, before the allow-list is consulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Intent {
    /// `/start` or `/help`.
    Help,
    /// `/stop`.
    Stop,
    /// `/new`.
    New,
    /// Another command.
    Unknown(String),
    /// Text for the agent.
    Text(String),
    /// A photo, a sticker…
    NotText,
    /// Nothing to do: empty, from a bot, or a command for another bot.
    Ignore,
}

/// Reads `msg` (`me`: this bot's username, for `/cmd@bot` in groups).
pub(super) fn intent(msg: &Message, me: &str) -> Intent {
    if msg.from.as_ref().is_some_and(|u| u.is_bot) {
        return Intent::Ignore;
    }
    let Some(text) = msg.text.as_deref() else {
        return Intent::NotText;
    };
    let text = text.trim();
    if text.is_empty() {
        return Intent::Ignore;
    }
    let Some(command) = text.strip_prefix('/') else {
        return Intent::Text(text.to_string());
    };
    let word = command.split_whitespace().next().unwrap_or("");
    let name = match word.split_once('@') {
        Some((_, bot)) if !bot.eq_ignore_ascii_case(me) => return Intent::Ignore,
        Some((name, _)) => name,
        None => word,
    };
    match name.to_ascii_lowercase().as_str() {
        "start" | "help" => Intent::Help,
        "stop" => Intent::Stop,
        "new" => Intent::New,
        other => Intent::Unknown(other.to_string()),
    }
}

/// What the channel does with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// Not on the list: no answer, logged.
    Refuse,
    /// Nothing.
    Ignore,
    /// Answer with help.
    Help,
    /// Say the command is unknown.
    Unknown(String),
    /// Say only text is read.
    NotText,
    /// Stop the chat's turn.
    Stop,
    /// Start a fresh conversation.
    New,
    /// Start a turn with this text.
    Turn(String),
}

/// The allow-list decision: a chat not on it is refused whatever it sent.
pub(super) fn decide(allowed: Option<&AllowedChat>, intent: Intent) -> Action {
    if allowed.is_none() {
        return Action::Refuse;
    }
    match intent {
        Intent::Help => Action::Help,
        Intent::Stop => Action::Stop,
        Intent::New => Action::New,
        Intent::Unknown(c) => Action::Unknown(c),
        Intent::Text(t) => Action::Turn(t),
        Intent::NotText => Action::NotText,
        Intent::Ignore => Action::Ignore,
    }
}

/// How a chat is named in logs and the status: its title, `@username` or first name.
pub(super) fn chat_name(chat: &Chat, from: Option<&User>) -> String {
    let who = from.and_then(|u| u.username.as_ref().map(|n| format!("@{n}")));
    chat.title
        .clone()
        .or_else(|| chat.username.as_ref().map(|n| format!("@{n}")))
        .or_else(|| who.clone())
        .or_else(|| chat.first_name.clone())
        .unwrap_or_default()
}

/// Handles one update; failures are logged (one bad update never stops the poller).
pub(super) async fn handle(shared: &Arc<Shared>, bot: &Arc<BotApi>, me: &str, update: Update) {
    if let Some(query) = update.callback_query {
        super::approvals::on_callback(shared, bot, query).await;
    } else if let Some(msg) = update.message {
        on_message(shared, bot, me, msg).await;
    }
}

async fn on_message(shared: &Arc<Shared>, bot: &Arc<BotApi>, me: &str, msg: Message) {
    let chat_id = msg.chat.id;
    let allowed = match shared.db(move |s| s.chat(chat_id)).await {
        Ok(a) => a,
        Err(e) => {
            // Unsure whether it is allowed: answer nothing.
            tracing::warn!(error = %e, chat = chat_id, "cannot read the Telegram allow-list");
            return;
        }
    };
    let action = decide(allowed.as_ref(), intent(&msg, me));
    let Some(chat) = allowed else {
        refuse(shared, &msg).await;
        return;
    };
    let project = shared.project_of(&chat);
    let reply = |text: String| async move {
        if let Err(e) = bot.send_message(chat_id, &text, true, false, None).await {
            tracing::warn!(error = %e, chat = chat_id, "Telegram reply failed");
        }
    };
    match action {
        Action::Refuse | Action::Ignore => {}
        Action::Help => reply(help(shared, &chat).await).await,
        Action::Unknown(c) => {
            reply(format!(
                "Unknown command /{}.\n\n{}",
                escape(&c),
                help(shared, &chat).await
            ))
            .await
        }
        Action::NotText => reply("I read text messages only.".into()).await,
        Action::Stop => {
            let running = active(shared, chat_id);
            match running {
                // The turn's own messages say it stopped.
                Some(turn) => shared.chat.agent.abort(turn.project, &turn.conversation),
                None => reply("Nothing is running.".into()).await,
            }
        }
        Action::New => {
            if let Some(turn) = active(shared, chat_id) {
                shared.chat.agent.abort(turn.project, &turn.conversation);
            }
            match shared.db(move |s| s.next_conversation(chat_id)).await {
                Ok(Some(n)) => {
                    reply(format!(
                        "Started a fresh conversation ({}).",
                        escape(&super::store::conversation_name(chat_id, n))
                    ))
                    .await
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, chat = chat_id, "cannot start a new Telegram conversation");
                    reply("Could not start a fresh conversation; try again.".into()).await
                }
            }
        }
        Action::Turn(text) => start(shared, bot, &chat, project, &text).await,
    }
}

fn active(shared: &Shared, chat: i64) -> Option<ActiveTurn> {
    shared
        .active
        .lock()
        .ok()
        .and_then(|a| a.get(&chat).cloned())
}

/// Logs a message from a chat not on the list and remembers it for the status.
async fn refuse(shared: &Arc<Shared>, msg: &Message) {
    let name = chat_name(&msg.chat, msg.from.as_ref());
    tracing::warn!(
        chat = msg.chat.id,
        kind = %msg.chat.kind,
        name = %name,
        from = ?msg.from.as_ref().and_then(|u| u.username.clone()),
        "a Telegram chat not on the allow-list wrote; not answered (allow it with `hearth-hub telegram allow {} --project …`)",
        msg.chat.id
    );
    let refused = Refused {
        chat: msg.chat.id,
        name,
        at: now_ms(),
    };
    if let Err(e) = shared.db(move |s| s.record_refused(refused)).await {
        tracing::warn!(error = %e, "cannot remember the refused Telegram chat");
    }
}

async fn help(shared: &Shared, chat: &AllowedChat) -> String {
    let project = shared.project_of(chat);
    let name = shared
        .project_name(project)
        .await
        .unwrap_or_else(|| project.to_string());
    format!(
        "I am your Hearth agent, working in the project <b>{}</b>. Send me a message.\n\n\
         /new — start a fresh conversation\n\
         /stop — stop the answer in progress\n\
         /help — this text",
        escape(&name)
    )
}

/// Starts a turn for `chat`, unless one runs; its events go to `turn::stream`.
async fn start(
    shared: &Arc<Shared>,
    bot: &Arc<BotApi>,
    chat: &AllowedChat,
    project: hearth_sync::DocId,
    text: &str,
) {
    let conversation = chat.conversation_name();
    let busy = match shared.active.lock() {
        Ok(a) if a.contains_key(&chat.chat) => true,
        Ok(mut a) => {
            a.insert(
                chat.chat,
                ActiveTurn {
                    project,
                    conversation: conversation.clone(),
                },
            );
            false
        }
        Err(_) => return,
    };
    if busy {
        let busy = "Still working on the last message — send /stop to cancel it.";
        if let Err(e) = bot.send_message(chat.chat, busy, false, false, None).await {
            tracing::warn!(error = %e, chat = chat.chat, "Telegram reply failed");
        }
        return;
    }
    let started = shared.chat.start_turn(project, &conversation, text);
    let spawned = match started {
        Ok(stream) => {
            let (sh, b, id) = (shared.clone(), bot.clone(), chat.chat);
            let mut turns = shared.turns.lock();
            match turns.as_mut().ok().and_then(|t| t.as_mut()) {
                Some(set) => {
                    while set.try_join_next().is_some() {}
                    set.spawn(turn::stream(sh, b, id, Box::pin(stream)));
                    Ok(())
                }
                // Shutting down: the turn was stopped with the others.
                None => Err("the hub is shutting down".to_string()),
            }
        }
        Err(e) => Err(e.to_string()),
    };
    if let Err(why) = spawned {
        if let Ok(mut a) = shared.active.lock() {
            a.remove(&chat.chat);
        }
        let text = format!("⚠ Could not start: {why}");
        if let Err(e) = bot.send_message(chat.chat, &text, false, false, None).await {
            tracing::warn!(error = %e, chat = chat.chat, "Telegram reply failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::telegram::wire::{Chat, User};

    fn msg(text: Option<&str>, bot: bool) -> Message {
        Message {
            message_id: 1,
            from: Some(User {
                id: 7,
                is_bot: bot,
                first_name: "Ann".into(),
                username: Some("ann".into()),
            }),
            chat: Chat {
                id: 7,
                kind: "private".into(),
                title: None,
                username: Some("ann".into()),
                first_name: Some("Ann".into()),
            },
            text: text.map(str::to_string),
        }
    }

    fn allowed() -> AllowedChat {
        AllowedChat {
            chat: 7,
            label: "me".into(),
            project: None,
            conversation: 1,
            notify: true,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn commands_and_text_are_told_apart() {
        let me = "hearth_bot";
        assert_eq!(intent(&msg(Some("/start"), false), me), Intent::Help);
        assert_eq!(intent(&msg(Some("/help extra"), false), me), Intent::Help);
        assert_eq!(intent(&msg(Some("/STOP"), false), me), Intent::Stop);
        assert_eq!(
            intent(&msg(Some("/new@Hearth_Bot"), false), me),
            Intent::New
        );
        // A command for another bot in a group is not ours.
        assert_eq!(
            intent(&msg(Some("/new@other_bot"), false), me),
            Intent::Ignore
        );
        assert_eq!(
            intent(&msg(Some("/frobnicate"), false), me),
            Intent::Unknown("frobnicate".into())
        );
        assert_eq!(
            intent(&msg(Some("  hello there \n"), false), me),
            Intent::Text("hello there".into())
        );
        assert_eq!(intent(&msg(None, false), me), Intent::NotText);
        assert_eq!(intent(&msg(Some("hi"), true), me), Intent::Ignore);
        assert_eq!(intent(&msg(Some("   "), false), me), Intent::Ignore);
    }

    #[test]
    fn a_chat_off_the_list_is_refused_whatever_it_sends() {
        for i in [
            Intent::Help,
            Intent::Stop,
            Intent::New,
            Intent::Text("delete everything".into()),
            Intent::Unknown("x".into()),
            Intent::NotText,
            Intent::Ignore,
        ] {
            assert_eq!(decide(None, i.clone()), Action::Refuse, "{i:?}");
        }
        let a = allowed();
        assert_eq!(
            decide(Some(&a), Intent::Text("hi".into())),
            Action::Turn("hi".into())
        );
        assert_eq!(decide(Some(&a), Intent::Help), Action::Help);
        assert_eq!(decide(Some(&a), Intent::Stop), Action::Stop);
        assert_eq!(decide(Some(&a), Intent::New), Action::New);
        assert_eq!(decide(Some(&a), Intent::Ignore), Action::Ignore);
    }

    #[test]
    fn a_refused_chat_is_named_for_the_owner() {
        let m = msg(Some("hi"), false);
        assert_eq!(chat_name(&m.chat, m.from.as_ref()), "@ann");
        let group = Chat {
            id: -100,
            kind: "supergroup".into(),
            title: Some("Family".into()),
            username: None,
            first_name: None,
        };
        assert_eq!(chat_name(&group, m.from.as_ref()), "Family");
    }
}
