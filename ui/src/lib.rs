//! hearth-ui: the document API that hub and node both mount (the web front end joins it
//! in a later issue), and the answer shapes every Hearth API shares ([`api`]).
//!
//! [`router`] maps JSON over HTTP onto the [`DocumentStore`], with paths relative to the
//! API root: the hub nests it at `/api/v1` behind its access guard (a node will do the
//! same). It has its own serializable transfer types, converted by hand from the store's
//! types, so store internals never derive `Serialize`.
//!
//! Architecture Invariant: the UI never opens SQLite itself; it only calls the store.
//! It decides nothing about access: whoever mounts it guards it.

pub mod api;

pub use api::{ApiError, ApiJson, ApiQuery, ApiResult, Page, PageQuery};

use axum::{
    extract::{Path, State},
    http::StatusCode,
    routing::get,
    Json, Router,
};
use hearth_sync::{
    store::Listed, DocId, DocumentStore, Filter, Kind, Note, NotePatch, Record, StoreError, Task,
    TaskPatch, TaskStatus, TextEdit,
};
use serde::{Deserialize, Serialize};

/// The path of the health route, relative to the API root: the one route that needs no
/// credential.
pub const HEALTH_PATH: &str = "/health";

/// The document routes over `store`, relative to the API root (`/health`, `/notes`,
/// `/tasks`, `/search`); merge it into a router of any state.
pub fn router<S: Clone + Send + Sync + 'static>(store: DocumentStore) -> Router<S> {
    Router::new()
        .route(HEALTH_PATH, get(health))
        .route("/notes", get(list_notes).post(create_note))
        .route(
            "/notes/{id}",
            get(get_note).patch(patch_note).delete(delete_note),
        )
        .route("/tasks", get(list_tasks).post(create_task))
        .route(
            "/tasks/{id}",
            get(get_task).patch(patch_task).delete(delete_task),
        )
        .route("/search", get(search))
        .with_state(store)
}

type JsonResult<T> = Result<Json<T>, ApiError>;

fn parse_id(s: &str) -> Result<DocId, ApiError> {
    s.parse().map_err(ApiError::from)
}

