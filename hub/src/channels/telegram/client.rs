//! The Bot API client: one method per call the hub makes (`getMe`, `getUpdates`,
//! `sendMessage`, `editMessageText`, `answerCallbackQuery`, `sendChatAction`), over the
//! hub's reqwest (rustls with ring), answering the envelope's result or a typed
//! [`BotError`].
//!
//! The token lives in the request URL and nowhere else: never in an error, a log line or
//! a `Debug` output (reqwest's errors print their URL, so every one is stripped with
//! `without_url`, and the token's characters are checked so it cannot bend the URL).

use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use super::wire::{
    AnswerCallbackQuery, EditMessageText, Envelope, GetUpdates, InlineKeyboardMarkup,
    LinkPreviewOptions, Message, SendChatAction, SendMessage, Update, User,
};
use crate::secrets::SecretValue;

/// Seconds a `getUpdates` request is held open by Telegram when nothing is queued.
pub const POLL_TIMEOUT_SECS: u64 = 25;

/// The update kinds the hub asks for.
pub const ALLOWED_UPDATES: &[&str] = &["message", "callback_query"];

/// How long any other call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a Bot API call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BotError {
    /// Telegram could not be reached, or the answer did not arrive (no URL in it).
    #[error("cannot reach Telegram: {0}")]
    Network(String),
    /// Telegram refused the call.
    #[error("Telegram answered {code}: {description}")]
    Api {
        /// `error_code` (an HTTP status).
        code: i64,
        /// `description`.
        description: String,
        /// `parameters.retry_after`, seconds (flood control).
        retry_after: Option<u64>,
    },
    /// The answer was not the Bot API's JSON.
    #[error("unexpected answer from Telegram: {0}")]
    Decode(String),
    /// The token cannot be a bot token.
    #[error("a bot token looks like 123456789:AA… (digits, a colon, letters, digits, _ and -)")]
    BadTokenFormat,
}

impl BotError {
    /// Whether Telegram refused the token itself (401; 404 is what a malformed bot path
    /// gets): polling must stop until the owner sets another.
    pub fn bad_token(&self) -> bool {
        matches!(
            self,
            Self::BadTokenFormat
                | Self::Api {
                    code: 401 | 404,
                    ..
                }
        )
    }

    /// Whether Telegram could not read the HTML (the text is then sent plain).
    pub fn bad_html(&self) -> bool {
        matches!(self, Self::Api { code: 400, description, .. }
            if description.contains("can't parse entities"))
    }

    /// Whether an edit changed nothing (not a failure).
    pub fn not_modified(&self) -> bool {
        matches!(self, Self::Api { code: 400, description, .. }
            if description.contains("message is not modified"))
    }

    /// The wait Telegram asked for, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api {
                retry_after: Some(s),
                ..
            } => Some(Duration::from_secs(*s)),
            _ => None,
        }
    }
}

