//! The hub's API in process (no listener, no packets): conversations and messages per
//! project, the audit log, usage and updates over rows the agent wrote; refusal without
//! a credential; and the OpenAPI document, which must list exactly the routes the router
//! serves and pass `openapi-spec-validator`.

mod api_state;

use api_state::{api_state, TestState};
use std::collections::BTreeSet;

use axum::{http::StatusCode, Router};
use hearth_hub::{
    api::{self, ApiState},
    hubdb,
};
use hearth_sync::DocId;
use serde_json::{json, Value};

struct Hub {
    dir: tempfile::TempDir,
    router: Router,
    token: String,
    general: DocId,
    state: ApiState,
}

async fn hub() -> Hub {
    let dir = tempfile::tempdir().expect("tempdir");
    let TestState {
        state,
        token: secret,
        general,
    } = api_state(dir.path()).await;
    Hub {
        router: api::router(state.clone(), None),
        dir,
        token: secret,
        general,
        state,
    }
}

impl Hub {
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        auth: bool,
    ) -> (StatusCode, Value) {
        let token = auth.then_some(self.token.as_str());
        api_state::send(&self.router, token, method, path, body).await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send("GET", path, None, true).await
    }

    async fn ok(&self, path: &str) -> Value {
        let (s, v) = self.get(path).await;
        assert_eq!(s, StatusCode::OK, "GET {path}: {v}");
        v
    }

    /// Rows as the agent writes them (its writers are private to the turn).
    fn seed(&self, other: DocId) {
        let db = hubdb::open(&self.dir.path().join("hub.db"), hubdb::Durability::Normal)
            .expect("hub.db");
        let g = self.general.to_string();
        let o = other.to_string();
        let text = |t: &str| json!([{"type": "text", "text": t}]).to_string();
        for (i, (p, conv, role, content)) in [
            (&g, "main", "user", text("hi")),
            (&g, "main", "assistant", text("hello")),
            (&g, "main", "user", text("plan my day")),
            (&g, "side", "user", text("aside")),
            (&o, "main", "user", text("elsewhere")),
        ]
        .into_iter()
        .enumerate()
        {
            db.execute(
                "INSERT INTO messages (project, conversation, role, content, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![p, conv, role, content, 1000 + i as i64],
            )
            .expect("message");
        }
        for (at, p, tool) in [
            (10, &g, "notes_create"),
            (20, &g, "tasks_list"),
            (30, &o, "notes_create"),
        ] {
            db.execute(
                "INSERT INTO audit_log (at, conversation, project, tool, args, outcome, is_error)
                 VALUES (?1, 'main', ?2, ?3, '{\"title\":\"x\"}', 'ok', 0)",
                rusqlite::params![at, p, tool],
            )
            .expect("audit");
        }
        for (day, model, p) in [
            ("2026-11-01", "claude", &g),
            ("2026-11-02", "claude", &g),
            ("2026-11-02", "gpt", &o),
        ] {
            db.execute(
                "INSERT INTO usage_daily (day, model, project, input_tokens, output_tokens, requests)
                 VALUES (?1, ?2, ?3, 100, 20, 1)",
                rusqlite::params![day, model, p],
            )
            .expect("usage");
        }
        for (p, t) in [(&g, "shipped"), (&o, "moved")] {
            db.execute(
                "INSERT INTO updates (project, task, text, created_at) VALUES (?1, NULL, ?2, 5)",
                rusqlite::params![p, t],
            )
            .expect("update");
        }
    }
}

async fn other_project(h: &Hub) -> DocId {
    let (s, v) = h
        .send("POST", "/projects", Some(json!({"name": "work"})), true)
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_str().expect("id").parse().expect("doc id")
}

