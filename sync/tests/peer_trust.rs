//! Attacks from peers on the store, one test each, named after what it stops: scope
//! escapes through snapshots and sync messages, renaming or moving a scope's root, forged
//! placements (for the root, for a project outside, out of the scope, into a cycle, for
//! another project), new top-level projects from a scoped device, skills moved out of a
//! scope, bad and inflating snapshots, a database from a newer build.

use std::io::Write;

use automerge::{sync, transaction::Transactable, ActorId, AutoCommit, ROOT};
use hearth_protocol::{DocIndex, DocSnapshot};
use hearth_sync::{
    placement_id, DocId, DocumentStore, Kind, Note, Origin, PeerTag, Project, ProjectPatch, Skill,
    StoreError,
};

fn store() -> (tempfile::TempDir, DocumentStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
    (dir, store)
}

const PEER: Origin = Origin::Peer(PeerTag(7));

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn import(
    s: &DocumentStore,
    docs: Vec<DocSnapshot>,
    scope: Option<DocId>,
) -> Result<usize, StoreError> {
    block_on(s.import(docs, PEER, scope))
}

fn exported(s: &DocumentStore, ids: Vec<DocId>) -> Vec<DocSnapshot> {
    block_on(s.export(ids)).expect("export")
}

fn bytes_of(s: &DocumentStore, id: DocId) -> Vec<u8> {
    exported(s, vec![id]).remove(0).bytes
}

/// `home` (root) ⊃ `work` ⊃ a note; a secret note in `home`.
struct Tree {
    home: DocId,
    work: DocId,
    secret: DocId,
}

fn tree(s: &DocumentStore) -> Tree {
    let home = s
        .create_blocking(Project {
            name: "home".into(),
            ..Project::default()
        })
        .expect("home");
    let work = s
        .create_blocking(Project {
            name: "work".into(),
            parent: Some(home.id),
            ..Project::default()
        })
        .expect("work");
    s.create_blocking(Note {
        project: Some(work.id),
        title: "standup".into(),
        content: "notes".into(),
    })
    .expect("work note");
    let secret = s
        .create_blocking(Note {
            project: Some(home.id),
            title: "diary".into(),
            content: "private".into(),
        })
        .expect("secret");
    Tree {
        home: home.id,
        work: work.id,
        secret: secret.id,
    }
}

fn snapshot(id: DocId, doc: &mut AutoCommit, kind: &str, title: &str) -> DocSnapshot {
    DocSnapshot {
        id: id.0,
        heads: doc.get_heads().iter().map(|h| h.0).collect(),
        bytes: doc.save(),
        index: DocIndex {
            kind: kind.into(),
            project: None,
            title: title.into(),
            status: None,
            due: None,
            parent: None,
            deleted: false,
            updated_at: 0,
        },
    }
}

/// A document written from scratch by an attacker whose actor id and op counter win every
/// conflict with the real document's fields.
fn forged_project(name: &str, parent: DocId) -> AutoCommit {
    let mut doc = AutoCommit::new().with_actor(ActorId::from(vec![0xff; 16]));
    for i in 0..2_000 {
        doc.put(ROOT, "pad", i).expect("pad");
    }
    doc.put(ROOT, "kind", "project").expect("kind");
    doc.put(ROOT, "name", name).expect("name");
    doc.put(ROOT, "parent", parent.to_string()).expect("parent");
    doc.commit();
    doc
}

#[test]
fn scoped_snapshot_for_a_known_id_cannot_pull_a_project_into_scope() {
    let (_dir, hub) = store();
    let t = tree(&hub);
    // The device scoped to `work` knows `home`'s id from `work.parent` and sends a
    // snapshot for it whose `parent` (work) would win the merge.
    let mut forged = forged_project("home", t.work);
    let snap = snapshot(t.home, &mut forged, "project", "home");
    let _ = import(&hub, vec![snap], Some(t.work));
    let home = hub.get_blocking::<Project>(t.home).expect("home");
    assert_eq!(home.value.parent, None, "home was moved by a scoped device");
    let scope = hub.scope_blocking(t.work).expect("scope");
    assert!(!scope.contains_project(&t.home));
    // And the secret note stays invisible to the device.
    let entries: Vec<DocId> = block_on(hub.entries_in((0..=255).collect(), Some(t.work)))
        .expect("entries")
        .into_iter()
        .map(|e| DocId(e.id))
        .collect();
    assert!(!entries.contains(&t.secret) && !entries.contains(&t.home));
}