/// Whether `token` has a bot token's shape (`<digits>:<url-safe characters>`), so it
/// cannot add a path segment, a query or a fragment to the URL it goes into.
pub fn valid_token(token: &str) -> bool {
    let Some((id, secret)) = token.split_once(':') else {
        return false;
    };
    !id.is_empty()
        && id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
        && !secret.is_empty()
        && secret.len() <= 200
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A client of one bot.
pub struct BotApi {
    http: reqwest::Client,
    base: String,
    token: SecretValue,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

const NO_PREVIEW: LinkPreviewOptions = LinkPreviewOptions { is_disabled: true };

impl BotApi {
    /// A client of the bot `token` at `base` (`https://api.telegram.org`).
    pub fn new(base: &str, token: SecretValue) -> Result<Self, BotError> {
        if !valid_token(token.expose()) {
            return Err(BotError::BadTokenFormat);
        }
        // reqwest is built without a crypto provider of its own; use ring, as iroh does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| BotError::Network(e.without_url().to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, BotError> {
        let net = |e: reqwest::Error| BotError::Network(e.without_url().to_string());
        let body = serde_json::to_vec(body).map_err(|e| BotError::Decode(e.to_string()))?;
        let resp = self
            .http
            .post(format!("{}/bot{}/{method}", self.base, self.token.expose()))
            .header("content-type", "application/json")
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(net)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(net)?;
        let envelope: Envelope<T> = match serde_json::from_slice(&bytes) {
            Ok(e) => e,
            Err(_) if !status.is_success() => {
                return Err(BotError::Api {
                    code: i64::from(status.as_u16()),
                    description: format!("HTTP {status}"),
                    retry_after: None,
                })
            }
            Err(e) => return Err(BotError::Decode(format!("{method}: {e}"))),
        };
        if envelope.ok {
            return envelope
                .result
                .ok_or_else(|| BotError::Decode(format!("{method}: ok without a result")));
        }
        Err(BotError::Api {
            code: envelope.error_code.unwrap_or(i64::from(status.as_u16())),
            description: envelope
                .description
                .unwrap_or_else(|| "no description".into()),
            retry_after: envelope.parameters.and_then(|p| p.retry_after),
        })
    }

    /// `getMe`: the bot itself (checks the token).
    pub async fn get_me(&self) -> Result<User, BotError> {
        self.call("getMe", &serde_json::json!({}), CALL_TIMEOUT)
            .await
    }

    /// `getUpdates`: waits up to [`POLL_TIMEOUT_SECS`] for updates from `offset` on.
    pub async fn get_updates(&self, offset: Option<i64>) -> Result<Vec<Update>, BotError> {
        let body = GetUpdates {
            offset,
            timeout: POLL_TIMEOUT_SECS,
            allowed_updates: ALLOWED_UPDATES,
        };
        self.call(
            "getUpdates",
            &body,
            Duration::from_secs(POLL_TIMEOUT_SECS + 15),
        )
        .await
    }

    /// `sendMessage`; `html`: the text is in Telegram's HTML.
    pub async fn send_message(
        &self,
        chat: i64,
        text: &str,
        html: bool,
        quiet: bool,
        buttons: Option<&InlineKeyboardMarkup>,
    ) -> Result<Message, BotError> {
        let body = SendMessage {
            chat_id: chat,
            text,
            parse_mode: html.then_some("HTML"),
            disable_notification: quiet,
            reply_markup: buttons,
            link_preview_options: NO_PREVIEW,
        };
        self.call("sendMessage", &body, CALL_TIMEOUT).await
    }

    /// `sendMessage` of `html`, or of `plain` if Telegram cannot read the HTML.
    pub async fn send_html(
        &self,
        chat: i64,
        html: &str,
        plain: &str,
        quiet: bool,
        buttons: Option<&InlineKeyboardMarkup>,
    ) -> Result<Message, BotError> {
        match self.send_message(chat, html, true, quiet, buttons).await {
            Err(e) if e.bad_html() => self.send_message(chat, plain, false, quiet, buttons).await,
            other => other,
        }
    }

    /// `editMessageText` (buttons not given are removed). An edit that changes nothing
    /// counts as done.
    pub async fn edit_message(
        &self,
        chat: i64,
        message: i64,
        text: &str,
        html: bool,
        buttons: Option<&InlineKeyboardMarkup>,
    ) -> Result<(), BotError> {
        let body = EditMessageText {
            chat_id: chat,
            message_id: message,
            text,
            parse_mode: html.then_some("HTML"),
            reply_markup: buttons,
            link_preview_options: NO_PREVIEW,
        };
        // An edited message comes back as a Message, an inline one as `true`.
        match self
            .call::<_, serde_json::Value>("editMessageText", &body, CALL_TIMEOUT)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.not_modified() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `answerCallbackQuery`, with a short notice or none.
    pub async fn answer_callback(&self, query: &str, text: Option<&str>) -> Result<(), BotError> {
        let body = AnswerCallbackQuery {
            callback_query_id: query,
            text,
        };
        self.call::<_, bool>("answerCallbackQuery", &body, CALL_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `sendChatAction` `typing` (shown for about five seconds).
    pub async fn typing(&self, chat: i64) -> Result<(), BotError> {
        let body = SendChatAction {
            chat_id: chat,
            action: "typing",
        };
        self.call::<_, bool>("sendChatAction", &body, CALL_TIMEOUT)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bot_token_shape_goes_into_a_url() {
        assert!(valid_token("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"));
        assert!(valid_token("1:a_b-c"));
        for bad in [
            "",
            "123456789",
            ":abc",
            "abc:def",
            "123:abc/../getMe",
            "123:abc?x=1",
            "123:abc#frag",
            "123:ab c",
            "123:abc\n",
        ] {
            assert!(!valid_token(bad), "{bad:?}");
        }
    }

    #[test]
    fn errors_say_what_to_do() {
        let unauthorized = BotError::Api {
            code: 401,
            description: "Unauthorized".into(),
            retry_after: None,
        };
        assert!(unauthorized.bad_token());
        let flood = BotError::Api {
            code: 429,
            description: "Too Many Requests: retry after 7".into(),
            retry_after: Some(7),
        };
        assert!(!flood.bad_token());
        assert_eq!(flood.retry_after(), Some(Duration::from_secs(7)));
        let html = BotError::Api {
            code: 400,
            description: "Bad Request: can't parse entities: Unsupported start tag \"x\"".into(),
            retry_after: None,
        };
        assert!(html.bad_html() && !html.not_modified());
    }

    #[tokio::test]
    async fn a_network_error_never_shows_the_token() {
        // Nothing listens on port 9 of loopback: the connection is refused.
        let api = BotApi::new(
            "http://127.0.0.1:9",
            SecretValue::new("424242:SECRET-token_value"),
        )
        .expect("client");
        let err = api.get_me().await.expect_err("refused");
        let shown = format!("{err} {err:?} {api:?}");
        assert!(matches!(err, BotError::Network(_)), "{shown}");
        assert!(!shown.contains("SECRET-token_value"), "{shown}");
        assert!(!shown.contains("424242"), "{shown}");
    }
}
