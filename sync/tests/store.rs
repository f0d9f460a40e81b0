//! The store contract as one story per concern: CRUD for every kind, validation,
//! listing, search, tombstones, compaction and several writers on one database file.

use hearth_sync::{
    entity::FieldEdit, store::Listed, Contact, ContactPatch, DocId, DocumentStore, Filter, Kind,
    Note, NotePatch, Origin, Project, Skill, SkillPatch, StoreError, Task, TaskPatch, TaskStatus,
    TextEdit,
};

fn store() -> (tempfile::TempDir, DocumentStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
    (dir, store)
}

fn titles(rows: &[Listed]) -> Vec<String> {
    let mut t: Vec<String> = rows.iter().map(|r| r.title.clone()).collect();
    t.sort();
    t
}

#[test]
fn notes_crud_list_and_search() {
    let (_dir, s) = store();
    let general = s
        .create_blocking(Project {
            name: "general".into(),
            ..Project::default()
        })
        .expect("project");
    let a = s
        .create_blocking(Note {
            project: Some(general.id),
            title: "Groceries".into(),
            content: "- oat milk\n- lemons".into(),
        })
        .expect("note a");
    s.create_blocking(Note {
        project: None,
        title: "Ideas".into(),
        content: "a hearth for agents".into(),
    })
    .expect("note b");

    let got = s.get_blocking::<Note>(a.id).expect("get");
    assert_eq!(got.value.content, "- oat milk\n- lemons");
    assert!(!got.deleted);

    let updated = s
        .update_blocking(
            a.id,
            NotePatch {
                content: Some(TextEdit::Splice {
                    pos: 2,
                    delete: 3,
                    insert: "soy".into(),
                }),
                ..NotePatch::default()
            },
        )
        .expect("splice");
    assert_eq!(updated.value.content, "- soy milk\n- lemons");

    let all = s.list_blocking(&Filter::new(Kind::Note)).expect("list");
    assert_eq!(all.total, 2);
    assert_eq!(titles(&all.data), ["Groceries", "Ideas"]);
    let in_general = s
        .list_blocking(&Filter {
            project: Some(general.id),
            ..Filter::new(Kind::Note)
        })
        .expect("list");
    assert_eq!(titles(&in_general.data), ["Groceries"]);
    let page = s
        .list_blocking(&Filter {
            limit: 1,
            offset: 1,
            ..Filter::new(Kind::Note)
        })
        .expect("page");
    assert_eq!((page.data.len(), page.total), (1, 2));

    let hits = s.search_blocking("lemons", None, 10).expect("search");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].entity.id, a.id);
    assert!(hits[0].snippet.contains("[lemons]"), "{}", hits[0].snippet);
    // FTS syntax in user input is literal, not an error.
    assert!(s
        .search_blocking("\"unbalanced AND (", None, 10)
        .expect("literal")
        .is_empty());

    s.delete_blocking(Kind::Note, a.id).expect("delete");
    s.delete_blocking(Kind::Note, a.id)
        .expect("delete is idempotent");
    assert!(s.get_blocking::<Note>(a.id).expect("tombstone").deleted);
    assert_eq!(
        s.list_blocking(&Filter::new(Kind::Note))
            .expect("list")
            .total,
        1
    );
    assert!(s
        .search_blocking("lemons", None, 10)
        .expect("search")
        .is_empty());
    let err = s
        .update_blocking(
            a.id,
            NotePatch {
                title: Some(TextEdit::Replace("x".into())),
                ..NotePatch::default()
            },
        )
        .expect_err("tombstones refuse edits");
    assert!(matches!(err, StoreError::Deleted { .. }), "{err}");

    let prefix = b_id_prefix(&s);
    assert!(s.resolve_blocking(Kind::Note, &prefix).is_ok());
    assert!(matches!(
        s.resolve_blocking(Kind::Note, "ab"),
        Err(StoreError::Invalid { .. })
    ));
}

fn b_id_prefix(s: &DocumentStore) -> String {
    let page = s.list_blocking(&Filter::new(Kind::Note)).expect("list");
    page.data[0].id.to_string()[..8].to_string()
}

