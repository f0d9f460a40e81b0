//! Owner access routes, the same on hub and node: login links, the login itself, and
//! browser sessions. Paths are relative to the API root.
//!
//! - `POST /auth/links {ttl_secs?}`: a one-time login link (owner only; `hearth-hub open`
//!   and `hearth open` call it), `{ "url", "expires_at" }`.
//! - `GET /auth/login?link=…` (public, single use): opens a session and sets this
//!   server's HttpOnly, SameSite=Strict cookie, then redirects to `/`.
//! - `GET /auth/sessions` (a page, `current` marks the caller's), `DELETE
//!   /auth/sessions/{id}`, `POST /auth/logout` (ends the caller's session).

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Extension, Json,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking,
    guard::{Access, Principal},
    owner::{OwnerError, SessionInfo, LINK_LIFETIME, SESSION_LIFETIME},
};
use crate::{ApiError, ApiQuery, ApiResult, ApiRoutes, Page, PageQuery, Verb, API_ROOT};

/// The login route, relative to the API root (public: the link is the credential).
pub const LOGIN_PATH: &str = "/auth/login";

/// The auth routes over `access`; merge them into routes of any state.
pub fn routes<S: Clone + Send + Sync + 'static>(access: Arc<Access>) -> ApiRoutes<S> {
    ApiRoutes::new("auth")
        .route(
            Verb::Post,
            "/auth/links",
            "Create a one-time login link",
            create_link,
        )
        .route(
            Verb::Get,
            LOGIN_PATH,
            "Redeem a login link (sets the session cookie)",
            login,
        )
        .query(&["link"])
        .route(
            Verb::Get,
            "/auth/sessions",
            "List browser sessions",
            list_sessions,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Delete,
            "/auth/sessions/{id}",
            "End a browser session",
            end_session,
        )
        .route(
            Verb::Post,
            "/auth/logout",
            "End this browser session",
            logout,
        )
        .with_state(access)
}

impl From<OwnerError> for ApiError {
    fn from(e: OwnerError) -> Self {
        let msg = e.to_string();
        match e {
            OwnerError::LinkUnknown(_) => ApiError::new(StatusCode::UNAUTHORIZED, "bad_link", msg),
            OwnerError::LinkUsed(_) | OwnerError::LinkExpired(_) => ApiError::gone(msg),
            OwnerError::NoSession(_) => ApiError::not_found(msg),
            OwnerError::Invalid(_) => ApiError::bad_request(msg),
            other => ApiError::internal(other),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct LinkBody {
    /// Seconds the link stays valid (1 to 600; default 120).
    ttl_secs: Option<u64>,
}

#[derive(Debug, Serialize)]
struct LinkDto {
    url: String,
    expires_at: i64,
}

async fn create_link(
    State(access): State<Arc<Access>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<LinkDto>> {
    // The body is optional: an empty POST asks for the default lifetime.
    let body: LinkBody = if body.iter().all(u8::is_ascii_whitespace) {
        LinkBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    let ttl = match body.ttl_secs {
        None => LINK_LIFETIME,
        Some(secs @ 1..=600) => std::time::Duration::from_secs(secs),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "ttl_secs must be 1 to 600, not {other}"
            )))
        }
    };
    // The guard checked that Host names this server.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    let sessions = access.sessions().clone();
    let (secret, expires_at) = blocking(move || sessions.create_link(ttl)).await?;
    Ok(Json(LinkDto {
        url: format!("http://{host}{API_ROOT}{LOGIN_PATH}?link={secret}"),
        expires_at,
    }))
}

#[derive(Debug, Deserialize)]
struct LoginQuery {
    link: String,
}

async fn login(
    State(access): State<Arc<Access>>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<LoginQuery>,
) -> ApiResult<Response> {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let sessions = access.sessions().clone();
    let session = blocking(move || sessions.redeem_link(&q.link, &agent)).await?;
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        access.cookie_name(),
        session.token,
        SESSION_LIFETIME.as_secs()
    );
    let cookie = HeaderValue::from_str(&cookie).map_err(ApiError::internal)?;
    tracing::info!(session = %session.id, "owner logged in with a login link");
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    resp.headers_mut().insert(header::SET_COOKIE, cookie);
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

#[derive(Debug, Serialize)]
struct SessionDto {
    id: String,
    created_at: i64,
    last_used: i64,
    expires_at: i64,
    user_agent: String,
    /// Whether this is the session making the request.
    current: bool,
}

fn dto(s: SessionInfo, principal: &Option<Extension<Principal>>) -> SessionDto {
    let current = matches!(principal, Some(Extension(Principal::Session(id))) if *id == s.id);
    SessionDto {
        current,
        id: s.id,
        created_at: s.created_at,
        last_used: s.last_used,
        expires_at: s.expires_at,
        user_agent: s.user_agent,
    }
}

async fn list_sessions(
    State(access): State<Arc<Access>>,
    principal: Option<Extension<Principal>>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<SessionDto>> {
    let sessions = access.sessions().clone();
    let all = blocking(move || sessions.list()).await?;
    Ok(Page::from_all(all, &q)?.map(|x| dto(x, &principal)))
}

async fn end_session(
    State(access): State<Arc<Access>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let sessions = access.sessions().clone();
    let ended = blocking(move || sessions.end(&id)).await?;
    tracing::info!(session = %ended.id, "owner session ended");
    Ok(StatusCode::NO_CONTENT)
}

async fn logout(
    State(access): State<Arc<Access>>,
    principal: Option<Extension<Principal>>,
) -> ApiResult<Response> {
    let Some(Extension(Principal::Session(id))) = principal else {
        return Err(ApiError::bad_request(
            "logout ends a browser session; this request used the owner token",
        ));
    };
    let sessions = access.sessions().clone();
    blocking(move || sessions.end(&id)).await?;
    let clear = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        access.cookie_name()
    );
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&clear).map_err(ApiError::internal)?,
    );
    Ok(resp)
}
