//! `/notes`: markdown notes (list, get, create, patch, text patch against heads, delete).

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use hearth_sync::{DocumentStore, Note, NotePatch, Versioned};
use serde::{Deserialize, Serialize};

use crate::{
    api::{ApiError, ApiJson},
    dto::*,
    routes::{ApiRoutes, Verb},
};

pub(crate) fn routes() -> ApiRoutes<DocumentStore> {
    ApiRoutes::new("notes")
        .route(Verb::Get, "/notes", "List notes", list_entities::<Note>)
        .query(LIST_QUERY)
        .route(Verb::Post, "/notes", "Create a note", create_note)
        .route(
            Verb::Get,
            "/notes/{id}",
            "Read a note with its heads",
            get_entity::<Note, NoteDto>,
        )
        .route(Verb::Patch, "/notes/{id}", "Change a note", patch_note)
        .route(
            Verb::Patch,
            "/notes/{id}/text",
            "Apply a text patch against heads (UTF-16 positions)",
            text_entity::<Note, NoteDto>,
        )
        .route(
            Verb::Delete,
            "/notes/{id}",
            "Delete a note",
            delete_entity::<Note>,
        )
}

/// A note.
#[derive(Debug, Serialize)]
pub(crate) struct NoteDto {
    id: String,
    project: Option<String>,
    title: String,
    content: String,
    created_at: i64,
    updated_at: i64,
    heads: Vec<String>,
}

impl From<Versioned<Note>> for NoteDto {
    fn from(v: Versioned<Note>) -> Self {
        let r = v.record;
        Self {
            id: r.id.to_string(),
            project: r.value.project.map(|p| p.to_string()),
            title: r.value.title,
            content: r.value.content,
            created_at: r.created_at,
            updated_at: r.updated_at,
            heads: v.heads,
        }
    }
}

/// Body of `POST /notes`.
#[derive(Debug, Deserialize)]
pub(crate) struct NewNoteDto {
    title: String,
    #[serde(default)]
    content: String,
    project: Option<String>,
}

/// Body of `PATCH /notes/{id}`: `{"title": {"replace": "..."}, "content": {"append":
/// "..."}, "project": id | null}`.
#[derive(Debug, Deserialize)]
pub(crate) struct NotePatchDto {
    title: Option<TextEditDto>,
    content: Option<TextEditDto>,
    #[serde(default, deserialize_with = "double_option")]
    project: Option<Option<String>>,
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
    create_entity(&store, note).await
}

async fn patch_note(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<NotePatchDto>,
) -> JsonResult<NoteDto> {
    let id = parse_id(&id)?;
    let patch = NotePatch {
        title: body.title.map(Into::into),
        content: body.content.map(Into::into),
        project: parse_double_id(body.project)?,
    };
    patch_entity(&store, id, patch).await
}
