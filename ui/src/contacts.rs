//! `/contacts`: people (list, filtered by tag if asked, get, create, patch, text patch
//! against heads, delete). Contacts belong to no project; a listed contact carries its
//! email, phone, company, job title and tags.

use std::collections::BTreeMap;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use hearth_sync::{Contact, ContactPatch, DocumentStore, Versioned};
use serde::{Deserialize, Serialize};

use crate::{
    api::{ApiError, ApiJson},
    dto::*,
    routes::{ApiRoutes, Verb},
};

pub(crate) fn routes() -> ApiRoutes<DocumentStore> {
    ApiRoutes::new("contacts")
        .route(
            Verb::Get,
            "/contacts",
            "List contacts",
            list_entities::<Contact>,
        )
        .query(&["tag", "limit", "offset"])
        .route(Verb::Post, "/contacts", "Create a contact", create_contact)
        .route(
            Verb::Get,
            "/contacts/{id}",
            "Read a contact with its heads",
            get_entity::<Contact, ContactDto>,
        )
        .route(
            Verb::Patch,
            "/contacts/{id}",
            "Change a contact",
            patch_contact,
        )
        .route(
            Verb::Patch,
            "/contacts/{id}/text",
            "Apply a text patch against heads (UTF-16 positions)",
            text_entity::<Contact, ContactDto>,
        )
        .route(
            Verb::Delete,
            "/contacts/{id}",
            "Delete a contact",
            delete_entity::<Contact>,
        )
}

/// A contact.
#[derive(Debug, Serialize)]
pub(crate) struct ContactDto {
    id: String,
    name: String,
    email: Option<String>,
    phone: Option<String>,
    company: Option<String>,
    title: Option<String>,
    website: Option<String>,
    address: Option<String>,
    notes: String,
    tags: Vec<String>,
    metadata: BTreeMap<String, String>,
    created_at: i64,
    updated_at: i64,
    heads: Vec<String>,
}

impl From<Versioned<Contact>> for ContactDto {
    fn from(v: Versioned<Contact>) -> Self {
        let c = v.record.value;
        Self {
            id: v.record.id.to_string(),
            name: c.name,
            email: c.email,
            phone: c.phone,
            company: c.company,
            title: c.title,
            website: c.website,
            address: c.address,
            notes: c.notes,
            tags: c.tags,
            metadata: c.metadata,
            created_at: v.record.created_at,
            updated_at: v.record.updated_at,
            heads: v.heads,
        }
    }
}

/// Body of `POST /contacts`.
#[derive(Debug, Deserialize)]
pub(crate) struct NewContactDto {
    name: String,
    email: Option<String>,
    phone: Option<String>,
    company: Option<String>,
    title: Option<String>,
    website: Option<String>,
    address: Option<String>,
    #[serde(default)]
    notes: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

/// Body of `PATCH /contacts/{id}`; `null` clears an optional field.
#[derive(Debug, Deserialize)]
pub(crate) struct ContactPatchDto {
    name: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    email: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    phone: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    company: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    title: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    website: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    address: Option<Option<String>>,
    notes: Option<TextEditDto>,
    tags: Option<Vec<String>>,
    metadata: Option<BTreeMap<String, String>>,
}

async fn create_contact(
    State(store): State<DocumentStore>,
    ApiJson(b): ApiJson<NewContactDto>,
) -> Result<(StatusCode, Json<ContactDto>), ApiError> {
    let contact = Contact {
        name: b.name,
        email: b.email,
        phone: b.phone,
        company: b.company,
        title: b.title,
        website: b.website,
        address: b.address,
        notes: b.notes,
        tags: b.tags,
        metadata: b.metadata,
    };
    create_entity(&store, contact).await
}

async fn patch_contact(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<ContactPatchDto>,
) -> JsonResult<ContactDto> {
    let id = parse_id(&id)?;
    let patch = ContactPatch {
        name: b.name,
        email: b.email,
        phone: b.phone,
        company: b.company,
        title: b.title,
        website: b.website,
        address: b.address,
        notes: b.notes.map(Into::into),
        tags: b.tags,
        metadata: b.metadata,
    };
    patch_entity(&store, id, patch).await
}
