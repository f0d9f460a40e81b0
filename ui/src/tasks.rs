//! `/tasks`: tasks and subtasks (list, get, create, patch, text patch against heads,
//! delete with its subtasks, done). A listed task carries its `interval`.
//!
//! "Done" is decided by `Task::done_patch` (a recurring task's due moves on and it stays
//! open), never here; this file only supplies today's date, the machine's local one.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use hearth_sync::{DocumentStore, Task, TaskPatch, TaskStatus, Versioned};
use serde::{Deserialize, Serialize};

use crate::{
    api::{ApiError, ApiJson},
    dto::*,
    routes::{ApiRoutes, Verb},
};

pub(crate) fn routes() -> ApiRoutes<DocumentStore> {
    ApiRoutes::new("tasks")
        .route(Verb::Get, "/tasks", "List tasks", list_entities::<Task>)
        .query(LIST_QUERY)
        .route(Verb::Post, "/tasks", "Create a task", create_task)
        .route(
            Verb::Get,
            "/tasks/{id}",
            "Read a task with its heads",
            get_entity::<Task, TaskDto>,
        )
        .route(Verb::Patch, "/tasks/{id}", "Change a task", patch_task)
        .route(
            Verb::Post,
            "/tasks/{id}/done",
            "Mark a task done: a recurring one moves its due on by its interval and stays open",
            done_task,
        )
        .route(
            Verb::Patch,
            "/tasks/{id}/text",
            "Apply a text patch against heads (UTF-16 positions)",
            text_entity::<Task, TaskDto>,
        )
        .route(
            Verb::Delete,
            "/tasks/{id}",
            "Delete a task and its subtasks",
            delete_task,
        )
}

/// A task.
#[derive(Debug, Serialize)]
pub(crate) struct TaskDto {
    id: String,
    project: Option<String>,
    name: String,
    status: &'static str,
    due: Option<String>,
    notes: String,
    parent: Option<String>,
    interval: Option<String>,
    agent_job: bool,
    updated_at: i64,
    heads: Vec<String>,
}

impl From<Versioned<Task>> for TaskDto {
    fn from(v: Versioned<Task>) -> Self {
        let t = v.record.value;
        Self {
            id: v.record.id.to_string(),
            project: t.project.map(|p| p.to_string()),
            name: t.name,
            status: t.status.as_str(),
            due: t.due,
            notes: t.notes,
            parent: t.parent.map(|p| p.to_string()),
            interval: t.interval,
            agent_job: t.agent_job,
            updated_at: v.record.updated_at,
            heads: v.heads,
        }
    }
}

/// Body of `POST /tasks`.
#[derive(Debug, Deserialize)]
pub(crate) struct NewTaskDto {
    name: String,
    project: Option<String>,
    status: Option<String>,
    due: Option<String>,
    #[serde(default)]
    notes: String,
    parent: Option<String>,
    interval: Option<String>,
    #[serde(default)]
    agent_job: bool,
}

/// Body of `PATCH /tasks/{id}`; `null` clears an optional field.
#[derive(Debug, Deserialize)]
pub(crate) struct TaskPatchDto {
    name: Option<TextEditDto>,
    status: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    due: Option<Option<String>>,
    notes: Option<TextEditDto>,
    #[serde(default, deserialize_with = "double_option")]
    project: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    parent: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    interval: Option<Option<String>>,
    agent_job: Option<bool>,
}

fn status(s: Option<&str>) -> Result<Option<TaskStatus>, ApiError> {
    Ok(s.map(str::parse::<TaskStatus>).transpose()?)
}

async fn create_task(
    State(store): State<DocumentStore>,
    ApiJson(b): ApiJson<NewTaskDto>,
) -> Result<(StatusCode, Json<TaskDto>), ApiError> {
    let task = Task {
        project: parse_opt_id(&b.project)?,
        name: b.name,
        status: status(b.status.as_deref())?.unwrap_or_default(),
        due: b.due,
        notes: b.notes,
        parent: parse_opt_id(&b.parent)?,
        interval: b.interval,
        agent_job: b.agent_job,
    };
    create_entity(&store, task).await
}

async fn patch_task(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<TaskPatchDto>,
) -> JsonResult<TaskDto> {
    let id = parse_id(&id)?;
    let patch = TaskPatch {
        name: b.name.map(Into::into),
        status: status(b.status.as_deref())?,
        due: b.due,
        notes: b.notes.map(Into::into),
        project: parse_double_id(b.project)?,
        parent: parse_double_id(b.parent)?,
        interval: b.interval,
        agent_job: b.agent_job,
    };
    patch_entity(&store, id, patch).await
}

/// Deletes the task and its subtasks in one store transaction, so none is left naming a
/// deleted parent.
async fn delete_task(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    store.delete_task_tree(parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Now as a task's due value, `YYYY-MM-DDTHH:MM`, in this machine's local time: what
/// "today" means when a recurring task is done here. Hub and node both use the machine's
/// zone (these routes do not know the hub's `timezone` setting; on a hub it defaults to
/// the machine's zone anyway).
pub fn local_now() -> String {
    chrono::Local::now().format("%Y-%m-%dT%H:%M").to_string()
}

/// `POST /tasks/{id}/done`: answers the task as it is now.
async fn done_task(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> JsonResult<TaskDto> {
    let id = parse_id(&id)?;
    let task = read_live::<Task>(&store, id).await?.record.value;
    patch_entity(&store, id, task.done_patch(&local_now())).await
}
