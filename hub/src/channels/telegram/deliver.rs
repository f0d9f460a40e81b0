//! Notifications on Telegram: every allowed chat that takes them (`notify`) and whose
//! bound project contains the notification's project (every such chat when it has
//! none) gets the title in bold and the body converted and split like an answer,
//! without sound during quiet hours; an approval that waits carries its buttons.
//!
//! Sends only while the poller runs (a token Telegram accepted); never to a chat off the
//! list, and never blocks the notifier (it runs in the notifier's own tasks).

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{
    approvals,
    format::{self, escape_within, tg_len, MESSAGE_LIMIT},
    store::AllowedChat,
    Shared,
};
use crate::{
    channels::{Channel, ChannelError},
    notify::{Notification, NotificationKind},
};

/// The channel as the notifier holds it.
pub(super) struct Notifications(pub(super) Arc<Shared>);

impl Channel for Notifications {
    fn name(&self) -> &'static str {
        super::store::CHANNEL
    }

    fn deliver<'a>(
        &'a self,
        n: &'a Notification,
        quiet: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(deliver(&self.0, n, quiet))
    }
}

fn failed(message: impl std::fmt::Display) -> ChannelError {
    ChannelError::Service {
        channel: super::store::CHANNEL,
        message: message.to_string(),
    }
}

/// The chats `n` goes to: those taking notifications, within its project's reach.
async fn recipients(
    shared: &Arc<Shared>,
    n: &Notification,
) -> Result<Vec<AllowedChat>, ChannelError> {
    let chats = shared.db(|s| s.chats()).await.map_err(failed)?;
    let mut out = Vec::new();
    for chat in chats.into_iter().filter(|c| c.notify) {
        let reaches = match n.project {
            None => true,
            Some(p) => shared.within(shared.project_of(&chat), p).await,
        };
        if reaches {
            out.push(chat);
        }
    }
    Ok(out)
}

async fn deliver(shared: &Arc<Shared>, n: &Notification, quiet: bool) -> Result<(), ChannelError> {
    let bot = shared
        .bot()
        .ok_or(ChannelError::NotConfigured(super::store::CHANNEL))?;
    let chats = recipients(shared, n).await?;
    if chats.is_empty() {
        return Ok(());
    }
    let (title, _) = escape_within(&n.title, 512);
    let title = format!("<b>{title}</b>");
    let mut parts = format::parts(&n.body, MESSAGE_LIMIT - tg_len(&title) - 2);
    if parts.is_empty() {
        parts.push(format::Part {
            html: String::new(),
            plain: String::new(),
        });
    }
    let buttons = match (&n.kind, &n.refs.approval) {
        (NotificationKind::ApprovalWaiting, Some(id)) => approvals::buttons(id),
        _ => None,
    };
    let last = parts.len() - 1;
    let mut failures = Vec::new();
    for chat in &chats {
        for (i, part) in parts.iter().enumerate() {
            let (html, plain) = if i == 0 {
                (
                    format!("{title}\n\n{}", part.html),
                    format!("{}\n\n{}", n.title, part.plain),
                )
            } else {
                (part.html.clone(), part.plain.clone())
            };
            let keys = if i == last { buttons.as_ref() } else { None };
            let sent = bot
                .send_html(chat.chat, html.trim(), plain.trim(), quiet, keys)
                .await;
            if let Err(e) = sent {
                failures.push(format!("chat {}: {e}", chat.chat));
                break;
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failed(failures.join("; ")))
    }
}
