//! The agent's note and task tools: they work inside the invoking project and its
//! children, and cannot read or change anything of its parent or siblings (each is
//! reported as not found, revealing nothing).

use hearth_hub::agent::{
    registry::{Effect, ToolRegistry},
    tools::{system_tools, Risk, ToolContext, ToolError, UpdateLog},
};
use hearth_sync::{DocumentStore, Note, Project, Task};
use serde_json::{json, Value};

struct World {
    _dir: tempfile::TempDir,
    store: DocumentStore,
    x: String,
    updates: std::sync::Arc<UpdateLog>,
    notes: [String; 4], // parent, x, sibling, child
    tasks: [String; 4],
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
    let p = |name: &str, parent| {
        store
            .create_blocking(Project {
                name: name.into(),
                parent,
                instructions: String::new(),
                archived: false,
            })
            .expect("project")
            .id
    };
    let parent = p("home", None);
    let x = p("work", Some(parent));
    let sibling = p("personal", Some(parent));
    let child = p("clients", Some(x));
    let mut notes = Vec::new();
    let mut tasks = Vec::new();
    for (proj, word) in [
        (parent, "parentword"),
        (x, "xword"),
        (sibling, "siblingword"),
        (child, "childword"),
    ] {
        let n = store
            .create_blocking(Note {
                project: Some(proj),
                title: format!("{word} note"),
                content: format!("# T\n{word} body\n"),
            })
            .expect("note");
        notes.push(n.id.to_string());
        let t = store
            .create_blocking(Task {
                project: Some(proj),
                name: format!("{word} task"),
                ..Task::default()
            })
            .expect("task");
        tasks.push(t.id.to_string());
    }
    let updates =
        std::sync::Arc::new(UpdateLog::open(&dir.path().join("hub.db")).expect("updates"));
    World {
        updates,
        _dir: dir,
        store,
        x: x.to_string(),
        notes: notes.try_into().expect("4"),
        tasks: tasks.try_into().expect("4"),
    }
}

async fn run(w: &World, tool: &str, args: Value) -> Result<Value, ToolError> {
    let ctx = ToolContext {
        store: w.store.clone(),
        updates: w.updates.clone(),
        project: w.x.parse().expect("id"),
        project_dir: None,
        secrets: None,
    };
    let tool = ToolRegistry::with_system()
        .get(tool)
        .ok_or_else(|| ToolError::Unknown(tool.to_string()))?;
    tool.handler.call(ctx, args).await
}

