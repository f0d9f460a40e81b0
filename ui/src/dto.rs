//! Transfer types and helpers every document resource shares: ids, listed rows, list
//! queries, text edits and text patches against heads, reads that refuse tombstones.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use hearth_sync::{
    store::Listed, Details, DocId, DocumentStore, Entity, Filter, Kind, StoreError, TextEdit,
    TextSplice, Versioned,
};
use serde::{Deserialize, Deserializer, Serialize};

use crate::api::{ApiError, ApiJson, ApiQuery, ApiResult, Page, PageQuery};

/// `Result` of a handler answering JSON.
pub(crate) type JsonResult<T> = Result<Json<T>, ApiError>;

pub(crate) fn parse_id(s: &str) -> Result<DocId, ApiError> {
    s.parse().map_err(ApiError::from)
}

pub(crate) fn parse_opt_id(s: &Option<String>) -> Result<Option<DocId>, ApiError> {
    s.as_deref().map(parse_id).transpose()
}

/// `null` in a PATCH body is `Some(None)` (clear it), a missing key `None` (keep it).
pub(crate) fn double_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

pub(crate) fn parse_double_id(
    s: Option<Option<String>>,
) -> Result<Option<Option<DocId>>, ApiError> {
    s.map(|inner| inner.as_deref().map(parse_id).transpose())
        .transpose()
}

/// Reads a live entity with its heads: a tombstone is 410, a missing id 404.
pub(crate) async fn read_live<E: Entity>(
    store: &DocumentStore,
    id: DocId,
) -> ApiResult<Versioned<E>> {
    let v = store.get_versioned::<E>(id).await?;
    if v.record.deleted {
        return Err(StoreError::Deleted { kind: E::KIND, id }.into());
    }
    Ok(v)
}

/// A listed entity: the fields every kind lists, then its kind's own (a task's
/// `interval` and `agent_job`; a contact's `email`, `phone`, `company`, `job_title` and `tags`; a
/// skill's `description`), all read from the derived row, no document loaded.
#[derive(Debug, Serialize)]
pub(crate) struct ListedDto {
    id: String,
    kind: &'static str,
    title: String,
    project: Option<String>,
    status: Option<String>,
    due: Option<String>,
    parent: Option<String>,
    deleted: bool,
    updated_at: i64,
    #[serde(flatten)]
    details: Option<DetailsDto>,
}

/// The fields of one kind of listed row.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum DetailsDto {
    /// A task's recurrence (`null` unless it repeats), and whether the agent runs it.
    Task {
        interval: Option<String>,
        agent_job: bool,
    },
    /// How to reach a contact, where they work (`job_title`: the row's `title` is the
    /// name), their tags.
    Contact {
        email: Option<String>,
        phone: Option<String>,
        company: Option<String>,
        job_title: Option<String>,
        tags: Vec<String>,
    },
    /// A skill's description (its first 300 characters).
    Skill { description: String },
}

impl DetailsDto {
    fn of(d: Details) -> Option<Self> {
        match d {
            Details::Task {
                interval,
                agent_job,
            } => Some(Self::Task {
                interval,
                agent_job,
            }),
            Details::Contact {
                email,
                phone,
                company,
                job_title,
                tags,
            } => Some(Self::Contact {
                email,
                phone,
                company,
                job_title,
                tags,
            }),
            Details::Skill { description } => Some(Self::Skill { description }),
            Details::None => None,
        }
    }
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
            details: DetailsDto::of(l.details),
        }
    }
}

/// Query of list endpoints: `project`, `status`, `parent`, `tag` (contacts only),
/// `limit`, `offset`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ListQuery {
    pub(crate) project: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) parent: Option<String>,
    pub(crate) tag: Option<String>,
    pub(crate) limit: Option<u32>,
    pub(crate) offset: Option<u32>,
}

/// The query parameter names of [`ListQuery`], for the document.
pub(crate) const LIST_QUERY: &[&str] = &["project", "status", "parent", "limit", "offset"];