#[test]
fn scoped_device_cannot_rename_or_move_its_root() {
    let (_dir, hub) = store();
    let t = tree(&hub);
    for (name, parent) in [("pwned", Some(t.home)), ("work", None)] {
        // Starts from the real `work` document, as the device has it.
        let bytes = bytes_of(&hub, t.work);
        let mut doc = AutoCommit::load(&bytes).expect("load");
        doc.put(ROOT, "name", name).expect("name");
        match parent {
            Some(p) => doc.put(ROOT, "parent", p.to_string()).expect("parent"),
            None => doc.delete(ROOT, "parent").expect("unparent"),
        }
        doc.commit();
        let snap = snapshot(t.work, &mut doc, "project", name);
        let _ = import(&hub, vec![snap], Some(t.work));
        let work = hub.get_blocking::<Project>(t.work).expect("work");
        assert_eq!(work.value.name, "work");
        assert_eq!(work.value.parent, Some(t.home));
    }
}

#[test]
fn scoped_sync_message_cannot_move_a_document_out_of_scope() {
    let (_dir, hub) = store();
    let t = tree(&hub);
    let note = hub
        .create_blocking(Note {
            project: Some(t.work),
            title: "plan".into(),
            content: "x".into(),
        })
        .expect("note");
    let bytes = bytes_of(&hub, note.id);
    let mut doc = AutoCommit::load(&bytes).expect("load");
    let before = doc.get_heads();
    doc.put(ROOT, "project", t.home.to_string()).expect("move");
    doc.commit();
    let change = doc.save_after(&before);
    let msg = sync::Message {
        heads: doc.get_heads(),
        need: Vec::new(),
        have: Vec::new(),
        changes: vec![change].into(),
        flags: None,
        version: sync::MessageVersion::V1,
    };
    let err = block_on(hub.receive_sync(
        note.id,
        sync::State::new(),
        msg.encode(),
        PEER,
        Some(t.work),
    ))
    .expect_err("refused");
    assert!(matches!(err, StoreError::OutOfScope { .. }), "{err}");
    // The refused change is in neither the store nor its cache.
    let now = hub.get_blocking::<Note>(note.id).expect("note");
    assert_eq!(now.value.project, Some(t.work));
}

#[test]
fn peer_project_names_are_validated() {
    let (_dir, hub) = store();
    let t = tree(&hub);
    let bytes = bytes_of(&hub, t.work);
    let mut doc = AutoCommit::load(&bytes).expect("load");
    doc.put(ROOT, "name", "../../etc").expect("name");
    doc.commit();
    let snap = snapshot(t.work, &mut doc, "project", "x");
    // Even from a full-scope peer.
    let _ = import(&hub, vec![snap], None);
    assert_eq!(
        hub.get_blocking::<Project>(t.work)
            .expect("work")
            .value
            .name,
        "work"
    );
    // A new project with a bad name never becomes visible either.
    let mut bad = AutoCommit::new();
    bad.put(ROOT, "kind", "project").expect("kind");
    bad.put(ROOT, "name", "a/b").expect("name");
    bad.commit();
    let id = DocId::random();
    let snap = snapshot(id, &mut bad, "project", "a/b");
    let _ = import(&hub, vec![snap], None);
    hub.verify_all_pending_blocking().expect("verify");
    assert!(hub.get_blocking::<Project>(id).is_err());
    assert_eq!(hub.quarantined_blocking().expect("q"), 2);
}

