//! The plugin routes in process (no listener, no packets, no server started: the plugins
//! here stay disabled or have their tools registered by hand): adding with the warning,
//! listing with states, secret bindings shown by key only, patching, the built-in that
//! cannot be removed, the owner's direct tool call (audited under `api`, confined to the
//! tool's project), and none of it open to a paired device, a stranger or another site.

mod api_state;

use std::sync::Arc;

use api_state::{api_state, TestState};
use axum::{http::StatusCode, Router};
use hearth_hub::{
    agent::{
        registry::{Effect, ToolDescriptor, ToolFuture, ToolHandler, ToolSource},
        tools::{Risk, ToolContext, ToolError},
    },
    api::{self, ApiState},
};
use serde_json::{json, Value};

struct Hub {
    _dir: tempfile::TempDir,
    router: Router,
    token: String,
    state: ApiState,
}

async fn hub() -> Hub {
    let dir = tempfile::tempdir().expect("tempdir");
    let TestState { state, token, .. } = api_state(dir.path()).await;
    Hub {
        router: api::router(state.clone(), None),
        _dir: dir,
        token,
        state,
    }
}

impl Hub {
    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        api_state::send(&self.router, Some(&self.token), method, path, body).await
    }
}

fn sleeper(name: &str) -> Value {
    json!({"name": name, "servers": [
        {"name": "main", "transport": "stdio", "command": "sleep", "args": ["1000"]}
    ]})
}

struct Echo;
impl ToolHandler for Echo {
    fn call(&self, _ctx: ToolContext, args: Value) -> ToolFuture {
        Box::pin(async move {
            match args.get("fail") {
                Some(_) => Err(ToolError::Failed("it failed as asked".into())),
                None => Ok(args),
            }
        })
    }
}

fn echo(name: &str, only_in: Option<hearth_sync::DocId>) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        description: "echoes".into(),
        schema: json!({"type": "object"}),
        risk: Risk::Risky,
        default_on: true,
        effect: Effect::None,
        reads_untrusted: true,
        risk_of_call: None,
        only_in,
        source: ToolSource::System,
        handler: Arc::new(Echo),
    }
}