pub(crate) async fn list(
    store: DocumentStore,
    kind: Kind,
    q: ListQuery,
) -> ApiResult<Page<ListedDto>> {
    let (limit, offset) = PageQuery {
        limit: q.limit,
        offset: q.offset,
    }
    .bounds()?;
    if q.tag.is_some() && kind != Kind::Contact {
        return Err(ApiError::bad_request(format!(
            "only contacts have tags: a {kind} listing takes no tag"
        )));
    }
    let filter = Filter {
        project: parse_opt_id(&q.project)?,
        parent: parse_opt_id(&q.parent)?,
        status: q.status,
        tag: q.tag,
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

/// A text edit in a PATCH body: whole-text replacement (diffed, so concurrent edits
/// elsewhere still merge) or an append. Edits at a position go through a text patch
/// against heads (`PATCH /{kind}/{id}/text`), the API's one positional edit, counted in
/// UTF-16 code units.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TextEditDto {
    /// Replace the whole text.
    Replace(String),
    /// Append at the end.
    Append(String),
}

impl From<TextEditDto> for TextEdit {
    fn from(e: TextEditDto) -> Self {
        match e {
            TextEditDto::Replace(s) => TextEdit::Replace(s),
            TextEditDto::Append(s) => TextEdit::Append(s),
        }
    }
}

/// One splice of a text patch; positions in UTF-16 code units.
#[derive(Debug, Deserialize)]
pub(crate) struct SpliceDto {
    pos: usize,
    #[serde(default)]
    delete: usize,
    #[serde(default)]
    insert: String,
}

/// Body of `PATCH /{kind}/{id}/text`: splices computed against `heads`.
#[derive(Debug, Deserialize)]
pub(crate) struct TextPatchDto {
    field: String,
    heads: Vec<String>,
    splices: Vec<SpliceDto>,
}

/// Applies a text patch against heads, then reads the entity back with its new heads.
pub(crate) async fn text_patch<E: Entity>(
    store: &DocumentStore,
    id: DocId,
    body: TextPatchDto,
) -> ApiResult<Versioned<E>> {
    let splices = body
        .splices
        .into_iter()
        .map(|s| TextSplice {
            pos: s.pos,
            delete: s.delete,
            insert: s.insert,
        })
        .collect();
    store
        .update_text_at(id, E::KIND, body.field, body.heads, splices)
        .await?;
    read_live::<E>(store, id).await
}

// ---- handlers every document resource shares, one instance per kind and DTO -----------

/// `GET /{kind}`: one page of the kind's listed rows.
pub(crate) async fn list_entities<E: Entity>(
    State(store): State<DocumentStore>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Page<ListedDto>> {
    list(store, E::KIND, q).await
}

/// `GET /{kind}/{id}`: the live entity with its heads.
pub(crate) async fn get_entity<E: Entity, D: From<Versioned<E>>>(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> JsonResult<D> {
    Ok(Json(read_live::<E>(&store, parse_id(&id)?).await?.into()))
}

/// `PATCH /{kind}/{id}/text`: a text patch against heads, answered with the new state.
pub(crate) async fn text_entity<E: Entity, D: From<Versioned<E>>>(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TextPatchDto>,
) -> JsonResult<D> {
    Ok(Json(
        text_patch::<E>(&store, parse_id(&id)?, body).await?.into(),
    ))
}

/// `DELETE /{kind}/{id}`: leaves a replicated tombstone.
pub(crate) async fn delete_entity<E: Entity>(
    State(store): State<DocumentStore>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    store.delete(E::KIND, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Creates `value` and answers 201 with it as stored, heads included.
pub(crate) async fn create_entity<E: Entity, D: From<Versioned<E>>>(
    store: &DocumentStore,
    value: E,
) -> Result<(StatusCode, Json<D>), ApiError> {
    let id = store.create(value).await?.id;
    Ok((
        StatusCode::CREATED,
        Json(read_live::<E>(store, id).await?.into()),
    ))
}

/// Applies a typed patch and answers with the entity as stored, heads included.
pub(crate) async fn patch_entity<P: hearth_sync::Patch, D: From<Versioned<P::Entity>>>(
    store: &DocumentStore,
    id: DocId,
    patch: P,
) -> JsonResult<D> {
    store.update(id, patch).await?;
    Ok(Json(read_live::<P::Entity>(store, id).await?.into()))
}
