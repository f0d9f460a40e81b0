//! What the agent recorded, per project: conversations and their messages (history
//! paged backwards, archive and restore), the audit log (filtered by project, tool and
//! time), daily usage (by model and project), project updates. Reads through
//! `Agent::records` and `agent::records`; no SQL here.
//!
//! - `GET /projects/{project}/conversations?archived=&limit=&offset=` (each with a
//!   `title`: the start of its first message, one line, for lists)
//! - `GET /projects/{project}/conversations/{conversation}/messages?limit=&offset=`
//!   (newest first)
//! - `PATCH /projects/{project}/conversations/{conversation} {archived}`
//! - `GET /audit?project=&tool=&since=&until=&limit=&offset=` (`since`/`until` in ms)
//! - `GET /usage?project=&model=&since=&until=&limit=&offset=` (days, `YYYY-MM-DD`;
//!   each row's `cost_micro_usd` is an estimate, `priced` says whether the model has one)
//! - `GET /updates?project=&limit=&offset=`
//!
//! A device relaying these (see `caller`) reaches only its scope's projects: a scoped
//! device names a project of its subtree in the path, and lists usage one project of its
//! subtree at a time (`project=` is required of it). The audit log is not open to it.

use axum::{
    extract::{Path, State},
    Json,
};
use hearth_sync::DocId;
use hearth_ui::{ApiRoutes, Verb};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    blocking, caller::Caller, ApiError, ApiJson, ApiQuery, ApiResult, ApiState, Page, PageQuery,
};
use crate::agent::records::{self, AuditFilter, RowPage, UsageFilter, Window};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("records")
        .route(
            Verb::Get,
            "/projects/{project}/conversations",
            "List a project's conversations",
            list_conversations,
        )
        .query(&["archived", "limit", "offset"])
        .route(
            Verb::Get,
            "/projects/{project}/conversations/{conversation}/messages",
            "Read a conversation's messages, newest first",
            list_messages,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Patch,
            "/projects/{project}/conversations/{conversation}",
            "Archive or restore a conversation",
            patch_conversation,
        )
        .route(Verb::Get, "/audit", "Read the audit log", list_audit)
        .query(&["project", "tool", "since", "until", "limit", "offset"])
        .route(
            Verb::Get,
            "/usage",
            "Daily usage by model and project",
            list_usage,
        )
        .query(&["project", "model", "since", "until", "limit", "offset"])
        .route(Verb::Get, "/updates", "Project updates", list_updates)
        .query(&["project", "limit", "offset"])
}

fn window(limit: Option<u32>, offset: Option<u32>) -> ApiResult<Window> {
    let (limit, offset) = PageQuery { limit, offset }.bounds()?;
    Ok(Window { limit, offset })
}

fn page<T, U>(p: RowPage<T>, w: Window, f: impl FnMut(T) -> U) -> Page<U> {
    Page {
        data: p.rows.into_iter().map(f).collect(),
        total: p.total,
        limit: w.limit,
        offset: w.offset,
    }
}

fn project_filter(given: Option<String>) -> ApiResult<Option<String>> {
    given
        .map(|p| p.parse::<DocId>().map(|id| id.to_string()))
        .transpose()
        .map_err(ApiError::from)
}

#[derive(Debug, Deserialize)]
struct ConversationQuery {
    #[serde(default)]
    archived: bool,
    limit: Option<u32>,
    offset: Option<u32>,
}

#[derive(Debug, Serialize)]
struct ConversationDto {
    name: String,
    /// The start of the first message, on one line; null if it holds no text.
    title: Option<String>,
    messages: u64,
    started_at: i64,
    last_at: i64,
    archived: bool,
    archived_at: Option<i64>,
}