#[tokio::test]
async fn plugins_are_added_listed_patched_and_removed() {
    let h = hub().await;
    let (s, v) = h.send("POST", "/plugins", Some(sleeper("slow"))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["enabled"], false, "added disabled unless asked");
    let warning = v["warning"].as_str().expect("warning");
    assert!(warning.contains("as the hub's user"), "{warning}");
    assert!(warning.contains("Command: sleep 1000"), "{warning}");
    assert_eq!(v["servers"][0]["status"]["state"], "stopped");
    assert_eq!(v["servers"][0]["call_timeout_secs"], 30);

    let (s, _) = h.send("POST", "/plugins", Some(sleeper("slow"))).await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, v) = h.send("POST", "/plugins", Some(sleeper("Bad Name"))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let mut secret_unbound = sleeper("secretive");
    secret_unbound["env"] = json!([{"name": "TOKEN", "source": {"secret": "token"}}]);
    let (s, v) = h
        .send("POST", "/plugins", Some(secret_unbound.clone()))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "a secret needs a project: {v}");

    // Bound to a project, a secret binding shows its key, never the value.
    let general = h.state.chat.general.to_string();
    let (s, _) = h
        .send(
            "PUT",
            &format!("/projects/{general}/secrets/token"),
            Some(json!({"value": "hunter2-xyz"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    secret_unbound["project"] = json!("general");
    let (s, v) = h.send("POST", "/plugins", Some(secret_unbound)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["project"], json!(general));
    let (_, v) = h.send("GET", "/plugins/secretive", None).await;
    assert_eq!(
        v["env"][0],
        json!({"name": "TOKEN", "source": {"secret": "token"}})
    );
    let (_, all) = h.send("GET", "/plugins", None).await;
    assert!(!all.to_string().contains("hunter2-xyz"));
    let names: Vec<&str> = all["data"]
        .as_array()
        .expect("page")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["computer", "secretive", "slow"]);
    assert_eq!(all["data"][0]["builtin"], true);

    let (s, v) = h
        .send(
            "PATCH",
            "/plugins/slow",
            Some(json!({"settings": {"k": 1}, "project": "general"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["settings"], json!({"k": 1}));
    assert_eq!(v["project"], json!(general));
    let (_, v) = h
        .send("PATCH", "/plugins/slow", Some(json!({"project": null})))
        .await;
    assert_eq!(v["project"], Value::Null);
    let (s, _) = h
        .send("PATCH", "/plugins/slow", Some(json!({"servers": []})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let (s, v) = h.send("DELETE", "/plugins/computer", None).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "builtin");
    let (s, v) = h
        .send(
            "PATCH",
            "/plugins/computer",
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _) = h.send("DELETE", "/plugins/slow", None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = h.send("GET", "/plugins/slow", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    h.state.plugins.shutdown().await;
}

#[tokio::test]
async fn the_owner_calls_a_tool_directly_and_it_is_audited() {
    let h = hub().await;
    let (s, _) = h.send("POST", "/plugins", Some(sleeper("fake"))).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, other) = h
        .send("POST", "/projects", Some(json!({"name": "elsewhere"})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{other}");
    let elsewhere: hearth_sync::DocId = other["id"].as_str().expect("id").parse().expect("id");
    h.state.chat.agent.tools().set_source(
        ToolSource::Plugin {
            plugin: "fake".into(),
            server: Some("main".into()),
        },
        vec![echo("fake_echo", None), echo("fake_bound", Some(elsewhere))],
    );

    let (s, v) = h.send("GET", "/plugins/fake/tools", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["total"], 2);
    assert_eq!(v["data"][1]["name"], "fake_echo");
    assert_eq!(v["data"][1]["risky"], true);
    assert_eq!(v["data"][1]["live"], true);

    // By the server's name or the registered one.
    let (s, v) = h
        .send(
            "POST",
            "/plugins/fake/tools/echo",
            Some(json!({"arguments": {"word": "hello"}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v, json!({"output": {"word": "hello"}, "isError": false}));
    let (_, v) = h
        .send(
            "POST",
            "/plugins/fake/tools/fake_echo",
            Some(json!({"arguments": {"fail": true}})),
        )
        .await;
    assert_eq!(v, json!({"output": "it failed as asked", "isError": true}));
    let (_, audit) = h.send("GET", "/audit?tool=fake_echo", None).await;
    let rows = audit["data"].as_array().expect("audit page");
    assert_eq!(rows.len(), 2, "{audit}");
    assert!(rows.iter().all(|r| r["conversation"] == "api"), "{audit}");

    // A tool bound to another project is not offered in general.
    let (s, v) = h
        .send(
            "POST",
            "/plugins/fake/tools/bound",
            Some(json!({"arguments": {}})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = h
        .send(
            "POST",
            "/plugins/fake/tools/bound",
            Some(json!({"project": "elsewhere", "arguments": {}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // Another plugin's tool is not this plugin's.
    let (s, _) = h
        .send("POST", "/plugins/computer/tools/fake_echo", Some(json!({})))
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    h.state.plugins.shutdown().await;
}

#[test]
fn no_plugin_route_is_open_to_a_paired_device() {
    for route in hearth_ui::relayed::RELAYED {
        assert!(!route.path.starts_with("/plugins"), "{}", route.path);
    }
}

/// A request to `router` with exactly these headers (besides Host).
async fn raw(router: &Router, method: &str, path: &str, headers: &[(&str, &str)]) -> StatusCode {
    use tower::ServiceExt;
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(format!("/api/v1{path}"))
        .header("host", format!("127.0.0.1:{}", api_state::PORT))
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = axum::body::Body::from(sleeper("evil").to_string());
    router
        .clone()
        .oneshot(req.body(body).expect("request"))
        .await
        .expect("infallible")
        .status()
}

#[tokio::test]
async fn a_stranger_or_a_hostile_page_cannot_add_or_run_a_plugin() {
    let h = hub().await;
    let bearer = format!("Bearer {}", h.token);
    for (method, path) in [
        ("POST", "/plugins"),
        ("PATCH", "/plugins/computer"),
        ("DELETE", "/plugins/computer"),
        ("POST", "/plugins/computer/tools/computer_terminal_run"),
    ] {
        // No credential: a stranger on loopback.
        assert_eq!(
            raw(&h.router, method, path, &[]).await,
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
        // A page on another site riding the owner's credential.
        assert_eq!(
            raw(
                &h.router,
                method,
                path,
                &[
                    ("authorization", &bearer),
                    ("origin", "http://evil.example")
                ]
            )
            .await,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
    // Nothing was added.
    let (status, page) = h.send("GET", "/plugins", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["total"], 1, "only the built-in: {page}");
}
