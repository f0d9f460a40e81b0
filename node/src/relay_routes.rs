//! The routes of the node's API that its hub answers: every forwarded route of the
//! shared relay table (`hearth_ui::RELAYED`: chat, approvals, conversation history,
//! usage, the audit log, settings, devices), each passed over the [`HubLink`] with its
//! method, path, query and body, the hub's answer streamed back as it comes (a chat's
//! server-sent events flow through).
//!
//! While the hub is unreachable every one answers 503 `hub_unreachable` at once, and
//! works again by itself when the link is back. The event stream is not forwarded here:
//! the node reads it with [`HubLink::events`] and merges it into its own.
//!
//! Decides nothing about access: the hub checks every relayed request against this
//! device's current scope and admin flag. Whoever mounts these routes guards them (the
//! node's owner credential).

use axum::{
    body::{Body, Bytes},
    http::{header, HeaderValue, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use futures_util::StreamExt;
use hearth_protocol::{RpcMethod, RPC_MAX_BODY};
use hearth_ui::{api::ApiError, ApiRoutes, RelayKind, RELAYED};

use crate::hub_link::{HubLink, LinkError};

/// Where the node mounts its API: relayed paths are relative to it.
const API_ROOT: &str = "/api/v1";

/// The relayed routes over `link`, to merge into the node's API (nested at `/api/v1`).
pub fn relay_routes<S: Clone + Send + Sync + 'static>(link: HubLink) -> ApiRoutes<S> {
    let mut routes = ApiRoutes::new("hub");
    for r in RELAYED.iter().filter(|r| r.kind == RelayKind::Forward) {
        let link = link.clone();
        let handler = move |method: Method, uri: Uri, body: Bytes| async move {
            forward(&link, method, uri, body).await
        };
        routes = routes
            .route(r.verb, r.path, r.summary, handler)
            .query(r.query);
    }
    routes
}

/// What a `hub_unreachable` message says after its reason (clients may replace it).
pub(crate) const NEEDS_THE_HUB: &str = "chat, approvals, history, settings and devices need the hub; this works again by itself once the hub is reachable";

fn unreachable(why: &LinkError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "hub_unreachable",
        format!("{why}: {NEEDS_THE_HUB}"),
    )
}

async fn forward(link: &HubLink, method: Method, uri: Uri, body: Bytes) -> Response {
    let Some(method) = RpcMethod::parse(method.as_str()) else {
        return ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{method} is not relayed"),
        )
        .into_response();
    };
    if body.len() > RPC_MAX_BODY {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("a relayed request body may be at most {RPC_MAX_BODY} bytes"),
        )
        .into_response();
    }
    // Nested at the API root, axum hands the handler the path below it; strip the root
    // anyway should a caller pass the whole path.
    let path = uri.path();
    let path = path
        .strip_prefix(API_ROOT)
        .filter(|p| p.starts_with('/'))
        .unwrap_or(path);
    let path = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let answer = match link.request(method, &path, body.to_vec()).await {
        Ok(a) => a,
        Err(e @ LinkError::Request(_)) => {
            return ApiError::bad_request(e.to_string()).into_response()
        }
        Err(e) => return unreachable(&e).into_response(),
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let event_stream = answer.content_type.starts_with("text/event-stream");
    let mut resp =
        Body::from_stream(answer.body.map(|chunk| chunk.map(Bytes::from))).into_response();
    *resp.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(&answer.content_type) {
        if !answer.content_type.is_empty() {
            resp.headers_mut().insert(header::CONTENT_TYPE, v);
        }
    }
    if event_stream {
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use axum::http::Request;
    use hearth_net::{NetSettings, NoHooks, RelaySetting};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;
    use crate::HubLocator;

    async fn offline_link() -> HubLink {
        let net = NetSettings {
            bind: "127.0.0.1:0".parse().expect("addr"),
            relay: RelaySetting::Disabled,
        };
        let endpoint = hearth_net::bind_endpoint(
            iroh::SecretKey::generate(),
            &net,
            Vec::new(),
            None::<NoHooks>,
        )
        .await
        .expect("endpoint");
        // A hub key nobody holds, at a loopback port nothing answers on.
        let hub = HubLocator {
            id: iroh::SecretKey::generate().public(),
            addrs: vec!["127.0.0.1:9".parse().expect("addr")],
            relay: None,
            mdns: false,
        };
        HubLink::start(endpoint, hub)
    }

    #[tokio::test]
    async fn every_forwarded_route_is_served_and_answers_503_at_once_while_offline() {
        let link = offline_link().await;
        let routes = relay_routes::<()>(link.clone());
        let forwarded = RELAYED
            .iter()
            .filter(|r| r.kind == RelayKind::Forward)
            .count();
        assert_eq!(routes.ops().len(), forwarded);
        assert!(
            routes.ops().iter().all(|op| op.path != "/events"),
            "the event stream is the node's own"
        );
        let app = axum::Router::new().nest(API_ROOT, routes.into_parts().0);
        for (method, path) in [
            ("POST", "/api/v1/chat"),
            ("GET", "/api/v1/approvals?waiting=true"),
            ("GET", "/api/v1/devices"),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", "application/json")
                .body(Body::from(r#"{"message":"hi"}"#))
                .expect("request");
            let started = Instant::now();
            let resp = app.clone().oneshot(req).await.expect("infallible");
            let took = started.elapsed();
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert!(took < Duration::from_millis(100), "{path} took {took:?}");
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(v["error"]["code"], "hub_unreachable", "{v}");
        }
        let big = Request::builder()
            .method("POST")
            .uri("/api/v1/chat")
            .body(Body::from(vec![b' '; RPC_MAX_BODY + 1]))
            .expect("request");
        let resp = app.oneshot(big).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
        link.shutdown().await;
        assert_eq!(*link.state().borrow(), crate::LinkState::Stopped);
    }
}