#[test]
fn validation_errors_are_clear_and_change_nothing() {
    let (_dir, s) = store();
    let err = s
        .create_blocking(Note {
            title: " ".into(),
            ..Note::default()
        })
        .expect_err("empty title");
    assert_eq!(err.to_string(), "invalid title: must not be empty");
    let err = s
        .create_blocking(Skill {
            name: "Bad Name".into(),
            ..Skill::default()
        })
        .expect_err("slug");
    assert!(err.to_string().contains("lowercase"), "{err}");
    let err = s
        .create_blocking(Task {
            name: "x".into(),
            status: TaskStatus::Recurring,
            ..Task::default()
        })
        .expect_err("recurring needs interval");
    assert!(err.to_string().contains("interval"), "{err}");
    let err = s
        .create_blocking(Note {
            title: "t".into(),
            project: Some(DocId::random()),
            ..Note::default()
        })
        .expect_err("unknown project");
    assert!(err.to_string().contains("no project"), "{err}");

    let note = s
        .create_blocking(Note {
            title: "keep".into(),
            ..Note::default()
        })
        .expect("note");
    let err = s
        .update_blocking(
            note.id,
            NotePatch {
                content: Some(TextEdit::Splice {
                    pos: 10,
                    delete: 0,
                    insert: "x".into(),
                }),
                ..NotePatch::default()
            },
        )
        .expect_err("splice out of range");
    assert!(err.to_string().contains("outside the text"), "{err}");
    let err = s
        .update_blocking(
            note.id,
            NotePatch {
                title: Some(TextEdit::Replace(String::new())),
                ..NotePatch::default()
            },
        )
        .expect_err("empty title");
    assert!(err.to_string().contains("title"), "{err}");
    // Nothing of the failed edits stuck, in memory or on disk.
    assert_eq!(
        s.get_blocking::<Note>(note.id).expect("get").value.title,
        "keep"
    );
    let reopened = DocumentStore::open(s_path(&_dir)).expect("reopen");
    assert_eq!(
        reopened
            .get_blocking::<Note>(note.id)
            .expect("get")
            .value
            .title,
        "keep"
    );
    assert!(matches!(
        s.get_blocking::<Task>(note.id),
        Err(StoreError::WrongKind { .. })
    ));
}

fn s_path(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("hearth.db")
}

#[test]
fn tasks_subtasks_two_levels_and_status() {
    let (_dir, s) = store();
    let parent = s
        .create_blocking(Task {
            name: "move house".into(),
            ..Task::default()
        })
        .expect("parent");
    let child = s
        .create_blocking(Task {
            name: "pack books".into(),
            parent: Some(parent.id),
            ..Task::default()
        })
        .expect("child");
    let err = s
        .create_blocking(Task {
            name: "find tape".into(),
            parent: Some(child.id),
            ..Task::default()
        })
        .expect_err("third level");
    assert!(err.to_string().contains("two levels"), "{err}");
    let err = s
        .update_blocking(
            parent.id,
            TaskPatch {
                parent: Some(Some(child.id)),
                ..TaskPatch::default()
            },
        )
        .expect_err("parent with children cannot become a subtask");
    assert!(err.to_string().contains("two levels"), "{err}");

    s.update_blocking(
        child.id,
        TaskPatch {
            status: Some(TaskStatus::Complete),
            ..TaskPatch::default()
        },
    )
    .expect("done");
    let open = s
        .list_blocking(&Filter {
            status: Some("incomplete".into()),
            ..Filter::new(Kind::Task)
        })
        .expect("list");
    assert_eq!(titles(&open.data), ["move house"]);
    let subtasks = s
        .list_blocking(&Filter {
            parent: Some(parent.id),
            ..Filter::new(Kind::Task)
        })
        .expect("list");
    assert_eq!(titles(&subtasks.data), ["pack books"]);

    let recurring = s
        .create_blocking(Task {
            name: "water plants".into(),
            status: TaskStatus::Recurring,
            interval: Some("3d".into()),
            due: Some("2026-12-01".into()),
            ..Task::default()
        })
        .expect("recurring");
    assert_eq!(
        s.get_blocking::<Task>(recurring.id)
            .expect("get")
            .value
            .interval
            .as_deref(),
        Some("3d")
    );
}

