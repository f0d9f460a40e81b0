//! The document routes over HTTP, in process: every resource's success, bad input,
//! pagination bounds and 404s, projects' subtree operations, and text patches against
//! old heads with characters outside the basic plane.

use axum::http::StatusCode;
use serde_json::{json, Value};

mod common;

use common::Api;

impl Api {
    async fn status(&self, method: &str, path: &str, body: Option<Value>) -> StatusCode {
        let (status, v) = self.call(method, path, body).await;
        if !status.is_success() {
            assert!(v["error"]["code"].is_string(), "{method} {path}: {v}");
        }
        status
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_string()
}

const MISSING: &str = "00000000000000000000000000000000";

#[tokio::test]
async fn projects_create_rename_move_archive_and_delete_a_subtree() {
    let api = Api::new();
    let work = api
        .ok("POST", "/projects", Some(json!({"name": "work"})))
        .await;
    let w = id(&work);
    let sub = api
        .ok(
            "POST",
            "/projects",
            Some(json!({"name": "acme", "parent": w})),
        )
        .await;
    let s = id(&sub);
    let other = id(&api
        .ok("POST", "/projects", Some(json!({"name": "home"})))
        .await);
    assert_eq!(
        api.status("POST", "/projects", Some(json!({"name": "Bad Name"})))
            .await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        api.status("POST", "/projects", Some(json!({"nom": "x"})))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // Rename, move to another parent, move to the root, refuse a cycle.
    let p = api
        .ok(
            "PATCH",
            &format!("/projects/{s}"),
            Some(json!({"name": "acme-inc"})),
        )
        .await;
    assert_eq!(p["name"], "acme-inc");
    let p = api
        .ok(
            "PATCH",
            &format!("/projects/{s}"),
            Some(json!({"parent": other})),
        )
        .await;
    assert_eq!(p["parent"], other.as_str());
    let p = api
        .ok(
            "PATCH",
            &format!("/projects/{s}"),
            Some(json!({"parent": null})),
        )
        .await;
    assert_eq!(p["parent"], Value::Null);
    api.ok(
        "PATCH",
        &format!("/projects/{s}"),
        Some(json!({"parent": w})),
    )
    .await;
    assert_eq!(
        api.status(
            "PATCH",
            &format!("/projects/{w}"),
            Some(json!({"parent": s}))
        )
        .await,
        StatusCode::BAD_REQUEST,
        "a project cannot move under its own child"
    );
    // Archive hides it from the default listing.
    let p = api
        .ok(
            "PATCH",
            &format!("/projects/{other}"),
            Some(json!({"archived": true})),
        )
        .await;
    assert_eq!(p["archived"], true);
    let live = api.ok("GET", "/projects", None).await;
    assert_eq!(live["total"], 2, "{live}");
    let archived = api.ok("GET", "/projects?archived=true", None).await;
    assert_eq!(archived["data"][0]["id"], other.as_str());
    let children = api.ok("GET", &format!("/projects?parent={w}"), None).await;
    assert_eq!(children["total"], 1);
    // Pagination bounds.
    let page = api.ok("GET", "/projects?limit=1&offset=1", None).await;
    assert_eq!(
        (
            page["total"].as_u64(),
            page["data"].as_array().map(Vec::len)
        ),
        (Some(2), Some(1))
    );
    for q in ["limit=0", "limit=501", "limit=x", "parent=nothex"] {
        assert_eq!(
            api.status("GET", &format!("/projects?{q}"), None).await,
            StatusCode::BAD_REQUEST,
            "{q}"
        );
    }
    // 404s.
    for (m, body) in [
        ("GET", None),
        ("PATCH", Some(json!({"name": "x"}))),
        ("DELETE", None),
    ] {
        assert_eq!(
            api.status(m, &format!("/projects/{MISSING}"), body).await,
            StatusCode::NOT_FOUND,
            "{m}"
        );
    }
    assert_eq!(
        api.status("GET", "/projects/xyz", None).await,
        StatusCode::BAD_REQUEST
    );
    // Deleting "work" takes "acme-inc" and the documents of both.
    let n1 = id(&api
        .ok("POST", "/notes", Some(json!({"title": "a", "project": w})))
        .await);
    let t1 = id(&api
        .ok("POST", "/tasks", Some(json!({"name": "b", "project": s})))
        .await);
    let keep = id(&api
        .ok(
            "POST",
            "/notes",
            Some(json!({"title": "c", "project": other})),
        )
        .await);
    let gone = api.ok("DELETE", &format!("/projects/{w}"), None).await;
    assert_eq!(gone, json!({"projects": 2, "documents": 2}));
    for path in [
        format!("/projects/{w}"),
        format!("/projects/{s}"),
        format!("/notes/{n1}"),
        format!("/tasks/{t1}"),
    ] {
        assert_eq!(
            api.status("GET", &path, None).await,
            StatusCode::GONE,
            "{path}"
        );
    }
    api.ok("GET", &format!("/notes/{keep}"), None).await;
    assert_eq!(
        api.status("DELETE", &format!("/projects/{w}"), None).await,
        StatusCode::GONE
    );
}

#[tokio::test]
async fn a_text_patch_against_old_heads_keeps_both_edits_in_place() {
    let api = Api::new();
    let note = api
        .ok(
            "POST",
            "/notes",
            Some(json!({"title": "t", "content": "a😀b𝄞c"})),
        )
        .await;
    let n = id(&note);
    let old_heads = note["heads"].clone();
    // Other edits land first (another tab, or a peer through the store): one patch at
    // the current heads (applied in place), one append.
    let first = api
        .ok(
            "PATCH",
            &format!("/notes/{n}/text"),
            Some(json!({"field": "content", "heads": old_heads,
                        "splices": [{"pos": 0, "insert": "🎉"}]})),
        )
        .await;
    assert_eq!(first["content"], "🎉a😀b𝄞c");
    // A positional edit outside a text patch does not exist (one unit in the API).
    assert_eq!(
        api.status(
            "PATCH",
            &format!("/notes/{n}"),
            Some(json!({"content": {"splice": {"pos": 0, "insert": "x"}}}))
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    api.ok(
        "PATCH",
        &format!("/notes/{n}"),
        Some(json!({"content": {"append": "🌍"}})),
    )
    .await;
    // Computed by a browser against "a😀b𝄞c", in UTF-16 code units.
    let patched = api
        .ok(
            "PATCH",
            &format!("/notes/{n}/text"),
            Some(json!({
                "field": "content",
                "heads": old_heads,
                "splices": [
                    {"pos": 3, "delete": 1, "insert": "Y🚀"},
                    {"pos": 8, "insert": "!"}
                ]
            })),
        )
        .await;
    assert_eq!(patched["content"], "🎉a😀Y🚀𝄞!c🌍");
    assert_ne!(patched["heads"], old_heads);
    let unknown = json!({"field": "content", "heads": ["ab".repeat(32)], "splices": []});
    assert_eq!(
        api.status("PATCH", &format!("/notes/{n}/text"), Some(unknown))
            .await,
        StatusCode::CONFLICT
    );
    let heads = patched["heads"].clone();
    for bad in [
        json!({"field": "content", "heads": heads, "splices": [{"pos": 1, "insert": "x"}]}),
        json!({"field": "content", "heads": heads, "splices": [{"pos": 99}]}),
        json!({"field": "project", "heads": heads, "splices": []}),
        json!({"field": "content", "heads": [], "splices": []}),
        json!({"field": "content", "heads": ["zz"], "splices": []}),
    ] {
        assert_eq!(
            api.status("PATCH", &format!("/notes/{n}/text"), Some(bad.clone()))
                .await,
            StatusCode::BAD_REQUEST,
            "{bad}"
        );
    }
    let body = json!({"field": "content", "heads": heads, "splices": []});
    assert_eq!(
        api.status("PATCH", &format!("/notes/{MISSING}/text"), Some(body))
            .await,
        StatusCode::NOT_FOUND
    );
    let now = api.ok("GET", &format!("/notes/{n}"), None).await;
    assert_eq!(now["content"], "🎉a😀Y🚀𝄞!c🌍");
}

#[tokio::test]
async fn contacts_and_skills_have_the_same_shape() {
    let api = Api::new();
    let c = api
        .ok(
            "POST",
            "/contacts",
            Some(json!({"name": "Ada", "email": "ada@example.org", "tags": ["math"]})),
        )
        .await;
    let cid = id(&c);
    assert_eq!(c["tags"], json!(["math"]));
    assert_eq!(
        api.status(
            "POST",
            "/contacts",
            Some(json!({"name": "B", "email": "nope"}))
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    let c = api
        .ok(
            "PATCH",
            &format!("/contacts/{cid}"),
            Some(json!({"email": null, "company": "Engines", "notes": {"append": "hi"}})),
        )
        .await;
    assert_eq!(
        (c["email"].clone(), c["company"].clone(), c["notes"].clone()),
        (Value::Null, json!("Engines"), json!("hi"))
    );
    let c = api
        .ok(
            "PATCH",
            &format!("/contacts/{cid}/text"),
            Some(json!({"field": "notes", "heads": c["heads"], "splices": [{"pos": 0, "insert": "💡"}]})),
        )
        .await;
    assert_eq!(c["notes"], "💡hi");
    api.ok("POST", "/contacts", Some(json!({"name": "Bob"})))
        .await;
    let page = api.ok("GET", "/contacts?limit=1", None).await;
    assert_eq!(
        (page["total"].as_u64(), page["limit"].as_u64()),
        (Some(2), Some(1))
    );

    let work = id(&api
        .ok("POST", "/projects", Some(json!({"name": "work"})))
        .await);
    let sk = api
        .ok(
            "POST",
            "/skills",
            Some(json!({"name": "standup", "project": work, "body": "Summarise $ARGUMENTS"})),
        )
        .await;
    let sid = id(&sk);
    api.ok("POST", "/skills", Some(json!({"name": "global"})))
        .await;
    assert_eq!(
        api.status("POST", "/skills", Some(json!({"name": "No Slug"})))
            .await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        api.status(
            "POST",
            "/skills",
            Some(json!({"name": "x", "project": MISSING}))
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    let in_work = api
        .ok("GET", &format!("/skills?project={work}"), None)
        .await;
    assert_eq!(in_work["total"], 1);
    let sk = api
        .ok(
            "PATCH",
            &format!("/skills/{sid}"),
            Some(json!({"name": "daily", "description": {"replace": "Daily notes"}})),
        )
        .await;
    assert_eq!(
        (sk["name"].clone(), sk["description"].clone()),
        (json!("daily"), json!("Daily notes"))
    );
    for kind in ["contacts", "skills", "notes", "tasks"] {
        assert_eq!(
            api.status("GET", &format!("/{kind}/{MISSING}"), None).await,
            StatusCode::NOT_FOUND,
            "{kind}"
        );
        assert_eq!(
            api.status("DELETE", &format!("/{kind}/{MISSING}"), None)
                .await,
            StatusCode::NOT_FOUND,
            "{kind}"
        );
        assert_eq!(
            api.status("GET", &format!("/{kind}?limit=501"), None).await,
            StatusCode::BAD_REQUEST,
            "{kind}"
        );
    }
    // A note's id is not a contact.
    let note = id(&api.ok("POST", "/notes", Some(json!({"title": "n"}))).await);
    assert_eq!(
        api.status("GET", &format!("/contacts/{note}"), None).await,
        StatusCode::BAD_REQUEST
    );
    api.ok("DELETE", &format!("/contacts/{cid}"), None).await;
    api.ok("DELETE", &format!("/skills/{sid}"), None).await;
    assert_eq!(
        api.status("GET", &format!("/skills/{sid}"), None).await,
        StatusCode::GONE
    );
    assert_eq!(api.ok("GET", "/contacts", None).await["total"], 1);
}

#[tokio::test]
async fn tasks_patch_moves_and_clears_fields() {
    let api = Api::new();
    let p = id(&api
        .ok("POST", "/projects", Some(json!({"name": "p"})))
        .await);
    let t = api
        .ok(
            "POST",
            "/tasks",
            Some(json!({"name": "do", "due": "2026-12-01"})),
        )
        .await;
    let tid = id(&t);
    let t = api
        .ok(
            "PATCH",
            &format!("/tasks/{tid}"),
            Some(json!({"due": null, "project": p, "status": "complete"})),
        )
        .await;
    assert_eq!(
        (t["due"].clone(), t["project"].clone(), t["status"].clone()),
        (Value::Null, json!(p), json!("complete"))
    );
    assert_eq!(
        api.status(
            "PATCH",
            &format!("/tasks/{tid}"),
            Some(json!({"status": "maybe"}))
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    let done = api.ok("GET", "/tasks?status=complete", None).await;
    assert_eq!(done["total"], 1);
}

#[tokio::test]
async fn done_moves_a_recurring_task_on_and_completes_the_rest() {
    let api = Api::new();
    let plants = id(&api
        .ok(
            "POST",
            "/tasks",
            Some(json!({"name": "water", "status": "recurring", "interval": "3d", "due": "2020-01-01"})),
        )
        .await);
    let t = api.ok("POST", &format!("/tasks/{plants}/done"), None).await;
    let due = t["due"].as_str().expect("due").to_string();
    assert_eq!(t["status"], "recurring");
    // On from the original date in steps of 3 days, to the first after today.
    let today = hearth_ui::local_now()[..10].to_string();
    let expected = hearth_sync::entity::next_due(Some("2020-01-01"), "3d", &today);
    assert_eq!(due, expected);
    assert!(due.as_str() > today.as_str(), "{due} after {today}");

    let once = id(&api
        .ok("POST", "/tasks", Some(json!({"name": "call"})))
        .await);
    let t = api.ok("POST", &format!("/tasks/{once}/done"), None).await;
    assert_eq!(t["status"], "complete");
    assert_eq!(
        api.status("POST", &format!("/tasks/{MISSING}/done"), None)
            .await,
        StatusCode::NOT_FOUND
    );
}
