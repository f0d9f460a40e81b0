//! What the list routes answer beyond the shared fields, over HTTP in process: each
//! kind's own listed fields (a task's `interval`, a contact's `email`, `phone`,
//! `company`, `job_title` and `tags`, a skill's `description`, none for the others), the contacts' `?tag=` filter, moving a
//! skill between projects, and deleting a task with its subtasks.

use axum::http::StatusCode;
use serde_json::{json, Value};

mod common;

use common::Api;

impl Api {
    async fn fails(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, String) {
        let (status, v) = self.call(method, path, body).await;
        assert!(!status.is_success(), "{method} {path}: {status} {v}");
        (
            status,
            v["error"]["message"].as_str().unwrap_or("").to_string(),
        )
    }

    async fn create(&self, path: &str, body: Value) -> String {
        let v = self.ok("POST", path, Some(body)).await;
        v["id"].as_str().expect("id").to_string()
    }

    /// The one row of a listing.
    async fn only_row(&self, path: &str) -> Value {
        let page = self.ok("GET", path, None).await;
        assert_eq!(page["total"], 1, "{path}: {page}");
        page["data"][0].clone()
    }
}

/// The keys of a listed row besides the ones every kind has.
fn own_keys(row: &Value) -> Vec<String> {
    const SHARED: [&str; 9] = [
        "id",
        "kind",
        "title",
        "project",
        "status",
        "due",
        "parent",
        "deleted",
        "updated_at",
    ];
    let mut keys: Vec<String> = row
        .as_object()
        .expect("a row is an object")
        .keys()
        .filter(|k| !SHARED.contains(&k.as_str()) && k.as_str() != "snippet")
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn each_kind_lists_its_own_fields_and_only_those() {
    let api = Api::new();
    api.create(
        "/tasks",
        json!({"name": "water plants", "status": "recurring", "interval": "3d"}),
    )
    .await;
    api.create(
        "/contacts",
        json!({"name": "Ada", "email": "ada@example.org", "tags": ["math", "friend"], "phone": "1",
               "title": "Analyst"}),
    )
    .await;
    api.create(
        "/skills",
        json!({"name": "review", "description": "Review the week", "body": "long instructions"}),
    )
    .await;
    api.create("/notes", json!({"title": "plants", "content": "ferns"}))
        .await;
    api.create("/projects", json!({"name": "home"})).await;

    let task = api.only_row("/tasks").await;
    assert_eq!(own_keys(&task), ["agent_job", "interval"]);
    assert_eq!(task["agent_job"], false);
    assert_eq!(task["interval"], "3d");
    let contact = api.only_row("/contacts").await;
    assert_eq!(
        own_keys(&contact),
        ["company", "email", "job_title", "phone", "tags"]
    );
    assert_eq!(
        (
            contact["email"].clone(),
            contact["phone"].clone(),
            contact["company"].clone(),
            contact["job_title"].clone(),
            contact["tags"].clone()
        ),
        (
            json!("ada@example.org"),
            json!("1"),
            Value::Null,
            json!("Analyst"),
            json!(["math", "friend"])
        )
    );
    let skill = api.only_row("/skills").await;
    assert_eq!(own_keys(&skill), ["description"]);
    assert_eq!(skill["description"], "Review the week");
    assert!(own_keys(&api.only_row("/notes").await).is_empty());
    assert!(own_keys(&api.only_row("/projects").await).is_empty());

    // A contact without email or tags still lists both keys; a task that does not repeat
    // lists a null interval.
    let bob = api.create("/contacts", json!({"name": "Bob"})).await;
    let rows = api.ok("GET", "/contacts", None).await;
    let bob = rows["data"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["id"] == bob.as_str())
        .expect("bob")
        .clone();
    assert_eq!(
        (bob["email"].clone(), bob["tags"].clone()),
        (Value::Null, json!([]))
    );
    api.create("/tasks", json!({"name": "once"})).await;
    let once = api.only_row("/tasks?status=incomplete").await;
    assert_eq!(
        (own_keys(&once), once["interval"].clone()),
        (
            vec!["agent_job".to_string(), "interval".to_string()],
            Value::Null
        )
    );

    // Search hits are listed rows too.
    let hits = api.ok("GET", "/search?q=plants", None).await;
    let hit = hits
        .as_array()
        .expect("hits")
        .iter()
        .find(|h| h["kind"] == "task")
        .expect("task hit")
        .clone();
    assert_eq!(hit["interval"], "3d");
}

#[tokio::test]
async fn contacts_filter_by_tag() {
    let api = Api::new();
    for (name, tags) in [
        ("Ada", json!(["math", "friend"])),
        ("Bob", json!(["friend"])),
        ("Cy", json!([])),
    ] {
        api.create("/contacts", json!({"name": name, "tags": tags}))
            .await;
    }
    let friends = api.ok("GET", "/contacts?tag=friend", None).await;
    let mut names: Vec<&str> = friends["data"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["title"].as_str().expect("title"))
        .collect();
    names.sort();
    assert_eq!(
        (names, friends["total"].clone()),
        (vec!["Ada", "Bob"], json!(2))
    );
    assert_eq!(
        api.ok("GET", "/contacts?tag=math&limit=1", None).await["total"],
        1
    );
    assert_eq!(
        api.ok("GET", "/contacts?tag=nobody", None).await["total"],
        0
    );
    let (status, message) = api.fails("GET", "/tasks?tag=friend", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("only contacts have tags"), "{message}");
}

#[tokio::test]
async fn a_skill_moves_between_a_project_and_every_project() {
    let api = Api::new();
    let work = api.create("/projects", json!({"name": "work"})).await;
    let sid = api.create("/skills", json!({"name": "standup"})).await;
    let in_work = format!("/skills?project={work}");
    assert_eq!(api.ok("GET", &in_work, None).await["total"], 0);

    let sk = api
        .ok(
            "PATCH",
            &format!("/skills/{sid}"),
            Some(json!({"project": work})),
        )
        .await;
    assert_eq!(sk["project"], work.as_str());
    assert_eq!(api.ok("GET", &in_work, None).await["total"], 1);
    // Other fields leave the project alone.
    let sk = api
        .ok(
            "PATCH",
            &format!("/skills/{sid}"),
            Some(json!({"description": {"replace": "Daily"}})),
        )
        .await;
    assert_eq!(sk["project"], work.as_str());

    let (status, _) = api
        .fails(
            "PATCH",
            &format!("/skills/{sid}"),
            Some(json!({"project": "00000000000000000000000000000000"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api
        .fails(
            "PATCH",
            &format!("/skills/{sid}"),
            Some(json!({"project": "not-an-id"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let sk = api
        .ok(
            "PATCH",
            &format!("/skills/{sid}"),
            Some(json!({"project": null})),
        )
        .await;
    assert_eq!(sk["project"], Value::Null);
    assert_eq!(api.ok("GET", &in_work, None).await["total"], 0);
}

#[tokio::test]
async fn deleting_a_task_deletes_its_subtasks() {
    let api = Api::new();
    let trip = api.create("/tasks", json!({"name": "trip"})).await;
    let pack = api
        .create("/tasks", json!({"name": "pack", "parent": trip}))
        .await;
    let book = api
        .create("/tasks", json!({"name": "book", "parent": trip}))
        .await;
    let other = api.create("/tasks", json!({"name": "other"})).await;

    let (status, _) = api.call("DELETE", &format!("/tasks/{trip}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for gone in [&trip, &pack, &book] {
        let (status, _) = api.call("GET", &format!("/tasks/{gone}"), None).await;
        assert_eq!(status, StatusCode::GONE, "{gone}");
    }
    assert_eq!(
        api.ok("GET", &format!("/tasks?parent={trip}"), None).await["total"],
        0
    );
    assert_eq!(api.only_row("/tasks").await["id"], other.as_str());
    // Again: nothing left to delete, still a success.
    let (status, _) = api.call("DELETE", &format!("/tasks/{trip}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api
        .fails("DELETE", "/tasks/00000000000000000000000000000000", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let note = api.create("/notes", json!({"title": "n"})).await;
    let (status, _) = api.fails("DELETE", &format!("/tasks/{note}"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
