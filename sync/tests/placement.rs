//! Project placements: a project's parent lives in a document of its own, so a device
//! scoped to a project holds no id outside its subtree, while moves, older documents
//! and subprojects made on scoped devices keep working.

use std::{sync::Arc, time::Duration};

use automerge::{transaction::Transactable, AutoCommit, ROOT};
use hearth_protocol::{DocIndex, DocSnapshot};
use hearth_sync::{
    placement_id, run_session, DocId, DocumentStore, Filter, Kind, Note, Origin, PeerTag, Project,
    ProjectPatch, SessionConfig, SessionError, SessionEvent, SessionStats, TextEdit,
};
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

struct Replica {
    dir: tempfile::TempDir,
    store: DocumentStore,
}

fn replica() -> Replica {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
    Replica { dir, store }
}

/// A session between `hub` (serving a peer scoped to `scope`) and `device`. Every
/// document sent whole travels in a frame of its own, so related documents arrive in the
/// order of their (random) ids.
struct Link {
    stop: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<Result<(), SessionError>>>,
    events: Vec<mpsc::UnboundedReceiver<SessionEvent>>,
}

impl Link {
    async fn caught_up(&mut self) {
        for ev in &mut self.events {
            let got = tokio::time::timeout(Duration::from_secs(20), ev.recv())
                .await
                .expect("caught up in time");
            assert!(matches!(got, Some(SessionEvent::CaughtUp { .. })));
        }
    }
    async fn close(self) {
        for s in self.stop {
            let _ = s.send(());
        }
        for t in self.tasks {
            t.await.expect("join").expect("session ended cleanly");
        }
    }
}

fn connect(hub: &DocumentStore, device: &DocumentStore, scope: Option<DocId>) -> Link {
    let (a, b) = tokio::io::duplex(1 << 20);
    let mut link = Link {
        stop: Vec::new(),
        tasks: Vec::new(),
        events: Vec::new(),
    };
    for (store, stream, scope) in [(hub.clone(), a, scope), (device.clone(), b, None)] {
        let (r, w) = tokio::io::split(stream);
        let (tx, rx) = oneshot::channel::<()>();
        let (etx, erx) = mpsc::unbounded_channel();
        link.stop.push(tx);
        link.events.push(erx);
        link.tasks.push(tokio::spawn(run_session(
            store,
            r,
            w,
            SessionConfig {
                scope,
                snapshot_batch_bytes: 1,
                ..SessionConfig::default()
            },
            Arc::new(SessionStats::default()),
            Some(etx),
            async move {
                let _ = rx.await;
            },
        )));
    }
    link
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not within 10 s");
}

fn project(s: &DocumentStore, name: &str, parent: Option<DocId>) -> DocId {
    s.create_blocking(Project {
        name: name.into(),
        parent,
        ..Project::default()
    })
    .expect("project")
    .id
}

fn note(s: &DocumentStore, title: &str, project: Option<DocId>) -> DocId {
    s.create_blocking(Note {
        project,
        title: title.into(),
        content: "x".into(),
    })
    .expect("note")
    .id
}

fn parent_of(s: &DocumentStore, id: DocId) -> Option<DocId> {
    s.get_blocking::<Project>(id).expect("project").value.parent
}

fn listed_parent(s: &DocumentStore, id: DocId) -> Option<DocId> {
    s.list_blocking(&Filter::new(Kind::Project))
        .expect("list")
        .data
        .into_iter()
        .find(|p| p.id == id)
        .expect("listed")
        .parent
}

fn holds(s: &DocumentStore, id: DocId) -> bool {
    !s.heads_blocking(id).expect("heads").is_empty()
}

fn export(s: &DocumentStore, ids: Vec<DocId>) -> Vec<DocSnapshot> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(s.export(ids))
        .expect("export")
}

fn import(s: &DocumentStore, docs: Vec<DocSnapshot>) {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(s.import(docs, Origin::Peer(PeerTag(3)), None))
        .expect("import");
    s.verify_all_pending_blocking().expect("verify");
}

