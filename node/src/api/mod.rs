//! The node's HTTP API: the same `/api/v1` as the hub's, on loopback, for the people at
//! this laptop. One router, nested at `hearth_ui::API_ROOT`, behind the shared owner
//! guard (`hearth_ui::access::guard`: this node's `Host` names, foreign `Origin`s refused,
//! the node's own owner token or its `hearth_node_<id>` session cookie), answering in the
//! shared error and page shapes.
//!
//! Routes ([`routes`]): the document routes of hearth-ui over the local replica
//! (projects, notes, tasks, contacts, skills, search, health), which work with the hub
//! unreachable; the auth routes (login links, login, sessions, logout); `GET /events`
//! (the node's numbered stream: its replica's document events, and whatever else is
//! published into its ring); `GET /status` (`status.rs`); `GET /openapi.json`, built from
//! the same list as the router, like the hub's.
//!
//! To extend: merge another `ApiRoutes<NodeApiState>` into [`routes`]'s list, then build
//! the router with [`router`] from the merged list (the OpenAPI document then lists it).
//!
//! Architecture Invariant: this module holds routes only; no SQL, no business logic, and
//! no route without the guard in front. It listens only where `hearth run` binds it
//! (loopback by default; beyond it only when the owner says so).

pub mod server;
mod status;

use std::sync::{Arc, OnceLock};

use axum::{extract::State, middleware, Json, Router};
use hearth_sync::DocumentStore;
use hearth_ui::{
    access::{Access, Server},
    events::EventRing,
    ApiError, ApiRoutes, Verb, API_ROOT,
};

use crate::status::StatusBoard;

/// Where the OpenAPI document is served, relative to the API root.
pub const OPENAPI_PATH: &str = "/openapi.json";

/// What the node's handlers reach.
#[derive(Clone)]
pub struct NodeApiState {
    /// The local replica.
    pub store: DocumentStore,
    /// The owner's credentials and the Host/Origin allowlist.
    pub access: Arc<Access>,
    /// The node's numbered event stream.
    pub events: Arc<EventRing>,
    /// The live sync status.
    pub status: Arc<StatusBoard>,
    /// The OpenAPI document, set by [`router`] from the final route list.
    openapi: Arc<OnceLock<serde_json::Value>>,
}

impl NodeApiState {
    /// The state of one node API (one [`router`] per state).
    pub fn new(
        store: DocumentStore,
        access: Arc<Access>,
        events: Arc<EventRing>,
        status: Arc<StatusBoard>,
    ) -> Self {
        Self {
            store,
            access,
            events,
            status,
            openapi: Arc::default(),
        }
    }
}

/// The node's own routes, relative to the API root, with their documentation.
pub fn routes(state: &NodeApiState) -> ApiRoutes<NodeApiState> {
    ApiRoutes::new("meta")
        .route(
            Verb::Get,
            OPENAPI_PATH,
            "This API's OpenAPI document",
            openapi,
        )
        .merge(hearth_ui::routes(state.store.clone()))
        .merge(hearth_ui::access::routes(state.access.clone()))
        .merge(hearth_ui::events::socket::routes(
            state.events.clone(),
            Server::Node,
        ))
        .merge(status::routes())
}

async fn openapi(State(s): State<NodeApiState>) -> Json<serde_json::Value> {
    Json(s.openapi.get().cloned().unwrap_or_default())
}

/// The OpenAPI document of `ops`, mounted at the API root, as JSON.
pub fn openapi_json(ops: &[hearth_ui::Op]) -> serde_json::Value {
    let doc = hearth_ui::openapi("Hearth node API", env!("CARGO_PKG_VERSION"), API_ROOT, ops);
    serde_json::to_value(&doc).unwrap_or_default()
}