#[test]
fn contacts_and_skills() {
    let (_dir, s) = store();
    let c = s
        .create_blocking(Contact {
            name: "Ada Lovelace".into(),
            email: Some("ada@example.org".into()),
            tags: vec!["math".into()],
            ..Contact::default()
        })
        .expect("contact");
    let c2 = s
        .update_blocking(
            c.id,
            ContactPatch {
                phone: Some(Some("+44 20 0000".into())),
                tags: Some(vec!["math".into(), "engines".into()]),
                metadata: Some([("met".to_string(), "1833".to_string())].into()),
                ..ContactPatch::default()
            },
        )
        .expect("update");
    assert_eq!(c2.value.tags, ["math", "engines"]);
    assert_eq!(
        c2.value.metadata.get("met").map(String::as_str),
        Some("1833")
    );
    assert_eq!(
        s.search_blocking("engines", Some(Kind::Contact), 5)
            .expect("search")
            .len(),
        1
    );

    let sk = s
        .create_blocking(Skill {
            name: "weekly-review".into(),
            description: "Review the week".into(),
            body: "Summarise $ARGUMENTS".into(),
            project: None,
        })
        .expect("skill");
    let sk2 = s
        .update_blocking(
            sk.id,
            SkillPatch {
                body: Some(TextEdit::Append(" and plan".into())),
                ..SkillPatch::default()
            },
        )
        .expect("append");
    assert_eq!(sk2.value.body, "Summarise $ARGUMENTS and plan");
    let err = s
        .update_blocking(
            sk.id,
            SkillPatch {
                name: Some("Weekly Review".into()),
                ..SkillPatch::default()
            },
        )
        .expect_err("slug");
    assert!(matches!(err, StoreError::Invalid { field: "name", .. }));
    // FieldEdit is the common currency of typed patches.
    assert_eq!(
        hearth_sync::Patch::into_edits(SkillPatch {
            name: Some("x".into()),
            ..SkillPatch::default()
        }),
        vec![FieldEdit::Str("name", Some("x".into()))]
    );
}

#[test]
fn many_edits_compact_and_reload_identically() {
    let (dir, s) = store();
    let n = s
        .create_blocking(Note {
            title: "log".into(),
            ..Note::default()
        })
        .expect("note");
    for i in 0..300 {
        s.update_blocking(
            n.id,
            NotePatch {
                content: Some(TextEdit::Append(format!("line {i}\n"))),
                ..NotePatch::default()
            },
        )
        .expect("append");
    }
    let expected = s.get_blocking::<Note>(n.id).expect("get").value.content;
    assert_eq!(expected.lines().count(), 300);
    drop(s);
    let s = DocumentStore::open(dir.path().join("hearth.db")).expect("reopen");
    assert_eq!(
        s.get_blocking::<Note>(n.id).expect("get").value.content,
        expected
    );
    let chunks: i64 = rusqlite::Connection::open(dir.path().join("hearth.db"))
        .expect("open")
        .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
        .expect("count");
    assert!(
        chunks < 64,
        "compaction keeps chunks bounded, found {chunks}"
    );
}

#[tokio::test]
async fn two_writers_on_one_file_lose_nothing_and_are_announced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hearth.db");
    let daemon = DocumentStore::open(&path).expect("daemon");
    daemon.watch_external_writes().expect("watch");
    let mut feed = daemon.subscribe();
    let cli = DocumentStore::open(&path).expect("cli");

    let note = daemon
        .create(Note {
            title: "shared".into(),
            ..Note::default()
        })
        .await
        .expect("create");
    assert_eq!(
        feed.recv().await.expect("local event").origin,
        Origin::Local
    );
    // Load it into the daemon's cache, then let the other writer change it on disk.
    daemon.get::<Note>(note.id).await.expect("warm cache");
    cli.update(
        note.id,
        NotePatch {
            content: Some(TextEdit::Append("from cli\n".into())),
            ..NotePatch::default()
        },
    )
    .await
    .expect("cli edit");
    let ev = tokio::time::timeout(std::time::Duration::from_secs(2), feed.recv())
        .await
        .expect("announced within 2 s")
        .expect("event");
    assert_eq!(ev.id, note.id);
    assert_eq!(ev.origin, Origin::External);
    // The daemon's stale cache is refreshed, not overwritten.
    daemon
        .update(
            note.id,
            NotePatch {
                content: Some(TextEdit::Append("from daemon\n".into())),
                ..NotePatch::default()
            },
        )
        .await
        .expect("daemon edit");
    for reader in [&daemon, &cli] {
        let content = reader
            .get::<Note>(note.id)
            .await
            .expect("get")
            .value
            .content;
        assert_eq!(content, "from cli\nfrom daemon\n");
    }
}

