//! Listed rows carry what a listing shows of each kind (a task's interval, a contact's
//! email, phone, company, job title and tags, a skill's description) without loading a
//! document: kept current by
//! every write path (create, patch, text patch, delete, a peer's snapshot, a peer's sync
//! message), filled by migration 5 for a database written before it, and filtered by tag
//! in SQL. Also: deleting a task with its subtasks in one go, and moving a skill.

use automerge::{sync, transaction::Transactable, AutoCommit, ObjType, ROOT};
use hearth_protocol::{DocIndex, DocSnapshot};
use hearth_sync::{
    store::Listed, Contact, ContactPatch, Details, DocId, DocumentStore, Filter, Kind, Note,
    Origin, PeerTag, Project, Skill, SkillPatch, StoreError, Task, TaskPatch, TaskStatus, TextEdit,
    TextSplice,
};

const PEER: Origin = Origin::Peer(PeerTag(3));

fn store() -> (tempfile::TempDir, DocumentStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
    (dir, store)
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Every row of `kind`, tombstones included.
fn rows(s: &DocumentStore, kind: Kind) -> Vec<Listed> {
    let mut all = Vec::new();
    loop {
        let page = s
            .list_blocking(&Filter {
                include_deleted: true,
                limit: 500,
                offset: all.len() as u32,
                ..Filter::new(kind)
            })
            .expect("list");
        let done = page.data.len() < 500;
        all.extend(page.data);
        if done {
            return all;
        }
    }
}

fn row(s: &DocumentStore, kind: Kind, id: DocId) -> Listed {
    rows(s, kind)
        .into_iter()
        .find(|r| r.id == id)
        .expect("listed")
}

fn details(s: &DocumentStore, kind: Kind, id: DocId) -> Details {
    row(s, kind, id).details
}

/// A contact's listed details, with no phone, company nor job title.
fn contact_details(email: Option<&str>, tags: &[&str]) -> Details {
    Details::Contact {
        email: email.map(str::to_string),
        phone: None,
        company: None,
        job_title: None,
        tags: tags.iter().map(|t| t.to_string()).collect(),
    }
}

fn tagged(s: &DocumentStore, tag: &str) -> Vec<String> {
    let mut names: Vec<String> = s
        .list_blocking(&Filter {
            tag: Some(tag.into()),
            limit: 500,
            ..Filter::new(Kind::Contact)
        })
        .expect("list")
        .data
        .into_iter()
        .map(|r| r.title)
        .collect();
    names.sort();
    names
}

fn heads(s: &DocumentStore, id: DocId) -> Vec<String> {
    s.get_versioned_blocking::<Skill>(id).expect("skill").heads
}

#[test]
fn local_writes_keep_each_kinds_listed_details_current() {
    let (_dir, s) = store();
    let task = s
        .create_blocking(Task {
            name: "water plants".into(),
            status: TaskStatus::Recurring,
            interval: Some("3d".into()),
            ..Task::default()
        })
        .expect("task");
    assert_eq!(
        details(&s, Kind::Task, task.id),
        Details::Task {
            interval: Some("3d".into()),
            agent_job: false,
        }
    );
    s.update_blocking(
        task.id,
        TaskPatch {
            status: Some(TaskStatus::Incomplete),
            interval: Some(None),
            ..TaskPatch::default()
        },
    )
    .expect("stop repeating");
    assert_eq!(
        details(&s, Kind::Task, task.id),
        Details::Task {
            interval: None,
            agent_job: false
        }
    );

    let ada = s
        .create_blocking(Contact {
            name: "Ada".into(),
            email: Some("ada@example.org".into()),
            tags: vec!["math".into(), "friend".into()],
            ..Contact::default()
        })
        .expect("ada");
    assert_eq!(
        details(&s, Kind::Contact, ada.id),
        contact_details(Some("ada@example.org"), &["math", "friend"])
    );
    s.update_blocking(
        ada.id,
        ContactPatch {
            phone: Some(Some("+44 20 7946 0000".into())),
            company: Some(Some("Engines".into())),
            title: Some(Some("Analyst".into())),
            ..ContactPatch::default()
        },
    )
    .expect("patch");
    assert_eq!(
        details(&s, Kind::Contact, ada.id),
        Details::Contact {
            email: Some("ada@example.org".into()),
            phone: Some("+44 20 7946 0000".into()),
            company: Some("Engines".into()),
            job_title: Some("Analyst".into()),
            tags: vec!["math".into(), "friend".into()],
        }
    );
    s.update_blocking(
        ada.id,
        ContactPatch {
            email: Some(None),
            phone: Some(None),
            company: Some(None),
            title: Some(None),
            tags: Some(vec!["engines".into()]),
            ..ContactPatch::default()
        },
    )
    .expect("patch");
    assert_eq!(
        details(&s, Kind::Contact, ada.id),
        contact_details(None, &["engines"])
    );

    let skill = s
        .create_blocking(Skill {
            name: "review".into(),
            description: "Review the week".into(),
            ..Skill::default()
        })
        .expect("skill");
    assert_eq!(
        details(&s, Kind::Skill, skill.id),
        Details::Skill {
            description: "Review the week".into()
        }
    );
    // A text patch against heads is a write path of its own.
    s.update_text_at_blocking(
        skill.id,
        Kind::Skill,
        "description",
        &heads(&s, skill.id),
        &[TextSplice {
            pos: 0,
            delete: 0,
            insert: "Weekly: ".into(),
        }],
    )
    .expect("text patch");
    assert_eq!(
        details(&s, Kind::Skill, skill.id),
        Details::Skill {
            description: "Weekly: Review the week".into()
        }
    );
    // A long description is listed cut, whole in the document.
    let long = "word ".repeat(200);
    s.update_blocking(
        skill.id,
        SkillPatch {
            description: Some(TextEdit::Replace(long.clone())),
            ..SkillPatch::default()
        },
    )
    .expect("long");
    let Details::Skill { description } = details(&s, Kind::Skill, skill.id) else {
        panic!("a skill lists a description");
    };
    assert!(description.ends_with('…'), "{description}");
    assert_eq!(description.chars().count(), 300);
    assert_eq!(
        s.get_blocking::<Skill>(skill.id)
            .expect("skill")
            .value
            .description,
        long
    );

    // A tombstone keeps its details; kinds with nothing more list none.
    s.delete_blocking(Kind::Contact, ada.id).expect("delete");
    let gone = row(&s, Kind::Contact, ada.id);
    assert!(gone.deleted);
    assert_eq!(gone.details, contact_details(None, &["engines"]));
    let note = s
        .create_blocking(Note {
            title: "n".into(),
            ..Note::default()
        })
        .expect("note");
    assert_eq!(details(&s, Kind::Note, note.id), Details::None);
    let p = s
        .create_blocking(Project {
            name: "home".into(),
            ..Project::default()
        })
        .expect("project");
    assert_eq!(details(&s, Kind::Project, p.id), Details::None);
    // Search hits are listed rows too.
    let hits = s.search_blocking("plants", None, 10).expect("search");
    assert_eq!(
        hits[0].entity.details,
        Details::Task {
            interval: None,
            agent_job: false
        }
    );
}

#[test]
fn a_peers_snapshot_and_sync_message_keep_listed_details_current() {
    let (_dir, hub) = store();
    let (_dir2, node) = store();
    let c = node
        .create_blocking(Contact {
            name: "Grace".into(),
            email: Some("grace@example.org".into()),
            tags: vec!["navy".into()],
            ..Contact::default()
        })
        .expect("contact");
    // Received whole: stored unverified, listed once the verifier derived its row.
    let snaps = block_on(node.export(vec![c.id])).expect("export");
    assert_eq!(block_on(hub.import(snaps, PEER, None)).expect("import"), 1);
    assert_eq!(
        details(&hub, Kind::Contact, c.id),
        contact_details(Some("grace@example.org"), &["navy"])
    );

    // A sync message that edits the tags.
    let bytes = block_on(hub.export(vec![c.id]))
        .expect("export")
        .remove(0)
        .bytes;
    let mut doc = AutoCommit::load(&bytes).expect("load");
    let before = doc.get_heads();
    let tags = doc.put_object(ROOT, "tags", ObjType::List).expect("tags");
    doc.insert(&tags, 0, "cobol").expect("tag");
    doc.commit();
    let msg = sync::Message {
        heads: doc.get_heads(),
        need: Vec::new(),
        have: Vec::new(),
        changes: vec![doc.save_after(&before)].into(),
        flags: None,
        version: sync::MessageVersion::V1,
    };
    block_on(hub.receive_sync(c.id, sync::State::new(), msg.encode(), PEER, None)).expect("sync");
    assert_eq!(
        details(&hub, Kind::Contact, c.id),
        contact_details(Some("grace@example.org"), &["cobol"])
    );

    // A task sent whole by another implementation, with a plain interval string.
    let id = DocId::random();
    let mut doc = AutoCommit::new();
    doc.put(ROOT, "schema", "hearth/1").expect("schema");
    doc.put(ROOT, "kind", "task").expect("kind");
    doc.put(ROOT, "name", "stretch").expect("name");
    doc.put(ROOT, "status", "recurring").expect("status");
    doc.put(ROOT, "interval", "1d").expect("interval");
    doc.commit();
    let snap = DocSnapshot {
        id: id.0,
        heads: doc.get_heads().iter().map(|h| h.0).collect(),
        bytes: doc.save(),
        index: DocIndex {
            kind: "task".into(),
            project: None,
            title: "stretch".into(),
            status: None,
            due: None,
            parent: None,
            deleted: false,
            updated_at: 0,
        },
    };
    block_on(hub.import(vec![snap], PEER, None)).expect("import");
    assert_eq!(
        details(&hub, Kind::Task, id),
        Details::Task {
            interval: Some("1d".into()),
            agent_job: false,
        }
    );
}

#[test]
fn contacts_filter_by_tag_in_the_listing() {
    let (_dir, s) = store();
    for (name, tags) in [
        ("Ada", vec!["math", "friend"]),
        ("Bob", vec!["friend"]),
        ("Cy", vec![]),
        ("Dee", vec!["mathematics"]),
    ] {
        s.create_blocking(Contact {
            name: name.into(),
            tags: tags.into_iter().map(String::from).collect(),
            ..Contact::default()
        })
        .expect("contact");
    }
    assert_eq!(tagged(&s, "friend"), ["Ada", "Bob"]);
    // Whole tags only, as written.
    assert_eq!(tagged(&s, "math"), ["Ada"]);
    assert!(tagged(&s, "Math").is_empty());
    assert!(tagged(&s, "nobody").is_empty());
    let page = s
        .list_blocking(&Filter {
            tag: Some("friend".into()),
            limit: 1,
            ..Filter::new(Kind::Contact)
        })
        .expect("page");
    assert_eq!((page.data.len(), page.total), (1, 2));
}

#[test]
fn migration_5_fills_the_rows_of_documents_written_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hearth.db");
    let (task, contact, skill, note) = {
        let s = DocumentStore::open(&path).expect("open");
        let task = s
            .create_blocking(Task {
                name: "water plants".into(),
                status: TaskStatus::Recurring,
                interval: Some("2w".into()),
                ..Task::default()
            })
            .expect("task");
        let contact = s
            .create_blocking(Contact {
                name: "Ada".into(),
                email: Some("ada@example.org".into()),
                tags: vec!["math".into()],
                ..Contact::default()
            })
            .expect("contact");
        let skill = s
            .create_blocking(Skill {
                name: "review".into(),
                description: "Review the week".into(),
                ..Skill::default()
            })
            .expect("skill");
        let note = s
            .create_blocking(Note {
                title: "plants".into(),
                content: "ferns like shade".into(),
                ..Note::default()
            })
            .expect("note");
        s.delete_blocking(Kind::Skill, skill.id).expect("delete");
        (task.id, contact.id, skill.id, note.id)
    };
    // Back to the schema before migration 5: no `details` column, version 4.
    {
        let conn = rusqlite::Connection::open(&path).expect("raw");
        conn.execute_batch("ALTER TABLE entities DROP COLUMN details; PRAGMA user_version = 4;")
            .expect("downgrade");
    }
    let s = DocumentStore::open(&path).expect("migrate");
    assert_eq!(
        details(&s, Kind::Task, task),
        Details::Task {
            interval: Some("2w".into()),
            agent_job: false,
        }
    );
    assert_eq!(
        details(&s, Kind::Contact, contact),
        contact_details(Some("ada@example.org"), &["math"])
    );
    assert_eq!(
        details(&s, Kind::Skill, skill),
        Details::Skill {
            description: "Review the week".into()
        }
    );
    assert!(row(&s, Kind::Skill, skill).deleted);
    assert_eq!(details(&s, Kind::Note, note), Details::None);
    assert_eq!(tagged(&s, "math"), ["Ada"]);
    // The re-derived rows are searchable as before, once each.
    let hits = s.search_blocking("plants", None, 10).expect("search");
    assert_eq!(hits.len(), 2, "{hits:?}");
    drop(s);
    let conn = rusqlite::Connection::open(&path).expect("raw");
    let (version, stale): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM entities WHERE indexed = 0)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("state");
    assert_eq!((version, stale), (5, 0));
}