#[test]
fn unverifiable_snapshot_is_quarantined_never_searched_or_forwarded() {
    let (_dir, hub) = store();
    let mut good = AutoCommit::new();
    good.put(ROOT, "kind", "note").expect("kind");
    good.put(ROOT, "title", "kiwi jam").expect("title");
    good.commit();
    let good_id = DocId::random();
    let bad_id = DocId::random();
    let mut bad = snapshot(bad_id, &mut AutoCommit::new(), "note", "kiwi bait");
    bad.heads = vec![[9; 32]];
    bad.bytes = b"\x85\x6f\x4a\x83 not a document at all".to_vec();
    let before = hub.summary_blocking().expect("summary");
    import(
        &hub,
        vec![bad, snapshot(good_id, &mut good, "note", "kiwi jam")],
        None,
    )
    .expect("the batch is stored");
    // Until verified, neither is forwarded or counted in the summary.
    assert_eq!(hub.summary_blocking().expect("summary"), before);
    hub.verify_all_pending_blocking().expect("verify");
    let hits = hub
        .search_blocking("kiwi", Some(Kind::Note), 10)
        .expect("search");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].entity.id, good_id);
    assert_eq!(hub.quarantined_blocking().expect("q"), 1);
    assert!(exported(&hub, vec![bad_id]).is_empty());
    // Offered again (a reconnect), it is refused again without piling up.
    let mut again = snapshot(bad_id, &mut AutoCommit::new(), "note", "kiwi bait");
    again.heads = vec![[9; 32]];
    again.bytes = b"\x85\x6f\x4a\x83 not a document at all".to_vec();
    import(&hub, vec![again], None).expect("stored");
    hub.verify_all_pending_blocking().expect("verify");
    assert_eq!(hub.quarantined_blocking().expect("q"), 1);
    assert_eq!(exported(&hub, vec![good_id]).len(), 1);
}