#[test]
fn a_text_patch_against_old_heads_lands_in_place_after_another_edit() {
    let (_dir, s) = store();
    let note = s
        .create_blocking(Note {
            project: None,
            title: "Astral".into(),
            content: "a😀b𝄞c".into(),
        })
        .expect("note");
    let seen = s
        .get_versioned_blocking::<Note>(note.id)
        .expect("versioned");
    assert_eq!(seen.record.value.content, "a😀b𝄞c");
    // Another edit lands first, before and after the client's spot.
    s.update_blocking(
        note.id,
        NotePatch {
            content: Some(TextEdit::Splice {
                pos: 0,
                delete: 0,
                insert: "🎉".into(),
            }),
            ..NotePatch::default()
        },
    )
    .expect("intervening edit");
    s.update_blocking(
        note.id,
        NotePatch {
            content: Some(TextEdit::Append("🌍".into())),
            ..NotePatch::default()
        },
    )
    .expect("second intervening edit");
    // The client's patch, computed in UTF-16 code units against "a😀b𝄞c": replace "b"
    // (at 1 + 2) with "Y🚀", then insert "!" after "𝄞" in "a😀Y🚀𝄞c" (at 1+2+1+2+2).
    let splices = [
        hearth_sync::TextSplice {
            pos: 3,
            delete: 1,
            insert: "Y🚀".into(),
        },
        hearth_sync::TextSplice {
            pos: 8,
            delete: 0,
            insert: "!".into(),
        },
    ];
    let heads = s
        .update_text_at_blocking(note.id, Kind::Note, "content", &seen.heads, &splices)
        .expect("patch at old heads");
    let now = s.get_versioned_blocking::<Note>(note.id).expect("read");
    assert_eq!(now.record.value.content, "🎉a😀Y🚀𝄞!c🌍");
    assert_eq!(now.heads, heads);
    // The derived rows follow: search finds the merged text.
    assert_eq!(
        s.search_blocking("Astral", None, 5).expect("search").len(),
        1
    );

    // Heads this replica never saw: a conflict, nothing changes.
    let unknown = vec!["ab".repeat(32)];
    let e = s
        .update_text_at_blocking(note.id, Kind::Note, "content", &unknown, &splices)
        .expect_err("unknown heads");
    assert!(matches!(e, StoreError::UnknownHeads { .. }), "{e}");
    // A position inside a surrogate pair, past the end, a non-text field, no heads.
    let bad = |pos, field: &str, heads: &[String]| {
        s.update_text_at_blocking(
            note.id,
            Kind::Note,
            field,
            heads,
            &[hearth_sync::TextSplice {
                pos,
                delete: 0,
                insert: "x".into(),
            }],
        )
        .expect_err("refused")
    };
    for e in [
        bad(1, "content", &now.heads),
        bad(99, "content", &now.heads),
        bad(0, "project", &now.heads),
        bad(0, "content", &[]),
        bad(0, "content", &["zz".into()]),
    ] {
        assert!(matches!(e, StoreError::Invalid { .. }), "{e}");
    }
    let after = s.get_versioned_blocking::<Note>(note.id).expect("read");
    assert_eq!(after.record.value.content, "🎉a😀Y🚀𝄞!c🌍");
    assert_eq!(after.heads, now.heads);
}