#[test]
fn rows_marked_stale_are_re_derived_when_the_store_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hearth.db");
    let ids: Vec<DocId> = {
        let s = DocumentStore::open(&path).expect("open");
        (0..600)
            .map(|i| {
                s.create_blocking(Contact {
                    name: format!("person {i}"),
                    tags: vec![format!("t{}", i % 3)],
                    ..Contact::default()
                })
                .expect("contact")
                .id
            })
            .collect()
    };
    {
        let conn = rusqlite::Connection::open(&path).expect("raw");
        conn.execute_batch("UPDATE entities SET details = NULL, indexed = 0")
            .expect("clear");
    }
    // More than one batch, and none of it loaded for the listing itself.
    let s = DocumentStore::open(&path).expect("reopen");
    assert_eq!(tagged(&s, "t1").len(), 200);
    let listed = rows(&s, Kind::Contact);
    assert_eq!(listed.len(), ids.len());
    assert!(listed.iter().all(|r| matches!(
        &r.details,
        Details::Contact { tags, .. } if tags.len() == 1
    )));
}

fn task(s: &DocumentStore, name: &str, parent: Option<DocId>) -> DocId {
    s.create_blocking(Task {
        name: name.into(),
        parent,
        ..Task::default()
    })
    .expect("task")
    .id
}