#[test]
fn compression_bomb_snapshot_is_refused_without_inflating() {
    let (_dir, hub) = store();
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    let zeros = vec![0u8; 1 << 20];
    // 96 MiB of zeros: past the 64 MiB limit, a few hundred kilobytes on the wire.
    for _ in 0..96 {
        enc.write_all(&zeros).expect("deflate");
    }
    let body = enc.finish().expect("deflate");
    let mut bytes = vec![0x85, 0x6f, 0x4a, 0x83, 0, 0, 0, 0, 2];
    let mut len = body.len();
    loop {
        let b = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    bytes.extend(&body);
    let id = DocId::random();
    let mut snap = snapshot(id, &mut AutoCommit::new(), "note", "bomb");
    snap.heads = vec![[1; 32]];
    snap.bytes = bytes;
    import(&hub, vec![snap], None).expect("stored");
    hub.verify_all_pending_blocking().expect("verify");
    assert_eq!(hub.quarantined_blocking().expect("q"), 1);
    assert_eq!(hub.count_blocking().expect("count"), 0);
}

#[test]
fn database_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hearth.db");
    drop(DocumentStore::open(&path).expect("open"));
    let conn = rusqlite::Connection::open(&path).expect("sqlite");
    conn.pragma_update(None, "user_version", 99).expect("bump");
    drop(conn);
    let err = DocumentStore::open(&path).expect_err("refused");
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn huge_whole_text_replace_is_not_diffed_and_notes_are_capped() {
    let (_dir, s) = store();
    let note = s
        .create_blocking(Note {
            project: None,
            title: "big".into(),
            content: "a".repeat(70_000),
        })
        .expect("note");
    let replaced = s
        .update_blocking(
            note.id,
            hearth_sync::NotePatch {
                content: Some(hearth_sync::TextEdit::Replace("b".repeat(70_000))),
                ..Default::default()
            },
        )
        .expect("replace");
    assert_eq!(replaced.value.content.len(), 70_000);
    let too_big = s.create_blocking(Note {
        project: None,
        title: "huge".into(),
        content: "x".repeat(hearth_sync::entity::MAX_NOTE_BYTES + 1),
    });
    assert!(matches!(
        too_big,
        Err(StoreError::Invalid {
            field: "content",
            ..
        })
    ));
}

// ---- placements ----------------------------------------------------------------------------

/// `home` ⊃ {`work` ⊃ `clients` ⊃ `acme`, `personal`}, and `loose` at the top level.
struct Forest {
    home: DocId,
    work: DocId,
    clients: DocId,
    acme: DocId,
    personal: DocId,
    loose: DocId,
}

fn forest(s: &DocumentStore) -> Forest {
    let project = |name: &str, parent: Option<DocId>| {
        s.create_blocking(Project {
            name: name.into(),
            parent,
            ..Project::default()
        })
        .expect("project")
        .id
    };
    let home = project("home", None);
    let work = project("work", Some(home));
    let clients = project("clients", Some(work));
    let acme = project("acme", Some(clients));
    let personal = project("personal", Some(home));
    let loose = project("loose", None);
    Forest {
        home,
        work,
        clients,
        acme,
        personal,
        loose,
    }
}

fn parent_of(s: &DocumentStore, id: DocId) -> Option<DocId> {
    s.get_blocking::<Project>(id).expect("project").value.parent
}

/// A placement written from scratch by an attacker whose actor wins every conflict.
fn forged_placement(project: DocId, parent: Option<DocId>) -> AutoCommit {
    let mut doc = AutoCommit::new().with_actor(ActorId::from(vec![0xff; 16]));
    for i in 0..2_000 {
        doc.put(ROOT, "pad", i).expect("pad");
    }
    doc.put(ROOT, "kind", "placement").expect("kind");
    doc.put(ROOT, "project", project.to_string())
        .expect("project");
    match parent {
        Some(p) => doc.put(ROOT, "parent", p.to_string()).expect("parent"),
        None => doc
            .put(ROOT, "parent", automerge::ScalarValue::Null)
            .expect("parent"),
    }
    doc.commit();
    doc
}

/// Sends `doc`'s changes as one sync message from a peer scoped to `scope`.
fn send_changes(
    s: &DocumentStore,
    id: DocId,
    doc: &mut AutoCommit,
    scope: DocId,
) -> Result<(), StoreError> {
    let msg = sync::Message {
        heads: doc.get_heads(),
        need: Vec::new(),
        have: Vec::new(),
        changes: vec![doc.save()].into(),
        flags: None,
        version: sync::MessageVersion::V1,
    };
    block_on(s.receive_sync(id, sync::State::new(), msg.encode(), PEER, Some(scope))).map(|_| ())
}

/// The real placement of `project` as the hub holds it, edited by `edit`, as a snapshot.
fn edited_placement(
    s: &DocumentStore,
    project: DocId,
    edit: impl FnOnce(&mut AutoCommit),
) -> DocSnapshot {
    let mut doc = AutoCommit::load(&bytes_of(s, placement_id(project))).expect("load");
    edit(&mut doc);
    doc.commit();
    snapshot(placement_id(project), &mut doc, "placement", "")
}

fn scope_of(s: &DocumentStore, root: DocId) -> hearth_sync::Scope {
    s.scope_blocking(root).expect("scope")
}

#[test]
fn scoped_forged_placement_for_its_root_is_refused() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // The hub holds `work`'s placement (under `home`); the device never received it, so
    // it forges one from scratch that would win the merge and hang `work` under `acme`.
    let mut forged = forged_placement(f.work, Some(f.acme));
    let snap = snapshot(placement_id(f.work), &mut forged, "placement", "");
    let _ = import(&hub, vec![snap], Some(f.work));
    let err = send_changes(&hub, placement_id(f.work), &mut forged, f.work)
        .expect_err("a sync message is refused too");
    assert!(matches!(err, StoreError::OutOfScope { .. }), "{err}");
    assert_eq!(parent_of(&hub, f.work), Some(f.home));
    // A top-level root has no placement at all: a new one is refused as a move.
    let mut forged = forged_placement(f.loose, Some(f.home));
    let snap = snapshot(placement_id(f.loose), &mut forged, "placement", "");
    let _ = import(&hub, vec![snap], Some(f.loose));
    let err = send_changes(&hub, placement_id(f.loose), &mut forged, f.loose)
        .expect_err("a sync message is refused too");
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    assert_eq!(parent_of(&hub, f.loose), None);
    assert!(block_on(hub.export(vec![placement_id(f.loose)]))
        .expect("export")
        .is_empty());
}

