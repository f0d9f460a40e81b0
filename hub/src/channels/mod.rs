//! Message channels: ways to talk to the agent from outside the hub's own UI (Telegram
//! first; Slack or Signal implement the same [`Channel`] later). A channel serves only
//! the chats the owner allowed (`channel_chats` in `hub.db`), each bound to a project,
//! runs its turns through [`crate::chat::ChatService`] like every other front end, and
//! receives the owner's notifications.
//!
//! Owns the interface only; each channel's module owns its protocol. A channel never
//! answers a chat that is not on its list and never holds a secret outside
//! [`crate::secrets::SecretStore`].

pub mod telegram;

use futures_util::future::BoxFuture;

use crate::notify::Notification;

/// Why a channel could not deliver.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The service refused or failed the request.
    #[error("{channel}: {message}")]
    Service {
        /// Channel name.
        channel: &'static str,
        /// What went wrong, in words.
        message: String,
    },
    /// The channel is not configured (no token, no chat takes notifications).
    #[error("{0} is not configured")]
    NotConfigured(&'static str),
}

/// A message channel, as the notifier sees it.
pub trait Channel: Send + Sync + 'static {
    /// Its name (`telegram`), as stored in `channel_chats.channel`.
    fn name(&self) -> &'static str;

    /// Sends `n` to every allowed chat of this channel that takes notifications;
    /// `quiet`: during the owner's quiet hours, so without sound where the service can.
    fn deliver<'a>(
        &'a self,
        n: &'a Notification,
        quiet: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>>;
}
