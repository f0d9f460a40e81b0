//! Notification routes: what the owner was told while away (a scheduled run's result, a
//! failed run, an approval that waits, a task that fell due), and marking it read.
//!
//! - `GET /notifications?unread=&limit=&offset=` answers a page, newest first
//!   (`unread=true`: only the unread ones), with one more field beside the page's own:
//!   `unread`, how many of the caller's notifications are unread whatever the filter (a
//!   bell's count, in the same answer the list comes in).
//! - `POST /notifications/read` `{ids: [..]}` or `{all: true}` marks them read and
//!   answers `{marked, unread}`; an id the caller may not see, or already read, marks
//!   nothing. Other open UIs learn of it from a `notifications_read` event.
//!
//! A device relaying these (see `caller`) reaches only what its grant reaches: a scoped
//! device lists and marks only its subtree's notifications, never one tied to no
//! project; a full-scope device and the owner see them all. Notifications themselves are
//! made by the hub alone (`notify`): there is no route that creates one.

use axum::extract::State;
use serde::{Deserialize, Serialize};

use hearth_ui::{ApiRoutes, Verb};

use super::{
    blocking,
    caller::{Caller, Reach},
    ApiError, ApiJson, ApiQuery, ApiResult, ApiState, Page, PageQuery,
};
use crate::notify::{Audience, MarkRead, NotificationRefs, StoredNotification};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("notifications")
        .route(
            Verb::Get,
            "/notifications",
            "List notifications, newest first, with the unread count",
            list,
        )
        .query(&["unread", "limit", "offset"])
        .route(
            Verb::Post,
            "/notifications/read",
            "Mark notifications read ({ids} or {all: true})",
            mark_read,
        )
}

/// One notification as the API shows it.
#[derive(Debug, Serialize)]
struct NotificationDto {
    id: i64,
    /// `run_finished`, `run_failed`, `approval_waiting`, `task_due`.
    kind: String,
    title: String,
    body: String,
    project: Option<String>,
    /// `{schedule?, run?, approval?, conversation?, task?}`.
    refs: NotificationRefs,
    /// Made during quiet hours (listed, not announced).
    quiet: bool,
    created_at: i64,
    read_at: Option<i64>,
}

impl From<StoredNotification> for NotificationDto {
    fn from(n: StoredNotification) -> Self {
        Self {
            id: n.id,
            kind: n.kind,
            title: n.title,
            body: n.body,
            project: n.project,
            refs: n.refs,
            quiet: n.quiet,
            created_at: n.created_at,
            read_at: n.read_at,
        }
    }
}

/// A page of notifications and the caller's unread count.
#[derive(Debug, Serialize)]
struct NotificationPage {
    #[serde(flatten)]
    page: Page<NotificationDto>,
    unread: u64,
}

impl axum::response::IntoResponse for NotificationPage {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self).into_response()
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    unread: Option<bool>,
    limit: Option<u32>,
    offset: Option<u32>,
}

/// The notifications `caller` may see.
async fn audience(s: &ApiState, caller: &Caller) -> ApiResult<Audience> {
    Ok(match caller.reach(&s.store).await? {
        Reach::All => Audience::Everyone,
        Reach::Projects(p) => Audience::Projects(p.into_iter().collect()),
    })
}

async fn list(
    State(s): State<ApiState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<NotificationPage> {
    let (limit, offset) = PageQuery {
        limit: q.limit,
        offset: q.offset,
    }
    .bounds()?;
    let who = audience(&s, &caller).await?;
    let store = s.notifier.store().clone();
    let unread_only = q.unread.unwrap_or(false);
    let found = blocking(move || store.list(&who, unread_only, limit, offset)).await?;
    Ok(NotificationPage {
        page: Page {
            data: found.rows.into_iter().map(NotificationDto::from).collect(),
            total: found.total,
            limit,
            offset,
        },
        unread: found.unread,
    })
}

/// `{ids: [..]}` or `{all: true}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadBody {
    ids: Option<Vec<i64>>,
    all: Option<bool>,
}

#[derive(Debug, Serialize)]
struct ReadAnswer {
    /// How many changed from unread to read.
    marked: u64,
    /// How many of the caller's are still unread.
    unread: u64,
}

/// The most ids one request may name.
const MAX_IDS: usize = 500;

async fn mark_read(
    State(s): State<ApiState>,
    caller: Caller,
    ApiJson(body): ApiJson<ReadBody>,
) -> ApiResult<axum::Json<ReadAnswer>> {
    let which = match (body.ids, body.all) {
        (Some(ids), None | Some(false)) if !ids.is_empty() && ids.len() <= MAX_IDS => {
            MarkRead::Ids(ids)
        }
        (Some(ids), None | Some(false)) if !ids.is_empty() => {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_IDS} ids at once, not {}",
                ids.len()
            )))
        }
        (None, Some(true)) => MarkRead::All,
        _ => {
            return Err(ApiError::bad_request(
                "say which: {\"ids\": [1, 2]} or {\"all\": true}",
            ))
        }
    };
    let who = audience(&s, &caller).await?;
    let (marked, unread) = s.notifier.mark_read(who, which).await?;
    Ok(axum::Json(ReadAnswer { marked, unread }))
}