/// The whole HTTP surface of the node: the web UI at `/` (compiled in, or read from
/// `ui_dir`) and `routes` (normally [`routes`], maybe with more merged in) at the API
/// root with its OpenAPI document, all guarded.
pub fn router(
    state: NodeApiState,
    routes: ApiRoutes<NodeApiState>,
    ui_dir: Option<std::path::PathBuf>,
) -> Router {
    let _ = state.openapi.set(openapi_json(routes.ops()));
    let (api, _) = routes.into_parts();
    Router::new()
        .nest(API_ROOT, api)
        .merge(hearth_ui::assets::router(ui_dir))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.access.clone(),
            hearth_ui::access::guard,
        ))
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use axum::{
        body::Body,
        http::{Request, StatusCode},
    };
    use http_body_util::BodyExt;
    use serde_json::{json, Value};
    use tower::ServiceExt;

    use super::*;
    use hearth_ui::access::OwnerToken;

    struct Node {
        _dir: tempfile::TempDir,
        router: Router,
        state: NodeApiState,
        token: String,
    }

    fn node() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let token = OwnerToken::load_or_create(dir.path()).expect("token");
        let secret = token.expose().to_string();
        let access = Arc::new(Access::new(
            token,
            Arc::new(crate::nodedb::open_sessions(dir.path()).expect("sessions")),
            Server::Node.cookie_name("nodeid"),
            4300,
            Vec::new(),
        ));
        let board = Arc::new(StatusBoard::new("hubid".into(), None, None));
        let state = NodeApiState::new(store, access, Arc::new(EventRing::new()), board);
        let router = router(state.clone(), routes(&state), None);
        Node {
            _dir: dir,
            router,
            state,
            token: secret,
        }
    }

    impl Node {
        async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
            let req = Request::builder()
                .method(method)
                .uri(format!("{API_ROOT}{path}"))
                .header("host", "127.0.0.1:4300")
                .header("authorization", format!("Bearer {}", self.token))
                .header("content-type", "application/json")
                .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
                .expect("request");
            let resp = self.router.clone().oneshot(req).await.expect("answer");
            let status = resp.status();
            let bytes = resp.into_body().collect().await.expect("body").to_bytes();
            (
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            )
        }
    }

    #[tokio::test]
    async fn the_openapi_document_lists_exactly_the_served_routes() {
        let n = node();
        let (s, doc) = n.send("GET", OPENAPI_PATH, None).await;
        assert_eq!(s, StatusCode::OK);
        let mut listed = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("item").keys() {
                listed.insert((method.to_uppercase(), path.clone()));
            }
        }
        let ops: BTreeSet<(String, String)> = routes(&n.state)
            .ops()
            .iter()
            .map(|op| {
                (
                    op.verb.as_str().to_string(),
                    format!("{API_ROOT}{}", op.path),
                )
            })
            .collect();
        assert_eq!(listed, ops);
        for must in [
            "/status",
            "/events",
            "/auth/links",
            "/notes",
            "/search",
            "/health",
        ] {
            assert!(
                listed
                    .iter()
                    .any(|(_, p)| *p == format!("{API_ROOT}{must}")),
                "{must}"
            );
        }
        for (method, path) in &listed {
            let concrete = path
                .trim_start_matches(API_ROOT)
                .split('/')
                .map(|seg| {
                    if seg.starts_with('{') {
                        "0123456789abcdef0123456789abcdef"
                    } else {
                        seg
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            let body = (method != "GET" && method != "DELETE").then(|| json!({}));
            let (s, v) = n.send(method, &concrete, body).await;
            assert_ne!(s, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            let fallback = v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("no route"));
            assert!(!fallback, "{method} {path} is documented but not served");
        }
        let (s, _) = n.send("GET", "/not-a-route", None).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn notes_and_status_come_from_the_replica_behind_the_guard() {
        let n = node();
        let (s, created) = n
            .send(
                "POST",
                "/notes",
                Some(json!({ "title": "offline", "content": "x" })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{created}");
        let (s, page) = n.send("GET", "/notes", None).await;
        assert_eq!(
            (s, page["total"].as_u64()),
            (StatusCode::OK, Some(1)),
            "{page}"
        );
        let (s, status) = n.send("GET", "/status", None).await;
        assert_eq!(s, StatusCode::OK, "{status}");
        assert_eq!(status["online"], false, "{status}");
        assert_eq!(status["pending_changes"], 1, "{status}");
        assert_eq!(status["hub"], "hubid", "{status}");
        // Without the credential: 401, naming the node's own command.
        let req = Request::builder()
            .uri(format!("{API_ROOT}/status"))
            .header("host", "127.0.0.1:4300")
            .body(Body::empty())
            .expect("request");
        let resp = n.router.clone().oneshot(req).await.expect("answer");
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("`hearth open`"), "{text}");
    }

    #[tokio::test]
    async fn the_openapi_document_passes_openapi_spec_validator() {
        let n = node();
        let (_, doc) = n.send("GET", OPENAPI_PATH, None).await;
        let file = n._dir.path().join("openapi.json");
        std::fs::write(&file, doc.to_string()).expect("write");
        let probe = std::process::Command::new("python3")
            .args(["-c", "import openapi_spec_validator"])
            .output();
        assert!(
            probe.is_ok_and(|o| o.status.success()),
            "openapi-spec-validator is missing: this test needs it (`python3 -m pip install \
             openapi-spec-validator`)"
        );
        let out = std::process::Command::new("python3")
            .args(["-m", "openapi_spec_validator"])
            .arg(&file)
            .output()
            .expect("run the validator");
        assert!(
            out.status.success(),
            "the OpenAPI document does not validate:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
