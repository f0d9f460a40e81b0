//! Chat routes: a turn streamed as server-sent events, stopping a turn, approvals.
//!
//! - `POST /chat {message, project?, conversation?}` starts a turn and answers
//!   `text/event-stream`: that conversation's events from the hub's one numbered stream
//!   (the same JSON, `seq` included, that `GET /events` carries), one per `data:` line
//!   (`started`, `text`, `restart`, `tool_call`, `tool_result`, `approval_requested`,
//!   `approval_resolved`, `finished`, or `error` when the turn failed), each carrying
//!   its `project` and `conversation`. A client that loses this response resumes on the
//!   WebSocket with `after=<last seq>`. A project that does not exist is a 404 before
//!   anything streams. (`channel` is accepted as the old name of `conversation`.)
//! - `POST /chat/{conversation}/abort?project=…` stops that conversation's turn.
//!
//! A device relaying these (see `caller`) reaches only its scope: without `project` a
//! scoped device chats in its scope root, not `general`; it lists only its subtree's
//! approvals, and one outside it is not found.
//! - `GET /approvals?waiting=true` (a page), `POST /approvals/{id} {approve, project?,
//!   conversation?}`: the first answer wins (204); later ones get 409
//!   `already_resolved` naming the outcome.

use std::convert::Infallible;

use axum::{
    body::Body,
    extract::{Path, State},
    http::{header, StatusCode},
    response::Response,
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use hearth_ui::{ApiRoutes, Verb};

use super::{caller::Caller, ApiError, ApiJson, ApiQuery, ApiResult, ApiState, Page, PageQuery};
use crate::agent::runner::{Approval, Decided};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("chat")
        .route(
            Verb::Post,
            "/chat",
            "Run a chat turn, streamed as server-sent events",
            chat,
        )
        .route(
            Verb::Post,
            "/chat/{conversation}/abort",
            "Stop a conversation's turn",
            abort,
        )
        .query(&["project"])
        .route(Verb::Get, "/approvals", "List approvals", list_approvals)
        .query(&["waiting", "limit", "offset"])
        .route(
            Verb::Post,
            "/approvals/{id}",
            "Decide an approval (the first answer wins)",
            decide,
        )
}

#[derive(Debug, Deserialize)]
struct ChatBody {
    message: String,
    project: Option<String>,
    conversation: Option<String>,
    channel: Option<String>,
}

async fn chat(
    State(s): State<ApiState>,
    caller: Caller,
    ApiJson(body): ApiJson<ChatBody>,
) -> ApiResult<Response> {
    let project = caller.project(&s, body.project.as_deref()).await?;
    let conversation = body
        .conversation
        .or(body.channel)
        .unwrap_or_else(|| "web".into());
    let events = s.chat.start_turn(project, &conversation, &body.message)?;
    let lines = events.map(|v| Ok::<_, Infallible>(format!("data: {v}\n\n")));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(lines))
        .map_err(ApiError::internal)
}

#[derive(Debug, Deserialize)]
struct ProjectQuery {
    project: Option<String>,
}

async fn abort(
    State(s): State<ApiState>,
    caller: Caller,
    Path(conversation): Path<String>,
    ApiQuery(q): ApiQuery<ProjectQuery>,
) -> ApiResult<StatusCode> {
    let project = caller.project(&s, q.project.as_deref()).await?;
    s.chat.agent.abort(project, &conversation);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
struct ApprovalQuery {
    limit: Option<u32>,
    offset: Option<u32>,
    /// Only the requests still waiting.
    waiting: Option<bool>,
}

#[derive(Debug, Serialize)]
struct ApprovalDto {
    id: String,
    project: String,
    conversation: String,
    tool: String,
    args: Value,
    asked_at: i64,
    /// `waiting`, `approved`, `denied`, `timed_out` or `stopped`.
    status: &'static str,
}

impl From<Approval> for ApprovalDto {
    fn from(a: Approval) -> Self {
        Self {
            status: a.resolution.map(|r| r.as_str()).unwrap_or("waiting"),
            id: a.id,
            project: a.project.to_string(),
            conversation: a.conversation,
            tool: a.tool,
            args: a.args,
            asked_at: a.asked_at,
        }
    }
}

async fn list_approvals(
    State(s): State<ApiState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ApprovalQuery>,
) -> ApiResult<Page<ApprovalDto>> {
    let reach = caller.reach(&s.store).await?;
    let mut all = s.chat.agent.approvals();
    all.retain(|a| {
        reach.contains(&a.project) && (q.waiting != Some(true) || a.resolution.is_none())
    });
    all.reverse(); // newest first
    let page = PageQuery {
        limit: q.limit,
        offset: q.offset,
    };
    Ok(Page::from_all(all, &page)?.map(ApprovalDto::from))
}

#[derive(Debug, Deserialize)]
struct Decision {
    approve: bool,
    /// With `conversation`: decide only if the approval belongs to it.
    project: Option<String>,
    conversation: Option<String>,
}

async fn decide(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(d): ApiJson<Decision>,
) -> ApiResult<StatusCode> {
    let unknown = || ApiError::not_found(format!("no approval {id} (in this conversation)"));
    // An approval outside a scoped device's subtree does not exist for it.
    if caller.scope_root().is_some() {
        let reach = caller.reach(&s.store).await?;
        let mine = s
            .chat
            .agent
            .approvals()
            .iter()
            .any(|a| a.id == id && reach.contains(&a.project));
        if !mine {
            return Err(unknown());
        }
    }
    let bound = match &d.conversation {
        Some(c) => Some((caller.project(&s, d.project.as_deref()).await?, c.as_str())),
        None => None,
    };
    match s.chat.agent.decide(&id, bound, d.approve) {
        Decided::Now => Ok(StatusCode::NO_CONTENT),
        Decided::Already(r) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_resolved",
            format!("approval {id} was already resolved: {}", r.as_str()),
        )),
        Decided::Unknown => Err(unknown()),
    }
}
