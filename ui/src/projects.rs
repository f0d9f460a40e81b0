//! `/projects`: the project tree (list, get, create, rename, move, archive, instruction
//! edits, text patch against heads, delete a subtree).

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use hearth_sync::{DocId, DocumentStore, Filter, Kind, Project, ProjectPatch, Versioned};
use serde::{Deserialize, Serialize};

use crate::{
    api::{ApiError, ApiJson, ApiQuery, ApiResult, Page, PageQuery},
    dto::*,
    routes::{ApiRoutes, Verb},
};

/// The project routes; the projects in `kept` (the hub's `general`) cannot be deleted,
/// nor can a subtree holding one.
pub(crate) fn routes(kept: Arc<[DocId]>) -> ApiRoutes<DocumentStore> {
    ApiRoutes::new("projects")
        .route(Verb::Get, "/projects", "List projects", list_projects)
        .query(&["parent", "archived", "limit", "offset"])
        .route(Verb::Post, "/projects", "Create a project", create_project)
        .route(
            Verb::Get,
            "/projects/{project}",
            "Read a project with its heads",
            get_entity::<Project, ProjectDto>,
        )
        .route(
            Verb::Patch,
            "/projects/{project}",
            "Rename, move, archive or restore a project, or edit its instructions",
            patch_project,
        )
        .route(
            Verb::Patch,
            "/projects/{project}/text",
            "Apply a text patch against heads (UTF-16 positions)",
            text_entity::<Project, ProjectDto>,
        )
        .route(
            Verb::Delete,
            "/projects/{project}",
            "Delete a project, its subprojects and every document in them",
            move |store, id| delete_project(store, id, kept.clone()),
        )
}

/// A project.
#[derive(Debug, Serialize)]
pub(crate) struct ProjectDto {
    id: String,
    name: String,
    parent: Option<String>,
    instructions: String,
    archived: bool,
    created_at: i64,
    updated_at: i64,
    heads: Vec<String>,
}

impl From<Versioned<Project>> for ProjectDto {
    fn from(v: Versioned<Project>) -> Self {
        let p = v.record.value;
        Self {
            id: v.record.id.to_string(),
            name: p.name,
            parent: p.parent.map(|p| p.to_string()),
            instructions: p.instructions,
            archived: p.archived,
            created_at: v.record.created_at,
            updated_at: v.record.updated_at,
            heads: v.heads,
        }
    }
}

/// Query of `GET /projects`: `archived=true` lists only archived projects, otherwise
/// only the others.
#[derive(Debug, Deserialize)]
pub(crate) struct ProjectQuery {
    parent: Option<String>,
    #[serde(default)]
    archived: bool,
    limit: Option<u32>,
    offset: Option<u32>,
}

/// Body of `POST /projects`.
#[derive(Debug, Deserialize)]
pub(crate) struct NewProjectDto {
    name: String,
    parent: Option<String>,
    #[serde(default)]
    instructions: String,
}

/// Body of `PATCH /projects/{id}`: `name` renames, `parent` (an id, or `null` for the
/// root) moves, `archived` archives or restores, `instructions` edits the instructions.
#[derive(Debug, Deserialize)]
pub(crate) struct ProjectPatchDto {
    name: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    parent: Option<Option<String>>,
    archived: Option<bool>,
    instructions: Option<TextEditDto>,
}

/// What `DELETE /projects/{id}` removed.
#[derive(Debug, Serialize)]
pub(crate) struct DeletedDto {
    projects: u64,
    documents: u64,
}

/// The projects are few (the scope check loads them all too): filter them in memory.
async fn list_projects(
    State(store): State<DocumentStore>,
    ApiQuery(q): ApiQuery<ProjectQuery>,
) -> ApiResult<Page<ListedDto>> {
    let page = PageQuery {
        limit: q.limit,
        offset: q.offset,
    };
    page.bounds()?;
    let parent = parse_opt_id(&q.parent)?;
    let mut all = Vec::new();
    loop {
        let got = store
            .list(Filter {
                parent,
                limit: 500,
                offset: all.len() as u32,
                ..Filter::new(Kind::Project)
            })
            .await?;
        let done = got.data.len() < 500;
        all.extend(got.data);
        if done {
            break;
        }
    }
    all.retain(|p| (p.status.as_deref() == Some("archived")) == q.archived);
    Ok(Page::from_all(all, &page)?.map(ListedDto::from))
}

async fn create_project(
    State(store): State<DocumentStore>,
    ApiJson(b): ApiJson<NewProjectDto>,
) -> Result<(StatusCode, Json<ProjectDto>), ApiError> {
    let project = Project {
        name: b.name,
        parent: parse_opt_id(&b.parent)?,
        instructions: b.instructions,
        archived: false,
    };
    create_entity(&store, project).await
}

async fn patch_project(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<ProjectPatchDto>,
) -> JsonResult<ProjectDto> {
    let id = parse_id(&id)?;
    let patch = ProjectPatch {
        name: b.name,
        parent: parse_double_id(b.parent)?,
        instructions: b.instructions.map(Into::into),
        archived: b.archived,
    };
    patch_entity(&store, id, patch).await
}

async fn delete_project(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    kept: Arc<[DocId]>,
) -> JsonResult<DeletedDto> {
    let id = parse_id(&id)?;
    read_live::<Project>(&store, id).await?;
    let deleted = tokio::task::spawn_blocking(move || delete_tree(&store, id, &kept))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(deleted))
}

/// Tombstones every document of the subtree's projects, then the projects themselves.
fn delete_tree(store: &DocumentStore, root: DocId, kept: &[DocId]) -> Result<DeletedDto, ApiError> {
    let scope = store.scope_blocking(root)?;
    if let Some(k) = kept.iter().find(|k| scope.contains_project(k)) {
        return Err(ApiError::conflict(format!(
            "project {k} is the hub's own (general) and cannot be deleted; archive it, or \
             move its subprojects out first"
        )));
    }
    let mut documents = 0;
    for project in scope.projects() {
        for kind in [Kind::Note, Kind::Task, Kind::Skill] {
            loop {
                // Deleted rows leave the live listing, so the first page is always next.
                let page = store.list_blocking(&Filter {
                    project: Some(*project),
                    limit: 500,
                    ..Filter::new(kind)
                })?;
                if page.data.is_empty() {
                    break;
                }
                for doc in page.data {
                    store.delete_blocking(kind, doc.id)?;
                    documents += 1;
                }
            }
        }
    }
    for project in scope.projects() {
        store.delete_blocking(Kind::Project, *project)?;
    }
    Ok(DeletedDto {
        projects: scope.projects().len() as u64,
        documents,
    })
}