#[test]
fn scoped_forged_placement_for_an_outside_project_is_refused() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // `personal` (placed under `home`) and `loose` (no placement) would each join the
    // scope under `work`.
    for outside in [f.personal, f.loose] {
        let mut forged = forged_placement(outside, Some(f.work));
        let snap = snapshot(placement_id(outside), &mut forged, "placement", "");
        let _ = import(&hub, vec![snap], Some(f.work));
        let err = send_changes(&hub, placement_id(outside), &mut forged, f.work)
            .expect_err("a sync message is refused too");
        assert!(matches!(err, StoreError::OutOfScope { .. }), "{err}");
        assert!(!scope_of(&hub, f.work).contains_project(&outside));
    }
    assert_eq!(parent_of(&hub, f.personal), Some(f.home));
    assert_eq!(parent_of(&hub, f.loose), None);
}

#[test]
fn scoped_device_cannot_move_a_subproject_out_of_its_scope() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    for parent in [Some(f.home), None] {
        let snap = edited_placement(&hub, f.clients, |doc| match parent {
            Some(p) => doc.put(ROOT, "parent", p.to_string()).expect("parent"),
            None => doc
                .put(ROOT, "parent", automerge::ScalarValue::Null)
                .expect("parent"),
        });
        let mut doc = AutoCommit::load(&snap.bytes).expect("load");
        let err = send_changes(&hub, placement_id(f.clients), &mut doc, f.work)
            .expect_err("a sync message is refused");
        assert!(matches!(err, StoreError::OutOfScope { .. }), "{err}");
        let _ = import(&hub, vec![snap], Some(f.work));
        assert_eq!(parent_of(&hub, f.clients), Some(f.work));
    }
    assert!(scope_of(&hub, f.work).contains_project(&f.acme));
}

#[test]
fn scoped_device_moves_a_skill_only_inside_its_scope() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    let skill = hub
        .create_blocking(Skill {
            project: Some(f.work),
            name: "standup".into(),
            ..Skill::default()
        })
        .expect("skill");
    // What `SkillPatch { project }` writes on the device.
    let moved = |to: Option<DocId>| {
        let mut doc = AutoCommit::load(&bytes_of(&hub, skill.id)).expect("load");
        match to {
            Some(p) => doc.put(ROOT, "project", p.to_string()),
            None => doc.put(ROOT, "project", automerge::ScalarValue::Null),
        }
        .expect("move");
        doc.commit();
        doc
    };
    let project = |hub: &DocumentStore| {
        hub.get_blocking::<Skill>(skill.id)
            .expect("skill")
            .value
            .project
    };
    // Shared by every project, or in a project outside the subtree: both leave the scope.
    for outside in [None, Some(f.home), Some(f.loose)] {
        let err = send_changes(&hub, skill.id, &mut moved(outside), f.work).expect_err("refused");
        assert!(matches!(err, StoreError::OutOfScope { .. }), "{err}");
        assert_eq!(project(&hub), Some(f.work));
    }
    send_changes(&hub, skill.id, &mut moved(Some(f.acme)), f.work).expect("inside");
    assert_eq!(project(&hub), Some(f.acme));
}

/// A project as builds before placements wrote it, `parent` in its own document,
/// received from a full-scope peer.
fn legacy_project(s: &DocumentStore, name: &str, parent: DocId) -> DocId {
    let mut doc = new_project_doc(name);
    doc.put(ROOT, "parent", parent.to_string()).expect("parent");
    doc.commit();
    let id = DocId::random();
    import(s, vec![snapshot(id, &mut doc, "project", name)], None).expect("import");
    s.verify_all_pending_blocking().expect("verify");
    id
}

