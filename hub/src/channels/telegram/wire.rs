//! The Bot API's JSON, as serde types: the envelope every answer comes in
//! (`{"ok":true,"result":…}` or `{"ok":false,"error_code":…,"description":…,
//! "parameters":{"retry_after":…}}`), the parts of an update the hub reads, and the
//! bodies of the methods it calls.
//!
//! Only fields the hub uses are declared; unknown ones are ignored, so a newer Bot API
//! never breaks decoding. Holds no logic and never the token.

use serde::{Deserialize, Serialize};

/// Every answer of the Bot API.
#[derive(Debug, Deserialize)]
pub struct Envelope<T> {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The method's result when `ok`.
    pub result: Option<T>,
    /// The error code when not `ok` (an HTTP status: 400, 401, 403, 409, 429…).
    pub error_code: Option<i64>,
    /// The error in words.
    pub description: Option<String>,
    /// What to do about the error.
    pub parameters: Option<ResponseParameters>,
}

/// Advice attached to an error.
#[derive(Debug, Deserialize)]
pub struct ResponseParameters {
    /// Seconds to wait before the next request (flood control, 429).
    pub retry_after: Option<u64>,
}

/// A Telegram user or bot.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Its id.
    pub id: i64,
    /// Whether it is a bot.
    #[serde(default)]
    pub is_bot: bool,
    /// First name.
    #[serde(default)]
    pub first_name: String,
    /// `@username`, without the `@`.
    pub username: Option<String>,
}

/// A chat: private, group, supergroup or channel.
#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    /// Its id (negative for groups).
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// A group's title.
    pub title: Option<String>,
    /// A private chat's or public group's username.
    pub username: Option<String>,
    /// A private chat's first name.
    pub first_name: Option<String>,
}

/// A message (only what the hub reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Its id within the chat.
    pub message_id: i64,
    /// Its sender (absent in channels).
    pub from: Option<User>,
    /// Its chat.
    pub chat: Chat,
    /// Its text, for text messages.
    pub text: Option<String>,
}

/// A button pressed under one of the bot's messages.
#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    /// Its id, for `answerCallbackQuery`.
    pub id: String,
    /// Who pressed it.
    pub from: User,
    /// The message the button is under (absent for inline-mode messages).
    pub message: Option<Message>,
    /// The button's `callback_data`.
    pub data: Option<String>,
}

/// One update from `getUpdates`.
#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    /// Its number; the next poll's `offset` is the highest seen plus one.
    pub update_id: i64,
    /// A new message.
    pub message: Option<Message>,
    /// A button press.
    pub callback_query: Option<CallbackQuery>,
}

/// `getUpdates`.
#[derive(Debug, Serialize)]
pub struct GetUpdates {
    /// The first update wanted (confirms every earlier one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Seconds the request is held open when nothing is queued.
    pub timeout: u64,
    /// The kinds of update wanted.
    pub allowed_updates: &'static [&'static str],
}

/// An inline keyboard under a message.
#[derive(Debug, Clone, Serialize)]
pub struct InlineKeyboardMarkup {
    /// Rows of buttons.
    pub inline_keyboard: Vec<Vec<InlineKeyboardButton>>,
}

/// A button that sends `callback_data` back when pressed.
#[derive(Debug, Clone, Serialize)]
pub struct InlineKeyboardButton {
    /// Its label.
    pub text: String,
    /// What comes back (1-64 bytes).
    pub callback_data: String,
}

/// Link previews off: a reply is text, not a card for the first URL in it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LinkPreviewOptions {
    /// Always true here.
    pub is_disabled: bool,
}

/// `sendMessage`.
#[derive(Debug, Serialize)]
pub struct SendMessage<'a> {
    /// The chat.
    pub chat_id: i64,
    /// 1-4096 characters after entities are parsed.
    pub text: &'a str,
    /// `HTML`, or none for plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'static str>,
    /// Without sound (quiet hours).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_notification: bool,
    /// Buttons under it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<&'a InlineKeyboardMarkup>,
    /// Previews off.
    pub link_preview_options: LinkPreviewOptions,
}

/// `editMessageText` (without `reply_markup` the buttons are removed).
#[derive(Debug, Serialize)]
pub struct EditMessageText<'a> {
    /// The chat.
    pub chat_id: i64,
    /// The message.
    pub message_id: i64,
    /// Its new text.
    pub text: &'a str,
    /// `HTML`, or none for plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'static str>,
    /// Buttons to keep under it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<&'a InlineKeyboardMarkup>,
    /// Previews off.
    pub link_preview_options: LinkPreviewOptions,
}

/// `answerCallbackQuery`.
#[derive(Debug, Serialize)]
pub struct AnswerCallbackQuery<'a> {
    /// The query.
    pub callback_query_id: &'a str,
    /// A short notice shown to the presser, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
}

/// `sendChatAction`.
#[derive(Debug, Serialize)]
pub struct SendChatAction {
    /// The chat.
    pub chat_id: i64,
    /// `typing`.
    pub action: &'static str,
}