#[tokio::test]
async fn conversations_and_messages_page_per_project_and_archive() {
    let h = hub().await;
    let other = other_project(&h).await;
    h.seed(other);
    let g = h.general;
    let convs = h.ok(&format!("/projects/{g}/conversations")).await;
    assert_eq!(convs["total"], 2, "{convs}");
    assert_eq!(convs["data"][0]["name"], "side", "most recent first");
    assert_eq!(convs["data"][1]["messages"], 3);
    assert_eq!(
        convs["data"][1]["title"], "hi",
        "named by its first message"
    );
    // History, newest first, paged.
    let page = h
        .ok(&format!(
            "/projects/{g}/conversations/main/messages?limit=2"
        ))
        .await;
    assert_eq!(
        (
            page["total"].as_u64(),
            page["data"].as_array().map(Vec::len)
        ),
        (Some(3), Some(2))
    );
    assert_eq!(page["data"][0]["content"][0]["text"], "plan my day");
    let rest = h
        .ok(&format!(
            "/projects/{g}/conversations/main/messages?limit=2&offset=2"
        ))
        .await;
    assert_eq!(rest["data"][0]["content"][0]["text"], "hi");
    // The other project's "main" is another conversation.
    let theirs = h
        .ok(&format!("/projects/{other}/conversations/main/messages"))
        .await;
    assert_eq!(theirs["total"], 1);
    // Archive hides it from the default list; restore brings it back.
    let (s, v) = h
        .send(
            "PATCH",
            &format!("/projects/{g}/conversations/side"),
            Some(json!({"archived": true})),
            true,
        )
        .await;
    assert_eq!((s, v["archived"].clone()), (StatusCode::OK, json!(true)));
    assert_eq!(
        h.ok(&format!("/projects/{g}/conversations")).await["total"],
        1
    );
    let archived = h
        .ok(&format!("/projects/{g}/conversations?archived=true"))
        .await;
    assert_eq!(archived["data"][0]["name"], "side");
    assert!(archived["data"][0]["archived_at"].is_i64());
    h.send(
        "PATCH",
        &format!("/projects/{g}/conversations/side"),
        Some(json!({"archived": false})),
        true,
    )
    .await;
    assert_eq!(
        h.ok(&format!("/projects/{g}/conversations")).await["total"],
        2
    );
    // 404s and bad input.
    let missing = DocId([7; 16]);
    for path in [
        format!("/projects/{missing}/conversations"),
        format!("/projects/{g}/conversations/nope/messages"),
    ] {
        assert_eq!(h.get(&path).await.0, StatusCode::NOT_FOUND, "{path}");
    }
    let (s, _) = h
        .send(
            "PATCH",
            &format!("/projects/{g}/conversations/nope"),
            Some(json!({"archived": true})),
            true,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = h
        .send(
            "PATCH",
            &format!("/projects/{g}/conversations/main"),
            Some(json!({"archived": "yes"})),
            true,
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    for path in [
        "/projects/xyz/conversations".to_string(),
        format!("/projects/{g}/conversations?limit=0"),
        format!("/projects/{g}/conversations/main/messages?limit=501"),
    ] {
        assert_eq!(h.get(&path).await.0, StatusCode::BAD_REQUEST, "{path}");
    }
}

#[tokio::test]
async fn audit_usage_and_updates_filter_and_page() {
    let h = hub().await;
    let other = other_project(&h).await;
    h.seed(other);
    let g = h.general;
    let all = h.ok("/audit").await;
    assert_eq!(all["total"], 3);
    assert_eq!(all["data"][0]["at"], 30, "newest first");
    assert_eq!(all["data"][0]["args"]["title"], "x");
    assert_eq!(h.ok(&format!("/audit?project={g}")).await["total"], 2);
    assert_eq!(h.ok("/audit?tool=notes_create").await["total"], 2);
    assert_eq!(h.ok("/audit?since=15&until=30").await["total"], 1);
    assert_eq!(h.ok("/audit?limit=1&offset=2").await["data"][0]["at"], 10);

    let usage = h.ok("/usage").await;
    assert_eq!(usage["total"], 3);
    assert_eq!(usage["data"][0]["day"], "2026-11-02");
    // "claude" and "gpt" are not in the price table: unknown cost, not free.
    assert_eq!(usage["data"][0]["priced"], false, "{usage}");
    assert_eq!(
        h.ok(&format!("/usage?project={other}")).await["data"][0]["model"],
        "gpt"
    );
    assert_eq!(
        h.ok("/usage?model=claude&since=2026-11-02").await["total"],
        1
    );
    assert_eq!(h.ok("/usage?until=2026-11-01").await["total"], 1);

    let updates = h.ok("/updates").await;
    assert_eq!(updates["total"], 2);
    assert_eq!(
        h.ok(&format!("/updates?project={g}")).await["data"][0]["text"],
        "shipped"
    );

    for path in [
        "/audit?limit=0",
        "/audit?limit=501",
        "/audit?since=yesterday",
        "/audit?project=nothex",
        "/usage?since=2026-1-1",
        "/usage?limit=1000",
        "/updates?project=xyz",
        "/updates?offset=-1",
    ] {
        assert_eq!(h.get(path).await.0, StatusCode::BAD_REQUEST, "{path}");
    }
}

#[tokio::test]
async fn the_general_project_cannot_be_deleted() {
    let h = hub().await;
    let g = h.general;
    let (s, v) = h
        .send("DELETE", &format!("/projects/{g}"), None, true)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(h.ok(&format!("/projects/{g}")).await["name"], "general");
    let other = other_project(&h).await;
    let (s, v) = h
        .send("DELETE", &format!("/projects/{other}"), None, true)
        .await;
    assert_eq!((s, v["projects"].clone()), (StatusCode::OK, json!(1)));
}

#[tokio::test]
async fn every_new_route_refuses_a_request_without_the_credential() {
    let h = hub().await;
    let g = h.general;
    for path in [
        format!("/projects/{g}/conversations"),
        format!("/projects/{g}/conversations/main/messages"),
        "/audit".to_string(),
        "/usage".to_string(),
        "/updates".to_string(),
        "/projects".to_string(),
        "/contacts".to_string(),
        "/skills".to_string(),
        "/openapi.json".to_string(),
    ] {
        let (s, v) = h.send("GET", &path, None, false).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{path}: {v}");
    }
}

/// `(METHOD, /api/v1/path)` of every operation in the document.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_served_routes() {
    let h = hub().await;
    let doc = h.ok("/openapi.json").await;
    let listed = documented(&doc);
    // The document is built from the same list as the router.
    let ops: BTreeSet<(String, String)> = api::routes(&h.state)
        .ops()
        .iter()
        .map(|op| (op.verb.as_str().to_string(), format!("/api/v1{}", op.path)))
        .collect();
    assert_eq!(listed, ops);
    for must in [
        ("GET", "/api/v1/openapi.json"),
        ("GET", "/api/v1/health"),
        ("PATCH", "/api/v1/notes/{id}/text"),
        ("DELETE", "/api/v1/projects/{project}"),
        ("GET", "/api/v1/audit"),
        ("GET", "/api/v1/events"),
    ] {
        assert!(listed.contains(&(must.0.into(), must.1.into())), "{must:?}");
    }
    // And the router serves each: a request reaches a handler (whatever it answers for
    // a made-up id and an empty body), never the fallback or a 405.
    for (method, path) in &listed {
        let concrete = path
            .trim_start_matches("/api/v1")
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
        let (s, v) = h.send(method, &concrete, body, true).await;
        assert_ne!(s, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        let fallback = v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no route"));
        assert!(!fallback, "{method} {path} is documented but not served");
    }
    // A route the document does not list is not served either.
    let (s, v) = h.get("/not-a-route").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
}

#[tokio::test]
async fn the_openapi_document_passes_openapi_spec_validator() {
    let h = hub().await;
    let doc = h.ok("/openapi.json").await;
    let file = h.dir.path().join("openapi.json");
    std::fs::write(&file, doc.to_string()).expect("write");
    let probe = std::process::Command::new("python3")
        .args(["-c", "import openapi_spec_validator"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        _ => panic!(
            "openapi-spec-validator is missing: this test needs it (`python3 -m pip install \
             openapi-spec-validator`; .ci/run installs it in its `openapi-validator` phase)"
        ),
    }
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