#[test]
fn scoped_device_cannot_make_a_project_cycle_through_placements() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // `clients` under its own child `acme`, both inside the scope: an edit of the
    // placement the hub holds.
    let snap = edited_placement(&hub, f.clients, |doc| {
        doc.put(ROOT, "parent", f.acme.to_string()).expect("parent")
    });
    let _ = import(&hub, vec![snap], Some(f.work));
    assert_eq!(parent_of(&hub, f.clients), Some(f.work));
    // The same through the first placement of an older project that has none.
    let old = legacy_project(&hub, "old", f.clients);
    let leaf = hub
        .create_blocking(Project {
            name: "leaf".into(),
            parent: Some(old),
            ..Project::default()
        })
        .expect("leaf")
        .id;
    let mut forged = forged_placement(old, Some(leaf));
    let snap = snapshot(placement_id(old), &mut forged, "placement", "");
    let _ = import(&hub, vec![snap], Some(f.work));
    let err = send_changes(&hub, placement_id(old), &mut forged, f.work).expect_err("cycle");
    assert!(err.to_string().contains("cycle"), "{err}");
    assert_eq!(parent_of(&hub, old), Some(f.clients));
    assert_eq!(hub.quarantined_blocking().expect("q"), 2);
}

#[test]
fn placement_that_speaks_for_another_project_is_refused() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // A placement whose id is not derived from the project it names, from a full peer:
    // quarantined by the verifier, so `loose` stays at the top.
    let mut forged = forged_placement(f.loose, Some(f.home));
    let stray = DocId::random();
    let _ = import(
        &hub,
        vec![snapshot(stray, &mut forged, "placement", "")],
        None,
    );
    hub.verify_all_pending_blocking().expect("verify");
    assert_eq!(parent_of(&hub, f.loose), None);
    assert_eq!(hub.quarantined_blocking().expect("q"), 1);
    // Rewriting which project a real placement places, from a full peer.
    let snap = edited_placement(&hub, f.clients, |doc| {
        doc.put(ROOT, "project", f.loose.to_string())
            .expect("project")
    });
    let _ = import(&hub, vec![snap], None);
    assert_eq!(parent_of(&hub, f.clients), Some(f.work));
    assert_eq!(parent_of(&hub, f.loose), None);
    assert_eq!(hub.quarantined_blocking().expect("q"), 2);
}

/// A new project as a device's store writes it: no `parent` field (that goes to its
/// placement).
fn new_project_doc(name: &str) -> AutoCommit {
    let mut doc = AutoCommit::new();
    doc.put(ROOT, "schema", "hearth/1").expect("schema");
    doc.put(ROOT, "kind", "project").expect("kind");
    doc.put(ROOT, "name", name).expect("name");
    doc.commit();
    doc
}

#[test]
fn scoped_device_cannot_create_a_top_level_project() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // Without a placement the project waits for one; it is never stored.
    let top = DocId::random();
    let mut doc = new_project_doc("escape");
    let _ = import(
        &hub,
        vec![snapshot(top, &mut doc, "project", "escape")],
        Some(f.work),
    );
    let err = send_changes(&hub, top, &mut doc, f.work).expect_err("waits");
    assert!(matches!(err, StoreError::Waiting { .. }), "{err}");
    // A placement at the top level does not let it in either.
    let mut top_placement = forged_placement(top, None);
    let snap = snapshot(placement_id(top), &mut top_placement, "placement", "");
    let _ = import(&hub, vec![snap], Some(f.work));
    assert!(hub.get_blocking::<Project>(top).is_err());
    assert!(block_on(hub.export(vec![top, placement_id(top)]))
        .expect("export")
        .is_empty());
}

#[test]
fn scoped_device_cannot_create_a_project_outside_its_scope() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    let sneaky = DocId::random();
    let mut placement = forged_placement(sneaky, Some(f.personal));
    let mut doc = new_project_doc("sneaky");
    let _ = import(
        &hub,
        vec![
            snapshot(placement_id(sneaky), &mut placement, "placement", ""),
            snapshot(sneaky, &mut doc, "project", "sneaky"),
        ],
        Some(f.work),
    );
    assert!(hub.get_blocking::<Project>(sneaky).is_err());
    assert!(!scope_of(&hub, f.personal).contains_project(&sneaky));
}

