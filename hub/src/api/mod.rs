//! The hub's HTTP API: one router, nested at [`API_ROOT`] (`/api/v1`), behind one access
//! guard ([`guard`]), answering in one error shape and one page shape (both from
//! `hearth_ui::api`, which the node's API shares). The document routes, the auth routes
//! and `GET /events` come from hearth-ui, as on a node.
//!
//! Architecture Invariant: this module holds routes and DTOs only, no business logic.
//! A handler parses its input, calls one domain service (the document store, the device
//! registry, the chat service, owner sessions, runtime settings, plugins, notifications,
//! the scheduler) and shapes the answer; every domain error maps into [`ApiError`] (see
//! `errors.rs`). rusqlite work runs in `spawn_blocking`; no handler holds a lock across
//! an `.await`.
//!
//! Architecture Invariant: every route but `GET /api/v1/health` and the login link's
//! `GET /api/v1/auth/login` needs the owner's credential (or is a route of the relay
//! table reached through `hearth/rpc/1` by a paired device, which [`caller`] checks
//! against the device's current scope and admin flag), and every request, those two
//! included, must name the hub in `Host` (and in `Origin`, when it changes state or
//! upgrades to a WebSocket). The guard wraps the whole router, unknown paths included.
//!
//! To add routes: write a `routes() -> ApiRoutes<ApiState>` in a file of this folder
//! (paths relative to the API root, each with a one-line summary), merge it in
//! [`routes`], and return `ApiResult<…>` from the handlers, with `Page<T>` for lists and
//! `ApiJson`/`ApiQuery` for input. The router and the OpenAPI document
//! (`GET /api/v1/openapi.json`) are both built from that one list, so a route cannot be
//! served without being documented.

pub mod caller;
mod channels;
mod chat;
mod devices;
mod errors;
pub mod guard;
mod notifications;
mod plugins;
mod records;
mod schedule_preview;
mod schedules;
mod settings;

use std::sync::{Arc, OnceLock};

use axum::{middleware, Json, Router};
use hearth_sync::DocumentStore;
pub use hearth_ui::api::{ApiError, ApiJson, ApiQuery, ApiResult, Page, PageQuery};
use hearth_ui::{access::Server, ApiRoutes, Verb};

use crate::{
    access::ConnectionTracker, chat::ChatService, devices::DeviceRegistry, settings::RuntimeStore,
};

/// Where the API is mounted.
pub const API_ROOT: &str = hearth_ui::API_ROOT;

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
    /// Plugins and their servers' states (the owner's only).
    pub plugins: Arc<crate::plugins::Plugins>,
    /// Notifications: kept, published, handed to channels.
    pub notifier: Arc<crate::notify::Notifier>,
    /// Schedules: their store and the running scheduler.
    pub scheduler: Arc<crate::scheduler::Scheduler>,
    /// The Telegram channel (the owner's only).
    pub telegram: Arc<crate::channels::telegram::Telegram>,
}

/// Where the OpenAPI document is served, relative to the API root.
pub const OPENAPI_PATH: &str = "/openapi.json";

/// Every route of the API, relative to [`API_ROOT`], with its documentation.
pub fn routes(state: &ApiState) -> ApiRoutes<ApiState> {
    // The document lists itself: it is filled in once every route is known.
    let doc: Arc<OnceLock<serde_json::Value>> = Arc::default();
    let serve = doc.clone();
    let routes = ApiRoutes::new("meta")
        .route(
            Verb::Get,
            OPENAPI_PATH,
            "This API's OpenAPI document",
            move || async move { Json(serve.get().cloned().unwrap_or_default()) },
        )
        .merge(hearth_ui::routes_keeping(
            state.store.clone(),
            vec![state.chat.general],
        ))
        .merge(records::routes())
        .merge(hearth_ui::access::routes(state.access.clone()))
        .merge(devices::routes())
        .merge(chat::routes())
        .merge(settings::routes())
        .merge(plugins::routes())
        .merge(notifications::routes())
        .merge(schedules::routes())
        .merge(schedule_preview::routes())
        .merge(channels::routes())
        .merge(hearth_ui::events::socket::routes(
            state.chat.events.ring().clone(),
            Server::Hub,
        ));
    let _ = doc.set(openapi_json(routes.ops()));
    routes
}

/// The OpenAPI document of `ops`, mounted at [`API_ROOT`], as JSON.
pub fn openapi_json(ops: &[hearth_ui::Op]) -> serde_json::Value {
    let doc = hearth_ui::openapi("Hearth hub API", env!("CARGO_PKG_VERSION"), API_ROOT, ops);
    serde_json::to_value(&doc).unwrap_or_default()
}

/// The whole HTTP surface of the hub: the web UI at `/` (compiled in, or read from
/// `ui_dir`) and the API at [`API_ROOT`], both behind the guard.
pub fn router(state: ApiState, ui_dir: Option<std::path::PathBuf>) -> Router {
    let (api, _) = routes(&state).into_parts();
    Router::new()
        .nest(API_ROOT, api)
        .merge(hearth_ui::assets::router(ui_dir))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.access.clone(),
            guard::guard,
        ))
        .with_state(state)
}

/// The same routes for requests a device relays over `hearth/rpc/1`: relative to the
/// API root and WITHOUT the owner's guard. The rpc service lets a request reach it only
/// after its own checks (a paired, unrevoked device; a route of the relay table;
/// [`caller::check_route`] on the device's current grant) and inserts the
/// [`caller::RelayedDevice`] that the handlers' [`caller::Caller`] reads for object
/// checks. Never served on a listener.
pub fn relay_router(state: ApiState) -> Router {
    let (api, _) = routes(&state).into_parts();
    api.fallback(not_found).with_state(state)
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