fn live_tasks(s: &DocumentStore) -> Vec<String> {
    let mut names: Vec<String> = s
        .list_blocking(&Filter::new(Kind::Task))
        .expect("list")
        .data
        .into_iter()
        .map(|r| r.title)
        .collect();
    names.sort();
    names
}

#[test]
fn deleting_a_task_deletes_its_subtasks_in_one_go() {
    let (_dir, s) = store();
    let trip = task(&s, "trip", None);
    let pack = task(&s, "pack", Some(trip));
    let book = task(&s, "book", Some(trip));
    let done = task(&s, "visa", Some(trip));
    s.delete_blocking(Kind::Task, done)
        .expect("one subtask first");
    let other = task(&s, "other", None);
    task(&s, "other step", Some(other));
    let mut feed = s.subscribe();

    assert_eq!(s.delete_task_tree_blocking(trip).expect("delete"), 3);
    assert_eq!(live_tasks(&s), ["other", "other step"]);
    let mut announced = Vec::new();
    while let Ok(change) = feed.try_recv() {
        announced.push(change.id);
    }
    announced.sort();
    let mut expected = vec![trip, pack, book];
    expected.sort();
    assert_eq!(announced, expected);
    // Idempotent, and a tombstone's forgotten subtask still goes.
    assert_eq!(s.delete_task_tree_blocking(trip).expect("again"), 0);
    let orphan = task(&s, "orphan", Some(other));
    s.delete_blocking(Kind::Task, other).expect("parent alone");
    assert_eq!(s.delete_task_tree_blocking(other).expect("clean up"), 2);
    assert!(live_tasks(&s).is_empty());
    assert!(row(&s, Kind::Task, orphan).deleted);

    let err = s
        .delete_task_tree_blocking(DocId::random())
        .expect_err("missing");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
    let note = s
        .create_blocking(Note {
            title: "n".into(),
            ..Note::default()
        })
        .expect("note");
    let err = s
        .delete_task_tree_blocking(note.id)
        .expect_err("not a task");
    assert!(matches!(err, StoreError::WrongKind { .. }), "{err}");
    assert!(!row(&s, Kind::Note, note.id).deleted);
}