#[test]
fn scoped_subproject_waits_for_its_placement_then_is_stored() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // The device's own store holds its scope and makes a subproject with a note in it.
    let (_ddir, device) = store();
    let visible: Vec<DocId> = block_on(hub.entries_in((0..=255).collect(), Some(f.work)))
        .expect("entries")
        .into_iter()
        .map(|e| DocId(e.id))
        .collect();
    import(&device, exported(&hub, visible), None).expect("device copy");
    device.verify_all_pending_blocking().expect("verify");
    let drafts = device
        .create_blocking(Project {
            name: "drafts".into(),
            parent: Some(f.work),
            ..Project::default()
        })
        .expect("drafts");
    let note = device
        .create_blocking(Note {
            project: Some(drafts.id),
            title: "outline".into(),
            content: "x".into(),
        })
        .expect("note");
    // Worst order, one frame each: the note, the project, then the placement.
    for id in [note.id, drafts.id] {
        import(&hub, exported(&device, vec![id]), Some(f.work)).expect("import");
        assert!(hub.get_blocking::<Note>(note.id).is_err());
        assert!(hub.get_blocking::<Project>(drafts.id).is_err());
    }
    import(
        &hub,
        exported(&device, vec![placement_id(drafts.id)]),
        Some(f.work),
    )
    .expect("import");
    assert_eq!(parent_of(&hub, drafts.id), Some(f.work));
    assert_eq!(
        hub.get_blocking::<Note>(note.id)
            .expect("note")
            .value
            .project,
        Some(drafts.id)
    );
    assert!(scope_of(&hub, f.work).contains_project(&drafts.id));
    assert_eq!(hub.quarantined_blocking().expect("q"), 0);
}

#[test]
fn local_moves_refuse_cycles_and_unknown_parents() {
    let (_dir, s) = store();
    let f = forest(&s);
    let err = s
        .update_blocking(
            f.work,
            ProjectPatch {
                parent: Some(Some(f.acme)),
                ..ProjectPatch::default()
            },
        )
        .expect_err("cycle");
    assert!(err.to_string().contains("cycle"), "{err}");
    let err = s
        .update_blocking(
            f.work,
            ProjectPatch {
                parent: Some(Some(DocId::random())),
                ..ProjectPatch::default()
            },
        )
        .expect_err("unknown parent");
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                field: "parent",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(parent_of(&s, f.work), Some(f.home));
}

#[test]
fn scoped_document_waiting_for_a_project_is_judged_again_when_it_arrives() {
    let (_dir, hub) = store();
    let f = forest(&hub);
    // Notes in two projects the hub does not hold yet wait for them...
    let note_in = |project: DocId| {
        let mut note = AutoCommit::new();
        note.put(ROOT, "kind", "note").expect("kind");
        note.put(ROOT, "title", "plan").expect("title");
        note.put(ROOT, "project", project.to_string())
            .expect("project");
        note.commit();
        let id = DocId::random();
        let _ = import(
            &hub,
            vec![snapshot(id, &mut note, "note", "plan")],
            Some(f.work),
        );
        assert!(hub.get_blocking::<Note>(id).is_err());
        id
    };
    let (outside, inside) = (DocId::random(), DocId::random());
    let (outside_note, inside_note) = (note_in(outside), note_in(inside));
    // ...and those projects arrive from a full-scope peer, one placed outside the scope
    // and one inside: each note is judged again against the scope.
    for (project, parent) in [(outside, f.personal), (inside, f.clients)] {
        let mut doc = new_project_doc("arrived");
        let mut placement = forged_placement(project, Some(parent));
        import(
            &hub,
            vec![
                snapshot(project, &mut doc, "project", "arrived"),
                snapshot(placement_id(project), &mut placement, "placement", ""),
            ],
            None,
        )
        .expect("import");
        hub.verify_all_pending_blocking().expect("verify");
        assert_eq!(parent_of(&hub, project), Some(parent));
    }
    assert!(
        hub.get_blocking::<Note>(outside_note).is_err(),
        "a waiting note got in outside the scope"
    );
    assert_eq!(
        hub.get_blocking::<Note>(inside_note)
            .expect("stored once its project came")
            .value
            .project,
        Some(inside)
    );
}
