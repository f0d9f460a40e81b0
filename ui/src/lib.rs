//! hearth-ui: what hub and node both serve over HTTP: the web UI ([`assets`], the files
//! under `ui/assets/`, compiled in) and the API at [`API_ROOT`]: the document routes, the answer
//! shapes every Hearth API shares ([`api`]), owner access ([`access`]: the guard, the
//! owner token, login links and browser sessions, the auth routes) and the numbered
//! event stream with its WebSocket ([`events`]),
//! and the table of routes a node relays to its hub ([`relayed`]).
//!
//! [`router`] maps JSON over HTTP onto the [`DocumentStore`], with paths relative to the
//! API root: hub and node nest it at `/api/v1` behind the access guard. It has its own
//! serializable transfer types, converted by hand from the store's types, so store
//! internals never derive `Serialize`.
//!
//! Architecture Invariant: the document routes never open SQLite; they only call the
//! store. They decide nothing about access: whoever mounts them puts [`access::guard()`]
//! in front. Only [`access`] runs SQL, for the owner's sessions, on a connection its
//! caller opened.

pub mod access;
pub mod api;
pub mod assets;
mod contacts;
mod dto;
pub mod events;
mod notes;
mod projects;
pub mod relayed;
pub mod routes;
mod skills;
mod tasks;

pub use api::{ApiError, ApiJson, ApiQuery, ApiResult, Page, PageQuery};
pub use relayed::{find_relayed, RelayKind, RelayedMatch, RelayedRoute, RELAYED};
pub use routes::{openapi, ApiRoutes, Op, Verb};
pub use tasks::local_now;

use axum::{extract::State, Json, Router};
use dto::{JsonResult, ListedDto};
use hearth_sync::{DocId, DocumentStore, Kind};
use serde::{Deserialize, Serialize};

/// The listener every Hearth HTTP server (hub and node) serves on: each accepted
/// connection sends at once (`TCP_NODELAY`). Without it an answer written in two parts
/// waits for the client's delayed ACK (about 40 ms on Linux), which every save from the
/// notes editor paid.
pub fn http_listener(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt;
    fn no_delay(stream: &mut tokio::net::TcpStream) {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an HTTP connection");
        }
    }
    listener.tap_io(no_delay as fn(&mut tokio::net::TcpStream))
}

/// Where every Hearth API is mounted.
pub const API_ROOT: &str = "/api/v1";

/// The path of the health route, relative to the API root: the one route that needs no
/// credential.
pub const HEALTH_PATH: &str = "/health";

/// The document routes over `store`, relative to the API root (`/health`, `/projects`,
/// `/notes`, `/tasks`, `/contacts`, `/skills`, `/search`), with their documentation;
/// merge them into routes of any state.
pub fn routes<S: Clone + Send + Sync + 'static>(store: DocumentStore) -> ApiRoutes<S> {
    routes_keeping(store, Vec::new())
}

/// [`routes`], where the projects in `kept` (the hub's `general`) cannot be deleted:
/// deleting one, or a subtree that holds one, is a 409.
pub fn routes_keeping<S: Clone + Send + Sync + 'static>(
    store: DocumentStore,
    kept: Vec<DocId>,
) -> ApiRoutes<S> {
    ApiRoutes::new("documents")
        .route(
            Verb::Get,
            HEALTH_PATH,
            "Is the API up (no credential needed)",
            health,
        )
        .route(Verb::Get, "/search", "Full-text search", search)
        .query(&["q", "kind", "limit"])
        .merge(projects::routes(kept.into()))
        .merge(notes::routes())
        .merge(tasks::routes())
        .merge(contacts::routes())
        .merge(skills::routes())
        .with_state(store)
}

/// [`routes`] as a plain router.
pub fn router<S: Clone + Send + Sync + 'static>(store: DocumentStore) -> Router<S> {
    routes(store).into_parts().0
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

/// Query of `GET /search`.
#[derive(Debug, Deserialize)]
pub(crate) struct SearchQuery {
    q: String,
    kind: Option<String>,
    limit: Option<u32>,
}

/// A search hit.
#[derive(Debug, Serialize)]
pub(crate) struct HitDto {
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
