//! `/skills`: reusable instructions for the agent (list, get, create, patch, text patch
//! against heads, delete). A skill without a project is available in every project;
//! `PATCH` moves a skill to a project or, with `"project": null`, to every project. A
//! listed skill carries its description.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use hearth_sync::{DocumentStore, Skill, SkillPatch, Versioned};
use serde::{Deserialize, Serialize};

use crate::{
    api::{ApiError, ApiJson},
    dto::*,
    routes::{ApiRoutes, Verb},
};

pub(crate) fn routes() -> ApiRoutes<DocumentStore> {
    ApiRoutes::new("skills")
        .route(Verb::Get, "/skills", "List skills", list_entities::<Skill>)
        .query(&["project", "limit", "offset"])
        .route(Verb::Post, "/skills", "Create a skill", create_skill)
        .route(
            Verb::Get,
            "/skills/{id}",
            "Read a skill with its heads",
            get_entity::<Skill, SkillDto>,
        )
        .route(Verb::Patch, "/skills/{id}", "Change a skill", patch_skill)
        .route(
            Verb::Patch,
            "/skills/{id}/text",
            "Apply a text patch against heads (UTF-16 positions)",
            text_entity::<Skill, SkillDto>,
        )
        .route(
            Verb::Delete,
            "/skills/{id}",
            "Delete a skill",
            delete_entity::<Skill>,
        )
}

/// A skill.
#[derive(Debug, Serialize)]
pub(crate) struct SkillDto {
    id: String,
    project: Option<String>,
    name: String,
    description: String,
    body: String,
    created_at: i64,
    updated_at: i64,
    heads: Vec<String>,
}

impl From<Versioned<Skill>> for SkillDto {
    fn from(v: Versioned<Skill>) -> Self {
        let s = v.record.value;
        Self {
            id: v.record.id.to_string(),
            project: s.project.map(|p| p.to_string()),
            name: s.name,
            description: s.description,
            body: s.body,
            created_at: v.record.created_at,
            updated_at: v.record.updated_at,
            heads: v.heads,
        }
    }
}

/// Body of `POST /skills`.
#[derive(Debug, Deserialize)]
pub(crate) struct NewSkillDto {
    name: String,
    project: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    body: String,
}

/// Body of `PATCH /skills/{id}`; `"project": null` makes the skill available in every
/// project.
#[derive(Debug, Deserialize)]
pub(crate) struct SkillPatchDto {
    #[serde(default, deserialize_with = "double_option")]
    project: Option<Option<String>>,
    name: Option<String>,
    description: Option<TextEditDto>,
    body: Option<TextEditDto>,
}

async fn create_skill(
    State(store): State<DocumentStore>,
    ApiJson(b): ApiJson<NewSkillDto>,
) -> Result<(StatusCode, Json<SkillDto>), ApiError> {
    let skill = Skill {
        project: parse_opt_id(&b.project)?,
        name: b.name,
        description: b.description,
        body: b.body,
    };
    create_entity(&store, skill).await
}

async fn patch_skill(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<SkillPatchDto>,
) -> JsonResult<SkillDto> {
    let id = parse_id(&id)?;
    let patch = SkillPatch {
        project: parse_double_id(b.project)?,
        name: b.name,
        description: b.description.map(Into::into),
        body: b.body.map(Into::into),
    };
    patch_entity(&store, id, patch).await
}