async fn list_conversations(
    State(state): State<ApiState>,
    caller: Caller,
    Path(given): Path<String>,
    ApiQuery(q): ApiQuery<ConversationQuery>,
) -> ApiResult<Page<ConversationDto>> {
    let w = window(q.limit, q.offset)?;
    let project = caller.project_id(&state, &given).await?.to_string();
    let agent = state.chat.agent.clone();
    let rows =
        blocking(move || agent.records(|c| records::conversations(c, &project, q.archived, w)))
            .await?;
    Ok(page(rows, w, |c| ConversationDto {
        title: c.opening.as_ref().and_then(title_of),
        name: c.name,
        messages: c.messages,
        started_at: c.started_at,
        last_at: c.last_at,
        archived: c.archived_at.is_some(),
        archived_at: c.archived_at,
    }))
}

/// Longest title, in characters, before it is cut with an ellipsis.
const TITLE_CHARS: usize = 80;

/// A conversation's title from its first message's stored content: the text parts
/// joined, whitespace folded to single spaces, cut at [`TITLE_CHARS`].
fn title_of(opening: &Value) -> Option<String> {
    let text = match opening {
        Value::String(raw) => raw.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.is_empty() {
        return None;
    }
    if folded.chars().count() <= TITLE_CHARS {
        return Some(folded);
    }
    let cut: String = folded.chars().take(TITLE_CHARS - 1).collect();
    Some(format!("{}…", cut.trim_end()))
}

#[derive(Debug, Deserialize)]
struct WindowQuery {
    limit: Option<u32>,
    offset: Option<u32>,
}

#[derive(Debug, Serialize)]
struct MessageDto {
    id: i64,
    role: String,
    content: Value,
    created_at: i64,
}

async fn list_messages(
    State(state): State<ApiState>,
    caller: Caller,
    Path((given, conversation)): Path<(String, String)>,
    ApiQuery(q): ApiQuery<WindowQuery>,
) -> ApiResult<Page<MessageDto>> {
    let w = window(q.limit, q.offset)?;
    let project = caller.project_id(&state, &given).await?.to_string();
    let agent = state.chat.agent.clone();
    let name = conversation.clone();
    let rows =
        blocking(move || agent.records(|c| records::messages(c, &project, &name, w))).await?;
    if rows.total == 0 {
        return Err(ApiError::not_found(format!(
            "no conversation {conversation:?} in this project"
        )));
    }
    Ok(page(rows, w, |m| MessageDto {
        id: m.id,
        role: m.role,
        content: m.content,
        created_at: m.created_at,
    }))
}

#[derive(Debug, Deserialize)]
struct ConversationPatch {
    archived: bool,
}

async fn patch_conversation(
    State(state): State<ApiState>,
    caller: Caller,
    Path((given, conversation)): Path<(String, String)>,
    ApiJson(body): ApiJson<ConversationPatch>,
) -> ApiResult<Json<Value>> {
    let project = caller.project_id(&state, &given).await?.to_string();
    let agent = state.chat.agent.clone();
    let name = conversation.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let found = blocking(move || {
        agent.records(|c| {
            if !records::conversation_exists(c, &project, &name)? {
                return Ok(false);
            }
            records::set_archived(c, &project, &name, body.archived, now)?;
            Ok(true)
        })
    })
    .await?;
    if !found {
        return Err(ApiError::not_found(format!(
            "no conversation {conversation:?} in this project"
        )));
    }
    Ok(Json(
        serde_json::json!({ "name": conversation, "archived": body.archived }),
    ))
}

#[derive(Debug, Deserialize)]
struct AuditQuery {
    project: Option<String>,
    tool: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    limit: Option<u32>,
    offset: Option<u32>,
}

#[derive(Debug, Serialize)]
struct AuditDto {
    id: i64,
    at: i64,
    conversation: String,
    project: String,
    tool: String,
    args: Value,
    outcome: String,
    is_error: bool,
}

async fn list_audit(
    State(state): State<ApiState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<Page<AuditDto>> {
    let w = window(q.limit, q.offset)?;
    let filter = AuditFilter {
        project: project_filter(q.project)?,
        tool: q.tool,
        since: q.since,
        until: q.until,
    };
    let agent = state.chat.agent.clone();
    let rows = blocking(move || agent.records(|c| records::audit(c, &filter, w))).await?;
    Ok(page(rows, w, |a| AuditDto {
        id: a.id,
        at: a.at,
        conversation: a.conversation,
        project: a.project,
        tool: a.tool,
        args: a.args,
        outcome: a.outcome,
        is_error: a.is_error,
    }))
}

#[derive(Debug, Deserialize)]
struct UsageQuery {
    project: Option<String>,
    model: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
}

#[derive(Debug, Serialize)]
struct UsageDto {
    day: String,
    model: String,
    project: String,
    input_tokens: i64,
    output_tokens: i64,
    cached_tokens: i64,
    requests: i64,
    /// Estimated from the hub's price table; 0 and `priced: false` when the model is not
    /// in it (the cost is unknown, not zero).
    cost_micro_usd: i64,
    priced: bool,
}

fn day(field: &str, given: Option<String>) -> ApiResult<Option<String>> {
    let Some(d) = given else { return Ok(None) };
    let b = d.as_bytes();
    let ok = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
    if !ok {
        return Err(ApiError::bad_request(format!(
            "{field} must be a day, YYYY-MM-DD, not {d:?}"
        )));
    }
    Ok(Some(d))
}

async fn list_usage(
    State(state): State<ApiState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> ApiResult<Page<UsageDto>> {
    let w = window(q.limit, q.offset)?;
    let filter = UsageFilter {
        project: caller.project_filter(&state, q.project).await?,
        model: q.model,
        since: day("since", q.since)?,
        until: day("until", q.until)?,
    };
    let agent = state.chat.agent.clone();
    let rows = blocking(move || agent.records(|c| records::usage(c, &filter, w))).await?;
    Ok(page(rows, w, |u| UsageDto {
        priced: crate::agent::usage::priced(&u.model),
        day: u.day,
        model: u.model,
        project: u.project,
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cached_tokens: u.cached_tokens,
        requests: u.requests,
        cost_micro_usd: u.cost_micro_usd,
    }))
}

#[derive(Debug, Deserialize)]
struct UpdatesQuery {
    project: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
}

#[derive(Debug, Serialize)]
struct UpdateDto {
    id: i64,
    project: String,
    task: Option<String>,
    text: String,
    created_at: i64,
}

async fn list_updates(
    State(state): State<ApiState>,
    ApiQuery(q): ApiQuery<UpdatesQuery>,
) -> ApiResult<Page<UpdateDto>> {
    let w = window(q.limit, q.offset)?;
    let project = project_filter(q.project)?;
    let agent = state.chat.agent.clone();
    let rows =
        blocking(move || agent.records(|c| records::updates(c, project.as_deref(), w))).await?;
    Ok(page(rows, w, |u| UpdateDto {
        id: u.id,
        project: u.project,
        task: u.task,
        text: u.text,
        created_at: u.created_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_title_is_the_first_messages_text_on_one_line_and_cut() {
        let parts = json!([{"type": "text", "text": "  plan\n my\tday  "}]);
        assert_eq!(title_of(&parts).as_deref(), Some("plan my day"));
        let long = "word ".repeat(40);
        let cut = title_of(&json!([{"type": "text", "text": long}])).expect("a title");
        assert_eq!(cut.chars().count(), TITLE_CHARS, "{cut}");
        assert!(cut.ends_with("word…"), "{cut}");
        // Tool results carry no title; raw text (not JSON) is used as it is.
        let results = json!([{"type": "tool_result", "id": "t", "content": "x"}]);
        assert_eq!(title_of(&results), None);
        assert_eq!(title_of(&json!("raw text")).as_deref(), Some("raw text"));
        assert_eq!(title_of(&json!([{"type": "text", "text": " \n "}])), None);
    }
}
