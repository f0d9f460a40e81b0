//! Message channel routes, the owner's only (not in the relay table: who may talk to the
//! agent is the owner's decision alone, never a paired device's).
//!
//! - `GET /channels/telegram`: `{configured, enabled, token_set, running, bot_username,
//!   error, chats: [{chat, label, project, project_name, notify, conversation}],
//!   refused: [{chat, name, at}]}` (`configured`: a token is stored and a chat allowed)
//! - `PUT /channels/telegram {token?, enabled?}`: a token is checked with Telegram
//!   (`getMe`) before it is stored; one Telegram refuses is a 400 `bad_token`
//! - `PUT /channels/telegram/chats/{chat} {project, label?, notify?}` (project by name
//!   or id), `DELETE /channels/telegram/chats/{chat}`
//!
//! The token is write-only: no answer carries it. The Telegram errors map here (they
//! belong to this route family alone).

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use serde::{Deserialize, Serialize};

use hearth_ui::{ApiRoutes, Verb};

use super::{blocking, ApiError, ApiJson, ApiResult, ApiState};
use crate::channels::telegram::{
    AllowedChat, BotError, Refused, Status, StoreError, TelegramError,
};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("channels")
        .route(
            Verb::Get,
            "/channels/telegram",
            "The Telegram channel: token set, running, bot, chats, refused chats",
            get,
        )
        .route(
            Verb::Put,
            "/channels/telegram",
            "Set the bot token (checked with Telegram) or turn the channel on or off",
            put,
        )
        .route(
            Verb::Put,
            "/channels/telegram/chats/{chat}",
            "Allow a Telegram chat in a project (or change it)",
            put_chat,
        )
        .route(
            Verb::Delete,
            "/channels/telegram/chats/{chat}",
            "Take a Telegram chat off the list",
            delete_chat,
        )
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::internal(e)
    }
}

impl From<TelegramError> for ApiError {
    fn from(e: TelegramError) -> Self {
        match e {
            TelegramError::Bot(b @ BotError::BadTokenFormat) => {
                ApiError::bad_request(b.to_string())
            }
            TelegramError::Bot(b) if b.bad_token() => ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_token",
                format!("Telegram refused this bot token ({b}); copy it again from @BotFather"),
            ),
            TelegramError::Bot(b @ BotError::Network(_)) => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "telegram_unreachable",
                b.to_string(),
            ),
            TelegramError::Bot(b) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "telegram_error", b.to_string())
            }
            other => ApiError::internal(other),
        }
    }
}

#[derive(Debug, Serialize)]
struct ChatDto {
    chat: i64,
    label: String,
    project: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    project_name: Option<String>,
    notify: bool,
    conversation: i64,
    created_at: i64,
    updated_at: i64,
}

#[derive(Debug, Serialize)]
struct StatusDto {
    configured: bool,
    enabled: bool,
    token_set: bool,
    running: bool,
    bot_username: Option<String>,
    error: Option<String>,
    chats: Vec<ChatDto>,
    refused: Vec<Refused>,
}

async fn chat_dto(s: &ApiState, chats: Vec<AllowedChat>) -> Vec<ChatDto> {
    let names = crate::channels::telegram::project_names(&s.store).await;
    chats
        .into_iter()
        .map(|c| {
            let project = c.project.unwrap_or(s.chat.general);
            ChatDto {
                chat: c.chat,
                label: c.label,
                project: project.to_string(),
                project_name: names.get(&project).cloned(),
                notify: c.notify,
                conversation: c.conversation,
                created_at: c.created_at,
                updated_at: c.updated_at,
            }
        })
        .collect()
}

async fn status_dto(s: &ApiState, st: Status) -> StatusDto {
    StatusDto {
        configured: st.token_set && !st.chats.is_empty(),
        enabled: st.enabled,
        token_set: st.token_set,
        running: st.running,
        bot_username: st.bot_username,
        // Whatever Telegram said passes the redactor like every other outside text.
        error: st.error.map(|e| s.chat.agent.redact_text(&e)),
        chats: chat_dto(s, st.chats).await,
        refused: st.refused,
    }
}

async fn get(State(s): State<ApiState>) -> ApiResult<Json<StatusDto>> {
    let st = s.telegram.status().await?;
    Ok(Json(status_dto(&s, st).await))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    token: Option<String>,
    enabled: Option<bool>,
}

async fn put(
    State(s): State<ApiState>,
    ApiJson(b): ApiJson<PutBody>,
) -> ApiResult<Json<StatusDto>> {
    if let Some(token) = b.token.as_deref().map(str::trim) {
        if token.is_empty() {
            return Err(ApiError::bad_request("token is empty"));
        }
        s.telegram.set_token(token).await?;
    }
    if let Some(enabled) = b.enabled {
        s.telegram.set_enabled(enabled).await?;
    }
    let st = s.telegram.status().await?;
    Ok(Json(status_dto(&s, st).await))
}

fn chat_id(given: &str) -> ApiResult<i64> {
    given.parse().map_err(|_| {
        ApiError::bad_request(format!("{given:?} is not a Telegram chat id (a number)"))
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatBody {
    /// A project's name or id.
    project: String,
    label: Option<String>,
    notify: Option<bool>,
}

async fn put_chat(
    State(s): State<ApiState>,
    Path(chat): Path<String>,
    ApiJson(b): ApiJson<ChatBody>,
) -> ApiResult<Json<ChatDto>> {
    let chat = chat_id(&chat)?;
    if b.label
        .as_ref()
        .is_some_and(|l| l.chars().count() > 100 || l.chars().any(char::is_control))
    {
        return Err(ApiError::bad_request(
            "a label is at most 100 characters, no control characters",
        ));
    }
    let project = s.chat.resolve(Some(&b.project)).await?;
    let store = s.telegram.store().clone();
    let allowed =
        blocking(move || store.allow(chat, project, b.label.as_deref(), b.notify)).await?;
    let mut dto = chat_dto(&s, vec![allowed]).await;
    dto.pop()
        .map(Json)
        .ok_or_else(|| ApiError::internal("the allowed chat vanished"))
}

async fn delete_chat(State(s): State<ApiState>, Path(chat): Path<String>) -> ApiResult<StatusCode> {
    let chat = chat_id(&chat)?;
    let store = s.telegram.store().clone();
    if blocking(move || store.deny(chat)).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "chat {chat} is not on the list"
        )))
    }
}
