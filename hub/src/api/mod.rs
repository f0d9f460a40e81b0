//! The hub's HTTP API: one router, nested at [`API_ROOT`] (`/api/v1`), behind one access
//! guard ([`guard`]), answering in one error shape and one page shape (both from
//! `hearth_ui::api`, which the node's API will share).
//!
//! Architecture Invariant: this module holds routes and DTOs only, no business logic.
//! A handler parses its input, calls one domain service (the document store, the device
//! registry, the chat service, owner sessions, runtime settings) and shapes the answer;
//! every domain error maps into [`ApiError`] (see `errors.rs`). rusqlite work runs in
//! `spawn_blocking`; no handler holds a lock across an `.await`.
//!
//! Architecture Invariant: every route but `GET /api/v1/health` and the login link's
//! `GET /api/v1/auth/login` needs the owner's credential, and every request, those two
//! included, must name the hub in `Host` (and in `Origin`, when it changes state or
//! upgrades to a WebSocket). The guard wraps the whole router, unknown paths included.
//!
//! To add routes: write a `routes() -> Router<ApiState>` in a file of this folder (paths
//! relative to the API root), merge it in [`router`], and return `ApiResult<…>` from the
//! handlers, with `Page<T>` for lists and `ApiJson`/`ApiQuery` for input.

mod auth;
mod chat;
mod devices;
mod errors;
mod events;
pub mod guard;
mod settings;

use std::sync::Arc;

use axum::{middleware, Router};
use hearth_sync::DocumentStore;
pub use hearth_ui::api::{ApiError, ApiJson, ApiQuery, ApiResult, Page, PageQuery};

use crate::{
    access::ConnectionTracker, chat::ChatService, devices::DeviceRegistry, settings::RuntimeStore,
};

/// Where the API is mounted.
pub const API_ROOT: &str = "/api/v1";

/// What the handlers reach: the domain services, shared.
#[derive(Clone)]
pub struct ApiState {
    /// The document store.
    pub store: DocumentStore,
    /// Paired devices and pairing requests.
    pub registry: Arc<DeviceRegistry>,
    /// Open device connections (a revocation closes them).
    pub tracker: Arc<ConnectionTracker>,
    /// Chat turns, approvals, provider keys.
    pub chat: Arc<ChatService>,
    /// Runtime settings in `hub.db`.
    pub runtime: Arc<RuntimeStore>,
    /// The owner's credentials and the Host/Origin allowlist.
    pub access: Arc<guard::Access>,
}

/// The whole HTTP surface of the hub: the API at [`API_ROOT`], guarded.
pub fn router(state: ApiState) -> Router {
    let api = Router::new()
        .merge(hearth_ui::router(state.store.clone()))
        .merge(auth::routes())
        .merge(devices::routes())
        .merge(chat::routes())
        .merge(settings::routes())
        .merge(events::routes());
    Router::new()
        .nest(API_ROOT, api)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.access.clone(),
            guard::guard,
        ))
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}

/// Runs blocking domain work (rusqlite) off the async threads.
pub(crate) async fn blocking<T, E>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> ApiResult<T>
where
    T: Send + 'static,
    E: Into<ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
        .map_err(Into::into)
}