#[tokio::test]
async fn tools_work_in_the_project_and_its_children() {
    let w = world();
    let created = run(
        &w,
        "notes_create",
        json!({"title": "Plan", "content": "# Plan\n## April 2026\nold\n"}),
    )
    .await
    .expect("create");
    let id = created["id"].as_str().expect("id").to_string();
    let updated = run(
        &w,
        "notes_update",
        json!({"id": id, "operations": [
            {"op": "replace_section", "heading": "## April 2026", "content": "new"},
            {"op": "append", "text": "done\n"}
        ]}),
    )
    .await
    .expect("update");
    assert_eq!(updated["title"], "Plan");
    let read = run(
        &w,
        "notes_read",
        json!({"id": id, "startLine": 2, "endLine": 3}),
    )
    .await
    .expect("read");
    assert_eq!(read["content"], "## April 2026\nnew\n");
    assert_eq!(
        (read["totalLines"].as_u64(), read["truncated"].as_bool()),
        (Some(4), Some(true))
    );
    // The child project's documents are in reach.
    let child_note = run(&w, "notes_read", json!({"id": w.notes[3]}))
        .await
        .expect("child note");
    assert!(child_note["content"]
        .as_str()
        .expect("text")
        .contains("childword"));
    run(
        &w,
        "tasks_update",
        json!({"id": w.tasks[3], "status": "complete"}),
    )
    .await
    .expect("child task");
    let open = run(&w, "tasks_query", json!({"status": "incomplete"}))
        .await
        .expect("query");
    assert_eq!(open["total"], 1, "{open}");
    let sub = run(
        &w,
        "tasks_create",
        json!({"name": "sub", "parent": w.tasks[1], "project": "clients"}),
    )
    .await
    .expect("subtask");
    assert_eq!(sub["status"], "incomplete");
    assert_eq!(
        run(&w, "notes_search", json!({"query": "childword"}))
            .await
            .expect("search")["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn no_tool_reaches_the_parent_or_a_sibling() {
    let w = world();
    for outside in [0, 2] {
        let (note, task) = (&w.notes[outside], &w.tasks[outside]);
        let calls = [
            ("notes_read", json!({"id": note})),
            ("notes_update", json!({"id": note, "content": "hijacked"})),
            (
                "notes_update",
                json!({"id": note, "operations": [{"op": "append", "text": "x"}]}),
            ),
            ("notes_delete", json!({"id": note})),
            ("tasks_update", json!({"id": task, "status": "cancelled"})),
            ("tasks_delete", json!({"id": task})),
            ("tasks_create", json!({"name": "sneaky", "parent": task})),
            (
                "notes_create",
                json!({"title": "sneaky", "project": "personal"}),
            ),
            (
                "notes_create",
                json!({"title": "sneaky", "project": "home"}),
            ),
            ("tasks_query", json!({"project": "home"})),
        ];
        for (tool, args) in calls {
            let err = run(&w, tool, args.clone()).await.expect_err(tool);
            assert!(
                matches!(err, ToolError::NotFound { .. }),
                "{tool} {args}: {err}"
            );
        }
    }
    // Listing and search never show them.
    let notes = run(&w, "notes_query", json!({})).await.expect("query");
    let titles: Vec<&str> = notes["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|n| n["title"].as_str())
        .collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(
        titles
            .iter()
            .all(|t| t.starts_with("xword") || t.starts_with("childword")),
        "{titles:?}"
    );
    for word in ["parentword", "siblingword"] {
        let hits = run(&w, "notes_search", json!({"query": word}))
            .await
            .expect("search");
        assert_eq!(hits["data"].as_array().map(Vec::len), Some(0), "{word}");
        let hits = run(&w, "tasks_search", json!({"query": word}))
            .await
            .expect("search");
        assert_eq!(hits["data"].as_array().map(Vec::len), Some(0), "{word}");
    }
    // And nothing outside changed.
    let parent_note = w
        .store
        .get_blocking::<Note>(w.notes[0].parse().expect("id"))
        .expect("get");
    assert!(!parent_note.deleted && parent_note.value.content.contains("parentword body"));
}

#[test]
fn deletes_are_risky_and_opt_in() {
    for t in system_tools() {
        let destructive = t.name.ends_with("_delete");
        assert_eq!(t.risk == Risk::Risky, destructive, "{}", t.name);
        assert_eq!(t.effect, Effect::None, "{}: documents only", t.name);
        assert_eq!(t.default_on, !destructive, "{}", t.name);
        assert!(
            t.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{}",
            t.name
        );
        assert_eq!(t.schema["type"], "object");
    }
}

#[tokio::test]
async fn skills_contacts_instructions_and_updates() {
    let w = world();
    // Skills: one in a sibling project (invisible), one global, one created here.
    let sibling: hearth_sync::DocId = w
        .store
        .list_blocking(&hearth_sync::Filter::new(hearth_sync::Kind::Project))
        .expect("list")
        .data
        .iter()
        .find(|p| p.title == "personal")
        .expect("personal")
        .id;
    w.store
        .create_blocking(hearth_sync::Skill {
            project: Some(sibling),
            name: "diary".into(),
            description: "private".into(),
            body: "secret".into(),
        })
        .expect("sibling skill");
    w.store
        .create_blocking(hearth_sync::Skill {
            project: None,
            name: "summarise".into(),
            description: "Summaries".into(),
            body: "Summarise $ARGUMENTS briefly.".into(),
        })
        .expect("global skill");
    let read = run(
        &w,
        "skills_read",
        json!({"name": "summarise", "arguments": "the week"}),
    )
    .await
    .expect("global");
    assert_eq!(read["body"], "Summarise the week briefly.");
    assert!(matches!(
        run(&w, "skills_read", json!({"name": "diary"})).await,
        Err(ToolError::NotFound { .. })
    ));
    assert!(matches!(
        run(&w, "skills_update", json!({"name": "diary", "body": "x"})).await,
        Err(ToolError::NotFound { .. })
    ));
    let found = run(&w, "skills_search", json!({"query": "private"}))
        .await
        .expect("search");
    assert_eq!(found["data"].as_array().map(Vec::len), Some(0));
    run(
        &w,
        "skills_create",
        json!({"name": "standup", "description": "Daily standup", "body": "Ask about $ARGUMENTS"}),
    )
    .await
    .expect("create");
    run(
        &w,
        "skills_update",
        json!({"name": "standup", "body": "Ask the team about $ARGUMENTS"}),
    )
    .await
    .expect("update");
    assert_eq!(
        run(
            &w,
            "skills_read",
            json!({"name": "standup", "arguments": "blockers"})
        )
        .await
        .expect("read")["body"],
        "Ask the team about blockers"
    );
    assert!(matches!(
        run(
            &w,
            "skills_create",
            json!({"name": "Bad Name", "description": "d", "body": "b"})
        )
        .await,
        Err(ToolError::Invalid(_))
    ));

    // Contacts.
    let c = run(&w, "contacts_create", json!({"name": "Ada Lovelace", "email": "ada@example.org", "company": "Engines Ltd", "tags": ["math"]})).await.expect("contact");
    let id = c["id"].as_str().expect("id").to_string();
    run(&w, "contacts_update", json!({"id": id, "phone": "+44 1", "tags": ["math", "friend"], "metadata": {"met": "1833"}})).await.expect("update");
    let full = run(&w, "contacts_read", json!({"id": id}))
        .await
        .expect("read");
    assert_eq!(
        (
            full["phone"].as_str(),
            full["tags"][1].as_str(),
            full["metadata"]["met"].as_str()
        ),
        (Some("+44 1"), Some("friend"), Some("1833"))
    );
    assert_eq!(
        run(&w, "contacts_query", json!({"tag": "friend"}))
            .await
            .expect("q")["total"],
        1
    );
    assert_eq!(
        run(&w, "contacts_query", json!({"company": "engines"}))
            .await
            .expect("q")["total"],
        1
    );
    assert_eq!(
        run(&w, "contacts_query", json!({"query": "nobody"}))
            .await
            .expect("q")["total"],
        0
    );

    // Project instructions: read, then replace.
    assert_eq!(
        run(&w, "project_instructions_update", json!({}))
            .await
            .expect("read")["instructions"],
        ""
    );
    run(
        &w,
        "project_instructions_update",
        json!({"instructions": "Prefer short answers."}),
    )
    .await
    .expect("write");
    assert_eq!(
        run(&w, "project_instructions_update", json!({}))
            .await
            .expect("read")["instructions"],
        "Prefer short answers."
    );

    // Updates: published here; a task of a sibling cannot be referenced.
    run(
        &w,
        "updates_publish",
        json!({"text": "Shipped v1", "taskId": w.tasks[1]}),
    )
    .await
    .expect("publish");
    assert!(matches!(
        run(
            &w,
            "updates_publish",
            json!({"text": "x", "taskId": w.tasks[2]})
        )
        .await,
        Err(ToolError::NotFound { .. })
    ));
    let ups = run(&w, "updates_query", json!({})).await.expect("query");
    assert_eq!(ups["data"][0]["text"], "Shipped v1");
}

#[tokio::test]
async fn tasks_start_records_an_update_in_scope_only() {
    let w = world();
    let started = run(&w, "tasks_start", json!({"id": w.tasks[1]}))
        .await
        .expect("start");
    assert_eq!(started["name"], "xword task");
    let ups = run(&w, "updates_query", json!({})).await.expect("updates");
    assert_eq!(ups["data"][0]["text"], "Started: xword task");
    assert!(matches!(
        run(&w, "tasks_start", json!({"id": w.tasks[2]})).await,
        Err(ToolError::NotFound { .. })
    ));
    run(
        &w,
        "tasks_update",
        json!({"id": w.tasks[1], "status": "complete"}),
    )
    .await
    .expect("done");
    assert!(matches!(
        run(&w, "tasks_start", json!({"id": w.tasks[1]})).await,
        Err(ToolError::Invalid(_))
    ));
}

#[tokio::test]
async fn completing_a_recurring_task_moves_its_due_on() {
    let w = world();
    let plants = w
        .store
        .create_blocking(Task {
            project: Some(w.x.parse().expect("id")),
            name: "water the plants".into(),
            status: hearth_sync::TaskStatus::Recurring,
            interval: Some("3d".into()),
            due: Some("2020-01-01".into()),
            ..Task::default()
        })
        .expect("task")
        .id
        .to_string();
    let answer = run(
        &w,
        "tasks_update",
        json!({"id": plants, "status": "complete"}),
    )
    .await
    .expect("done");
    let today = hearth_ui::local_now();
    let next = hearth_sync::entity::next_due(Some("2020-01-01"), "3d", &today);
    assert_eq!(
        (answer["status"].as_str(), answer["due"].as_str()),
        (Some("recurring"), Some(next.as_str()))
    );
    assert!(
        answer["note"].as_str().expect("note").contains(&next),
        "{answer}"
    );
    // An ordinary task completes.
    let answer = run(
        &w,
        "tasks_update",
        json!({"id": w.tasks[1], "status": "complete"}),
    )
    .await
    .expect("complete");
    assert_eq!(answer["status"], "complete");
    assert!(answer.get("note").is_none());
}
