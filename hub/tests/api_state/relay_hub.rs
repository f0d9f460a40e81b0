//! A hub's API in process with both ways in: the owner's router (with the owner's
//! token) and the rpc relay a paired device's requests take, plus paired devices of any
//! scope — what the route tests of settings, notifications and schedules share.

use axum::{
    body::Body,
    http::{Request, StatusCode},
    response::Response,
    Router,
};
use hearth_hub::{
    api::{self, ApiState},
    rpc_service::Relay,
};
use hearth_protocol::{RpcMethod, RpcRequest};
use hearth_sync::DocId;
use http_body_util::BodyExt;
use iroh::{EndpointId, SecretKey};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::{api_state, TestState, PORT};

/// The API of a fresh hub.
pub struct Hub {
    /// Its data directory.
    pub dir: tempfile::TempDir,
    /// The owner's router.
    pub router: Router,
    /// The owner's token.
    pub token: String,
    /// The API's state.
    pub state: ApiState,
    /// The rpc relay.
    pub relay: Relay,
}

/// A fresh hub.
pub async fn hub() -> Hub {
    let dir = tempfile::tempdir().expect("tempdir");
    let TestState { state, token, .. } = api_state(dir.path()).await;
    Hub {
        router: api::router(state.clone(), None),
        relay: Relay::new(state.clone()),
        dir,
        token,
        state,
    }
}

/// The status and JSON body (`null` if none) of `resp`.
pub async fn json_of(resp: Response) -> (StatusCode, Value) {
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

impl Hub {
    /// A request with the owner's credential.
    pub async fn owner(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let req = Request::builder()
            .method(method)
            .uri(format!("/api/v1{path}"))
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .expect("request");
        json_of(self.router.clone().oneshot(req).await.expect("infallible")).await
    }

    /// A project made by the owner.
    pub async fn project(&self, name: &str, parent: Option<DocId>) -> DocId {
        let mut body = json!({ "name": name });
        if let Some(p) = parent {
            body["parent"] = json!(p.to_string());
        }
        let (s, v) = self.owner("POST", "/projects", Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        v["id"].as_str().expect("id").parse().expect("doc id")
    }

    /// A paired device scoped to `scope` (none: full), an admin or not.
    pub fn device(&self, scope: Option<DocId>, admin: bool) -> EndpointId {
        let id = SecretKey::generate().public();
        let scope = scope.map(|s| s.to_string());
        self.state
            .registry
            .add(&id, "laptop", scope.as_deref())
            .expect("add");
        self.state
            .registry
            .set_admin(&id.to_string(), admin)
            .expect("admin");
        id
    }

    /// A request `device` relays, answered by the relay.
    pub async fn relayed(
        &self,
        device: EndpointId,
        method: RpcMethod,
        path: &str,
        body: Option<Value>,
    ) -> Response {
        let req = RpcRequest {
            method,
            path: path.into(),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        };
        self.relay.answer(device, req).await
    }

    /// The status and JSON of a relayed request.
    pub async fn relay(
        &self,
        device: EndpointId,
        method: RpcMethod,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        json_of(self.relayed(device, method, path, body).await).await
    }

    /// The error code of a relayed request, or `ok` for a 2xx.
    pub async fn code(
        &self,
        device: EndpointId,
        method: RpcMethod,
        path: &str,
        body: Option<Value>,
    ) -> String {
        let (s, v) = self.relay(device, method, path, body).await;
        if s.is_success() {
            "ok".into()
        } else {
            v["error"]["code"].as_str().unwrap_or("?").to_string()
        }
    }
}