fn parse_opt_id(s: &Option<String>) -> Result<Option<DocId>, ApiError> {
    s.as_deref().map(parse_id).transpose()
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

/// A listed entity.
#[derive(Debug, Serialize)]
pub struct ListedDto {
    id: String,
    kind: &'static str,
    title: String,
    project: Option<String>,
    status: Option<String>,
    due: Option<String>,
    parent: Option<String>,
    deleted: bool,
    updated_at: i64,
}

impl From<Listed> for ListedDto {
    fn from(l: Listed) -> Self {
        Self {
            id: l.id.to_string(),
            kind: l.kind.as_str(),
            title: l.title,
            project: l.project.map(|p| p.to_string()),
            status: l.status,
            due: l.due,
            parent: l.parent.map(|p| p.to_string()),
            deleted: l.deleted,
            updated_at: l.updated_at,
        }
    }
}

/// Query of list endpoints.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    project: Option<String>,
    status: Option<String>,
    parent: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn list(store: DocumentStore, kind: Kind, q: ListQuery) -> ApiResult<Page<ListedDto>> {
    let (limit, offset) = PageQuery {
        limit: q.limit,
        offset: q.offset,
    }
    .bounds()?;
    let filter = Filter {
        project: parse_opt_id(&q.project)?,
        parent: parse_opt_id(&q.parent)?,
        status: q.status,
        limit,
        offset,
        ..Filter::new(kind)
    };
    let page = store.list(filter).await?;
    Ok(Page {
        data: page.data.into_iter().map(ListedDto::from).collect(),
        total: page.total,
        limit,
        offset: page.offset,
    })
}

/// A note.
#[derive(Debug, Serialize)]
pub struct NoteDto {
    id: String,
    project: Option<String>,
    title: String,
    content: String,
    created_at: i64,
    updated_at: i64,
}

impl From<Record<Note>> for NoteDto {
    fn from(r: Record<Note>) -> Self {
        Self {
            id: r.id.to_string(),
            project: r.value.project.map(|p| p.to_string()),
            title: r.value.title,
            content: r.value.content,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Body of `POST /notes`.
#[derive(Debug, Deserialize)]
pub struct NewNoteDto {
    title: String,
    #[serde(default)]
    content: String,
    project: Option<String>,
}

/// A text edit in a PATCH body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextEditDto {
    /// Replace the whole text.
    Replace(String),
    /// Append at the end.
    Append(String),
    /// Splice at a character position.
    Splice {
        /// Position in characters.
        pos: usize,
        /// Characters to delete.
        #[serde(default)]
        delete: usize,
        /// Text to insert.
        #[serde(default)]
        insert: String,
    },
}

impl From<TextEditDto> for TextEdit {
    fn from(e: TextEditDto) -> Self {
        match e {
            TextEditDto::Replace(s) => TextEdit::Replace(s),
            TextEditDto::Append(s) => TextEdit::Append(s),
            TextEditDto::Splice {
                pos,
                delete,
                insert,
            } => TextEdit::Splice {
                pos,
                delete,
                insert,
            },
        }
    }
}

/// Body of `PATCH /notes/{id}`: `{"title": {"replace": "..."}, "content": {"append": "..."}}`.
#[derive(Debug, Deserialize)]
pub struct NotePatchDto {
    title: Option<TextEditDto>,
    content: Option<TextEditDto>,
}

async fn list_notes(
    State(store): State<DocumentStore>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Page<ListedDto>> {
    list(store, Kind::Note, q).await
}

async fn create_note(
    State(store): State<DocumentStore>,
    ApiJson(body): ApiJson<NewNoteDto>,
) -> Result<(StatusCode, Json<NoteDto>), ApiError> {
    let note = Note {
        project: parse_opt_id(&body.project)?,
        title: body.title,
        content: body.content,
    };
    Ok((StatusCode::CREATED, Json(store.create(note).await?.into())))
}

async fn get_note(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> JsonResult<NoteDto> {
    let rec = store.get::<Note>(parse_id(&id)?).await?;
    if rec.deleted {
        return Err(StoreError::Deleted {
            kind: Kind::Note,
            id: rec.id,
        }
        .into());
    }
    Ok(Json(rec.into()))
}

async fn patch_note(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<NotePatchDto>,
) -> JsonResult<NoteDto> {
    let patch = NotePatch {
        title: body.title.map(Into::into),
        content: body.content.map(Into::into),
        ..NotePatch::default()
    };
    Ok(Json(store.update(parse_id(&id)?, patch).await?.into()))
}

async fn delete_note(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    store.delete(Kind::Note, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A task.
#[derive(Debug, Serialize)]
pub struct TaskDto {
    id: String,
    project: Option<String>,
    name: String,
    status: &'static str,
    due: Option<String>,
    notes: String,
    parent: Option<String>,
    interval: Option<String>,
    updated_at: i64,
}

impl From<Record<Task>> for TaskDto {
    fn from(r: Record<Task>) -> Self {
        let t = r.value;
        Self {
            id: r.id.to_string(),
            project: t.project.map(|p| p.to_string()),
            name: t.name,
            status: t.status.as_str(),
            due: t.due,
            notes: t.notes,
            parent: t.parent.map(|p| p.to_string()),
            interval: t.interval,
            updated_at: r.updated_at,
        }
    }
}

/// Body of `POST /tasks`.
#[derive(Debug, Deserialize)]
pub struct NewTaskDto {
    name: String,
    project: Option<String>,
    status: Option<String>,
    due: Option<String>,
    #[serde(default)]
    notes: String,
    parent: Option<String>,
    interval: Option<String>,
}

/// Body of `PATCH /tasks/{id}`.
#[derive(Debug, Deserialize)]
pub struct TaskPatchDto {
    name: Option<TextEditDto>,
    status: Option<String>,
    due: Option<Option<String>>,
    notes: Option<TextEditDto>,
}

async fn list_tasks(
    State(store): State<DocumentStore>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Page<ListedDto>> {
    list(store, Kind::Task, q).await
}

async fn create_task(
    State(store): State<DocumentStore>,
    ApiJson(b): ApiJson<NewTaskDto>,
) -> Result<(StatusCode, Json<TaskDto>), ApiError> {
    let task = Task {
        project: parse_opt_id(&b.project)?,
        name: b.name,
        status: b
            .status
            .as_deref()
            .map(str::parse::<TaskStatus>)
            .transpose()?
            .unwrap_or_default(),
        due: b.due,
        notes: b.notes,
        parent: parse_opt_id(&b.parent)?,
        interval: b.interval,
    };
    Ok((StatusCode::CREATED, Json(store.create(task).await?.into())))
}

async fn get_task(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> JsonResult<TaskDto> {
    Ok(Json(store.get::<Task>(parse_id(&id)?).await?.into()))
}

async fn patch_task(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<TaskPatchDto>,
) -> JsonResult<TaskDto> {
    let patch = TaskPatch {
        name: b.name.map(Into::into),
        status: b
            .status
            .as_deref()
            .map(str::parse::<TaskStatus>)
            .transpose()?,
        due: b.due,
        notes: b.notes.map(Into::into),
        ..TaskPatch::default()
    };
    Ok(Json(store.update(parse_id(&id)?, patch).await?.into()))
}

async fn delete_task(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    store.delete(Kind::Task, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Query of `GET /search`.
#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    q: String,
    kind: Option<String>,
    limit: Option<u32>,
}

/// A search hit.
#[derive(Debug, Serialize)]
pub struct HitDto {
    #[serde(flatten)]
    entity: ListedDto,
    snippet: String,
}

async fn search(
    State(store): State<DocumentStore>,
    ApiQuery(q): ApiQuery<SearchQuery>,
) -> JsonResult<Vec<HitDto>> {
    let kind = q.kind.as_deref().map(str::parse::<Kind>).transpose()?;
    let limit = q.limit.unwrap_or(20);
    if limit == 0 || limit > 200 {
        return Err(ApiError::bad_request(format!(
            "limit must be 1 to 200, not {limit}"
        )));
    }
    let hits = store.search(q.q, kind, limit).await?;
    Ok(Json(
        hits.into_iter()
            .map(|h| HitDto {
                entity: h.entity.into(),
                snippet: h.snippet,
            })
            .collect(),
    ))
}