/// Whether `id` occurs in `hay`, as 32 hex digits or as its 16 bytes.
fn mentions(hay: &[u8], id: DocId) -> bool {
    let hex = id.to_string();
    hay.windows(32).any(|w| w == hex.as_bytes()) || hay.windows(16).any(|w| w == id.0)
}

#[test]
fn a_project_document_never_names_its_parent() {
    let r = replica();
    let s = &r.store;
    let home = project(s, "home", None);
    let work = project(s, "work", Some(home));
    let snap = export(s, vec![work]).remove(0);
    assert!(!mentions(&snap.bytes, home), "work's document names home");
    assert_eq!(snap.index.parent, None, "nor does its index");
    assert_eq!(parent_of(s, work), Some(home));
    assert_eq!(listed_parent(s, work), Some(home));
    let placement = export(s, vec![placement_id(work)]).remove(0);
    assert!(mentions(&placement.bytes, home) && mentions(&placement.bytes, work));
    // A top-level project needs no placement.
    assert!(!holds(s, placement_id(home)));
    // Renaming leaves the placement alone; moving edits it.
    let heads = s.heads_blocking(placement_id(work)).expect("heads");
    s.update_blocking(
        work,
        ProjectPatch {
            name: Some("job".into()),
            ..ProjectPatch::default()
        },
    )
    .expect("rename");
    assert_eq!(s.heads_blocking(placement_id(work)).expect("heads"), heads);
    let moved = s
        .update_blocking(
            work,
            ProjectPatch {
                parent: Some(None),
                ..ProjectPatch::default()
            },
        )
        .expect("move to the top");
    assert_eq!(moved.value.parent, None);
    assert_eq!(listed_parent(s, work), None);
    assert_ne!(s.heads_blocking(placement_id(work)).expect("heads"), heads);
    let children = s
        .list_blocking(&Filter {
            parent: Some(home),
            ..Filter::new(Kind::Project)
        })
        .expect("list");
    assert!(children.data.is_empty());
}

#[test]
fn a_placement_arriving_before_or_after_its_project_places_it() {
    let source = replica();
    let home = project(&source.store, "home", None);
    let work = project(&source.store, "work", Some(home));
    for order in [[placement_id(work), work], [work, placement_id(work)]] {
        let target = replica();
        let mut feed = target.store.subscribe();
        import(&target.store, export(&source.store, vec![home]));
        for id in order {
            while feed.try_recv().is_ok() {}
            import(&target.store, export(&source.store, vec![id]));
            let mut seen = Vec::new();
            while let Ok(change) = feed.try_recv() {
                seen.push(change.id);
            }
            // The placement's project is announced with it: its place moved.
            assert!(seen.contains(&id) && seen.contains(&work), "{seen:?}");
        }
        assert_eq!(parent_of(&target.store, work), Some(home));
        assert_eq!(listed_parent(&target.store, work), Some(home));
    }
}

/// A project as builds before placements wrote it: `parent` in its own document.
fn legacy_project(name: &str, parent: DocId) -> (DocId, DocSnapshot) {
    let mut doc = AutoCommit::new();
    doc.put(ROOT, "schema", "hearth/1").expect("schema");
    doc.put(ROOT, "kind", "project").expect("kind");
    doc.put(ROOT, "name", name).expect("name");
    doc.put(ROOT, "parent", parent.to_string()).expect("parent");
    doc.commit();
    let id = DocId::random();
    let snap = DocSnapshot {
        id: id.0,
        heads: doc.get_heads().iter().map(|h| h.0).collect(),
        bytes: doc.save(),
        index: DocIndex {
            kind: "project".into(),
            project: None,
            title: name.into(),
            status: None,
            due: None,
            parent: Some(parent.to_string()),
            deleted: false,
            updated_at: 0,
        },
    };
    (id, snap)
}

