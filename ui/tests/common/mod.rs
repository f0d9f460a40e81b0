//! The in-process HTTP client the ui crate's route tests share: a fresh store behind
//! `hearth_ui::router`, JSON in and out.

#![allow(dead_code)]

use axum::{
    body::Body,
    http::{Request, StatusCode},
    Router,
};
use hearth_sync::DocumentStore;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

pub(crate) struct Api {
    _dir: tempfile::TempDir,
    router: Router,
}

impl Api {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
        Self {
            _dir: dir,
            router: hearth_ui::router(store),
        }
    }

    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(path);
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let resp = self
            .router
            .clone()
            .oneshot(req.body(body).expect("request"))
            .await
            .expect("infallible");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("json answer")
        };
        (status, value)
    }

    pub(crate) async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method, path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v
    }
}
