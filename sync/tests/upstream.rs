//! Pending changes of a replica that follows an upstream (a node and its hub), over
//! in-memory byte streams: what the hub has not confirmed holding is counted, across a
//! restart while offline, and goes to zero once a session has exchanged it — for
//! documents created offline (sent whole), edited offline (synced), created live, for a
//! replica whose records were lost, and for a scoped node.

use std::{sync::Arc, time::Duration};

use hearth_sync::{
    run_session, DocId, DocumentStore, Note, NotePatch, Project, SessionConfig, SessionError,
    SessionEvent, SessionStats, TextEdit,
};
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

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

/// A session between a hub and a node; the node follows the hub when `follow`.
fn connect(hub: &DocumentStore, node: &DocumentStore, scope: Option<DocId>, follow: bool) -> Link {
    let (h, n) = tokio::io::duplex(1 << 20);
    let hub_config = SessionConfig {
        scope,
        ..SessionConfig::default()
    };
    let node_config = SessionConfig {
        follow_upstream: follow,
        ..SessionConfig::default()
    };
    let mut link = Link {
        stop: Vec::new(),
        tasks: Vec::new(),
        events: Vec::new(),
    };
    for (store, stream, config) in [(hub.clone(), h, hub_config), (node.clone(), n, node_config)] {
        let (r, w) = tokio::io::split(stream);
        let (tx, rx) = oneshot::channel::<()>();
        let (etx, erx) = mpsc::unbounded_channel();
        link.stop.push(tx);
        link.events.push(erx);
        link.tasks.push(tokio::spawn(run_session(
            store,
            r,
            w,
            config,
            Arc::new(SessionStats::default()),
            Some(etx),
            async move {
                let _ = rx.await;
            },
        )));
    }
    link
}

async fn note(store: &DocumentStore, title: &str, project: Option<DocId>) -> DocId {
    store
        .create(Note {
            title: title.into(),
            content: format!("{title} body"),
            project,
        })
        .await
        .expect("create")
        .id
}

async fn pending_becomes(store: &DocumentStore, want: u64) {
    let mut last = None;
    for _ in 0..500 {
        let now = store.pending_upstream().await.expect("pending");
        if now == want {
            return;
        }
        last = Some(now);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("pending stayed {last:?}, not {want}, for 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_changes_are_pending_until_the_hub_holds_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = DocumentStore::open(dir.path().join("hub.db")).expect("hub");
    let node_path = dir.path().join("node.db");
    let node = DocumentStore::open(&node_path).expect("node");
    let mut shared = Vec::new();
    for i in 0..20 {
        shared.push(note(&hub, &format!("hub {i}"), None).await);
    }

    // Catch-up: everything the node holds came from the hub.
    let mut link = connect(&hub, &node, None, true);
    link.caught_up().await;
    node.verify_all_pending_blocking().expect("verify");
    pending_becomes(&node, 0).await;
    link.close().await;

    // Offline: one new note (it will go whole), one edit of a shared note (synced).
    note(&node, "made offline", None).await;
    node.update(
        shared[3],
        NotePatch {
            content: Some(TextEdit::Replace("edited offline".into())),
            ..NotePatch::default()
        },
    )
    .await
    .expect("edit");
    assert_eq!(node.pending_upstream().await.expect("pending"), 2);
    // Still two after a restart.
    drop(node);
    let node = DocumentStore::open(&node_path).expect("reopen");
    assert_eq!(node.pending_upstream().await.expect("pending"), 2);

    // Back online: both reach the hub and are confirmed; live edits too.
    let mut link = connect(&hub, &node, None, true);
    link.caught_up().await;
    pending_becomes(&node, 0).await;
    note(&node, "made live", None).await;
    pending_becomes(&node, 0).await;
    note(&hub, "from the hub, live", None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    pending_becomes(&node, 0).await;
    link.close().await;
    assert_eq!(hub.count_blocking().expect("count"), 23);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_in_sync_whose_records_are_lost_is_confirmed_by_the_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = DocumentStore::open(dir.path().join("hub.db")).expect("hub");
    let node = DocumentStore::open(dir.path().join("node.db")).expect("node");
    for i in 0..10 {
        note(&hub, &format!("hub {i}"), None).await;
    }
    // Synced by a session that records nothing, as before the node followed its hub.
    let mut link = connect(&hub, &node, None, false);
    link.caught_up().await;
    link.close().await;
    node.verify_all_pending_blocking().expect("verify");
    assert_eq!(node.pending_upstream().await.expect("pending"), 10);
    // Equal roots: the hub holds everything.
    let mut link = connect(&hub, &node, None, true);
    link.caught_up().await;
    pending_becomes(&node, 0).await;
    link.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_node_in_sync_is_confirmed_and_its_offline_note_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = DocumentStore::open(dir.path().join("hub.db")).expect("hub");
    let node = DocumentStore::open(dir.path().join("node.db")).expect("node");
    let work = hub
        .create(Project {
            name: "work".into(),
            ..Project::default()
        })
        .await
        .expect("project")
        .id;
    for i in 0..5 {
        note(&hub, &format!("work {i}"), Some(work)).await;
        note(&hub, &format!("private {i}"), None).await;
    }
    let mut link = connect(&hub, &node, Some(work), false);
    link.caught_up().await;
    link.close().await;
    node.verify_all_pending_blocking().expect("verify");
    assert_eq!(node.pending_upstream().await.expect("pending"), 6);
    // The hub compares in the node's scope: equal, though its own root differs.
    let mut link = connect(&hub, &node, Some(work), true);
    link.caught_up().await;
    pending_becomes(&node, 0).await;
    link.close().await;
    note(&node, "offline work", Some(work)).await;
    assert_eq!(node.pending_upstream().await.expect("pending"), 1);
    let mut link = connect(&hub, &node, Some(work), true);
    link.caught_up().await;
    pending_becomes(&node, 0).await;
    link.close().await;
}