#[test]
fn older_projects_keep_their_parent_and_are_placed_when_the_store_opens() {
    let r = replica();
    let home = project(&r.store, "home", None);
    let (old, snap) = legacy_project("old", home);
    import(&r.store, vec![snap]);
    // Read from the document's own field while there is no placement.
    assert_eq!(parent_of(&r.store, old), Some(home));
    assert_eq!(listed_parent(&r.store, old), Some(home));
    assert!(!holds(&r.store, placement_id(old)));
    let path = r.dir.path().join("hearth.db");
    drop(r.store);
    let store = DocumentStore::open(&path).expect("reopen");
    assert!(
        holds(&store, placement_id(old)),
        "placed when the store opened"
    );
    assert_eq!(parent_of(&store, old), Some(home));
    // The placement wins over the field the document still holds.
    store
        .update_blocking(
            old,
            ProjectPatch {
                parent: Some(None),
                ..ProjectPatch::default()
            },
        )
        .expect("to the top");
    assert_eq!(parent_of(&store, old), None);
    assert_eq!(listed_parent(&store, old), None);
    // `home` under `old` is no cycle now, and the stale field refuses no later edit.
    store
        .update_blocking(
            home,
            ProjectPatch {
                parent: Some(Some(old)),
                ..ProjectPatch::default()
            },
        )
        .expect("home under old");
    store
        .update_blocking(
            old,
            ProjectPatch {
                instructions: Some(TextEdit::Replace("Be brief.".into())),
                ..ProjectPatch::default()
            },
        )
        .expect("edit old");
    let heads = store
        .get_versioned_blocking::<Project>(old)
        .expect("get")
        .heads;
    store
        .update_text_at_blocking(
            old,
            Kind::Project,
            "instructions",
            &heads,
            &[hearth_sync::TextSplice {
                pos: 0,
                delete: 0,
                insert: "Always: ".into(),
            }],
        )
        .expect("text patch on old");
    drop(store);
    // Opening again finds nothing left to place.
    let store = DocumentStore::open(&path).expect("reopen");
    assert_eq!(parent_of(&store, old), None);
    assert_eq!(parent_of(&store, home), Some(old));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_replica_holds_no_id_outside_its_subtree() {
    let hub = replica();
    let h = &hub.store;
    let home = project(h, "home", None);
    let work = project(h, "work", Some(home));
    let clients = project(h, "clients", Some(work));
    let personal = project(h, "personal", Some(home));
    let loose = project(h, "loose", None);
    let inside = [note(h, "plan", Some(work)), note(h, "acme", Some(clients))];
    let outside = [
        home,
        personal,
        loose,
        placement_id(work),
        placement_id(personal),
        note(h, "diary", Some(personal)),
        note(h, "house", Some(home)),
        note(h, "stray", None),
    ];
    let device = replica();
    let mut link = connect(h, &device.store, Some(work));
    link.caught_up().await;
    // Live: the hub moves the root under `loose`, then makes a subproject inside; only
    // the subproject (and its placement) reaches the device.
    h.update_blocking(
        work,
        ProjectPatch {
            parent: Some(Some(loose)),
            ..ProjectPatch::default()
        },
    )
    .expect("move the root");
    let live = project(h, "live", Some(clients));
    let d = device.store.clone();
    wait_for("the live subproject on the device", || {
        holds(&d, live) && holds(&d, placement_id(live))
    })
    .await;
    link.close().await;
    device.store.verify_all_pending_blocking().expect("verify");
    for id in inside
        .iter()
        .chain([&work, &clients, &placement_id(clients)])
    {
        assert!(holds(&device.store, *id), "{id} did not replicate");
    }
    // The root stands at the top of the device's tree; its subtree as on the hub.
    assert_eq!(parent_of(&device.store, work), None);
    assert_eq!(parent_of(&device.store, clients), Some(work));
    let db = device.dir.path().join("hearth.db");
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    let bytes = [
        std::fs::read(&db).expect("db"),
        std::fs::read(&wal).unwrap_or_default(),
    ];
    for id in outside {
        for hay in &bytes {
            assert!(!mentions(hay, id), "{id} reached the scoped device");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subproject_made_on_a_scoped_device_reaches_the_hub_and_a_top_level_one_never() {
    let hub = replica();
    let h = hub.store.clone();
    let home = project(&h, "home", None);
    let work = project(&h, "work", Some(home));
    let device = replica();
    let d = device.store.clone();
    let mut link = connect(&h, &d, Some(work));
    link.caught_up().await;
    d.verify_all_pending_blocking().expect("verify");
    // Live: the project, its placement and a note in it race to the hub.
    let drafts = project(&d, "drafts", Some(work));
    let outline = note(&d, "outline", Some(drafts));
    let deep = project(&d, "deep", Some(drafts));
    wait_for("the subproject and its note on the hub", || {
        holds(&h, outline) && holds(&h, deep) && holds(&h, drafts)
    })
    .await;
    assert_eq!(parent_of(&h, drafts), Some(work));
    assert_eq!(parent_of(&h, deep), Some(drafts));
    assert!(h
        .scope_blocking(work)
        .expect("scope")
        .contains_project(&deep));
    // Offline, several subprojects with a note each: the next catch-up sends the
    // documents in the order of their ids, so most projects or notes come before what
    // decides their place.
    link.close().await;
    let offline: Vec<(DocId, DocId)> = (0..8)
        .map(|i| {
            let p = project(&d, &format!("offline-{i}"), Some(work));
            (p, note(&d, "minutes", Some(p)))
        })
        .collect();
    let mut link = connect(&h, &d, Some(work));
    link.caught_up().await;
    wait_for("the offline subprojects on the hub", || {
        offline.iter().all(|(p, n)| holds(&h, *p) && holds(&h, *n))
    })
    .await;
    for (p, _) in &offline {
        assert_eq!(parent_of(&h, *p), Some(work));
    }
    // A project at the top level, then a marker that does reach the hub.
    let escape = project(&d, "escape", None);
    let marker = note(&d, "marker", Some(work));
    wait_for("the marker on the hub", || holds(&h, marker)).await;
    link.close().await;
    // Offered again in the next session, it waits again and is never stored.
    let mut link = connect(&h, &d, Some(work));
    link.caught_up().await;
    link.close().await;
    assert!(
        !holds(&h, escape),
        "a scoped device made a top-level project"
    );
    assert!(!holds(&h, placement_id(escape)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_replicate_and_concurrent_moves_converge() {
    let a = replica();
    let home = project(&a.store, "home", None);
    let work = project(&a.store, "work", Some(home));
    let personal = project(&a.store, "personal", Some(home));
    let b = replica();
    let mut link = connect(&a.store, &b.store, None);
    link.caught_up().await;
    b.store.verify_all_pending_blocking().expect("verify");
    assert_eq!(parent_of(&b.store, work), Some(home));
    // Live: a move on one side reaches the other.
    a.store
        .update_blocking(
            work,
            ProjectPatch {
                parent: Some(Some(personal)),
                ..ProjectPatch::default()
            },
        )
        .expect("move");
    wait_for("the move on b", || {
        parent_of(&b.store, work) == Some(personal)
    })
    .await;
    link.close().await;
    // Offline, both move the same project; after a session they agree.
    let to = |s: &DocumentStore, parent| {
        s.update_blocking(
            work,
            ProjectPatch {
                parent: Some(parent),
                ..ProjectPatch::default()
            },
        )
        .expect("move")
    };
    to(&a.store, Some(home));
    to(&b.store, None);
    let mut link = connect(&a.store, &b.store, None);
    link.caught_up().await;
    link.close().await;
    b.store.verify_all_pending_blocking().expect("verify");
    a.store.verify_all_pending_blocking().expect("verify");
    let (pa, pb) = (parent_of(&a.store, work), parent_of(&b.store, work));
    assert_eq!(pa, pb, "the replicas disagree on where work stands");
    assert_eq!(listed_parent(&a.store, work), pa);
    assert_eq!(listed_parent(&b.store, work), pb);
}