#[test]
fn a_skill_moves_to_a_project_and_back_to_every_project() {
    let (_dir, s) = store();
    let work = s
        .create_blocking(Project {
            name: "work".into(),
            ..Project::default()
        })
        .expect("work");
    let skill = s
        .create_blocking(Skill {
            name: "standup".into(),
            ..Skill::default()
        })
        .expect("skill");
    let in_work = |s: &DocumentStore| {
        s.list_blocking(&Filter {
            project: Some(work.id),
            ..Filter::new(Kind::Skill)
        })
        .expect("list")
        .total
    };
    let moved = s
        .update_blocking(
            skill.id,
            SkillPatch {
                project: Some(Some(work.id)),
                ..SkillPatch::default()
            },
        )
        .expect("move");
    assert_eq!(moved.value.project, Some(work.id));
    assert_eq!(in_work(&s), 1);
    let err = s
        .update_blocking(
            skill.id,
            SkillPatch {
                project: Some(Some(DocId::random())),
                ..SkillPatch::default()
            },
        )
        .expect_err("no such project");
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                field: "project",
                ..
            }
        ),
        "{err}"
    );
    let shared = s
        .update_blocking(
            skill.id,
            SkillPatch {
                project: Some(None),
                ..SkillPatch::default()
            },
        )
        .expect("every project");
    assert_eq!(shared.value.project, None);
    assert_eq!(in_work(&s), 0);
}
