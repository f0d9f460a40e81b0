//! Replication stories over in-memory byte streams: catch-up, unchanged reconnect,
//! offline concurrent edits, delete against edit, live pushes and bad frames.

use std::{sync::atomic::Ordering, sync::Arc, time::Duration};

use hearth_sync::{
    run_session, DocumentStore, Filter, Kind, Note, NotePatch, SessionConfig, SessionError,
    SessionEvent, SessionStats, Task, TaskPatch, TaskStatus, TextEdit,
};
use tokio::{
    io::AsyncWriteExt,
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

struct Replica {
    _dir: tempfile::TempDir,
    store: DocumentStore,
}

fn replica() -> Replica {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DocumentStore::open(dir.path().join("hearth.db")).expect("open");
    Replica { _dir: dir, store }
}

struct Link {
    stop: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<Result<(), SessionError>>>,
    stats: [Arc<SessionStats>; 2],
    events: [mpsc::UnboundedReceiver<SessionEvent>; 2],
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
    fn bytes(&self) -> u64 {
        self.stats
            .iter()
            .map(|s| s.bytes_sent.load(Ordering::Relaxed))
            .sum()
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

fn connect(a: &DocumentStore, b: &DocumentStore) -> Link {
    let (ab, ba) = tokio::io::duplex(1 << 20);
    let mut stop = Vec::new();
    let mut tasks = Vec::new();
    let mut stats = Vec::new();
    let mut events = Vec::new();
    for (store, stream) in [(a.clone(), ab), (b.clone(), ba)] {
        let (r, w) = tokio::io::split(stream);
        let (tx, rx) = oneshot::channel::<()>();
        let (etx, erx) = mpsc::unbounded_channel();
        let st = Arc::new(SessionStats::default());
        stats.push(st.clone());
        events.push(erx);
        stop.push(tx);
        tasks.push(tokio::spawn(run_session(
            store,
            r,
            w,
            SessionConfig::default(),
            st,
            Some(etx),
            async move {
                let _ = rx.await;
            },
        )));
    }
    let [s0, s1]: [Arc<SessionStats>; 2] = stats.try_into().expect("two");
    let [e0, e1]: [mpsc::UnboundedReceiver<SessionEvent>; 2] = events.try_into().expect("two");
    Link {
        stop,
        tasks,
        stats: [s0, s1],
        events: [e0, e1],
    }
}

async fn note_content(s: &DocumentStore, id: hearth_sync::DocId) -> String {
    s.get::<Note>(id).await.expect("get").value.content
}

async fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not met within 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_then_unchanged_reconnect_costs_one_round() {
    let hub = replica();
    let node = replica();
    for i in 0..300 {
        hub.store
            .create(Note {
                title: format!("note {i}"),
                content: format!("body of note {i} with kiwi"),
                project: None,
            })
            .await
            .expect("create");
    }
    let mut link = connect(&hub.store, &node.store);
    link.caught_up().await;
    let first = link.bytes();
    link.close().await;
    assert_eq!(node.store.count_blocking().expect("count"), 300);
    // Documents received whole count in the summary once verified from their content.
    wait_for(|| node.store.unverified_blocking().ok() == Some(0)).await;
    assert_eq!(
        hub.store.summary().await.expect("s"),
        node.store.summary().await.expect("s")
    );
    // Search works on documents received whole (indexed once verified).
    assert_eq!(
        node.store
            .search("kiwi".into(), Some(Kind::Note), 500)
            .await
            .expect("search")
            .len(),
        300
    );

    let mut link = connect(&hub.store, &node.store);
    link.caught_up().await;
    let again = link.bytes();
    link.close().await;
    assert!(
        again < 128,
        "unchanged reconnect sent {again} bytes (first sync {first})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_edits_to_different_paragraphs_merge_character_by_character() {
    let hub = replica();
    let a = replica();
    let b = replica();
    let text = "First paragraph.\n\nMiddle paragraph.\n\nLast paragraph.";
    let note = hub
        .store
        .create(Note {
            title: "shared".into(),
            content: text.into(),
            project: None,
        })
        .await
        .expect("note");
    let task = hub
        .store
        .create(Task {
            name: "chores".into(),
            ..Task::default()
        })
        .await
        .expect("task");
    for r in [&a, &b] {
        let mut l = connect(&hub.store, &r.store);
        l.caught_up().await;
        l.close().await;
    }
    // All three offline: A edits the first paragraph, B the last, the hub the task.
    a.store
        .update(
            note.id,
            NotePatch {
                content: Some(TextEdit::Splice {
                    pos: 0,
                    delete: 5,
                    insert: "Opening (A)".into(),
                }),
                ..NotePatch::default()
            },
        )
        .await
        .expect("a");
    let len = text.chars().count();
    b.store
        .update(
            note.id,
            NotePatch {
                content: Some(TextEdit::Replace(format!("{} (edited by B)", text))),
                ..NotePatch::default()
            },
        )
        .await
        .expect("b");
    hub.store
        .update(
            task.id,
            TaskPatch {
                status: Some(TaskStatus::Complete),
                ..TaskPatch::default()
            },
        )
        .await
        .expect("hub");
    assert!(len > 0);

    let mut la = connect(&hub.store, &a.store);
    la.caught_up().await;
    let mut lb = connect(&hub.store, &b.store);
    lb.caught_up().await;
    let expected = "Opening (A) paragraph.\n\nMiddle paragraph.\n\nLast paragraph. (edited by B)";
    let (hs, as_, bs) = (hub.store.clone(), a.store.clone(), b.store.clone());
    for _ in 0..500 {
        if note_content(&as_, note.id).await == expected
            && note_content(&bs, note.id).await == expected
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for s in [&hs, &as_, &bs] {
        assert_eq!(note_content(s, note.id).await, expected);
        assert_eq!(
            s.get::<Task>(task.id).await.expect("task").value.status,
            TaskStatus::Complete
        );
    }
    let sa = as_.summary().await.expect("s");
    assert_eq!(hs.summary().await.expect("s"), sa);
    assert_eq!(bs.summary().await.expect("s"), sa);
    la.close().await;
    lb.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_concurrent_with_edit_stays_deleted_and_keeps_the_edit() {
    let a = replica();
    let b = replica();
    let note = a
        .store
        .create(Note {
            title: "doomed".into(),
            content: "v1".into(),
            project: None,
        })
        .await
        .expect("note");
    let mut l = connect(&a.store, &b.store);
    l.caught_up().await;
    l.close().await;
    a.store.delete(Kind::Note, note.id).await.expect("delete");
    b.store
        .update(
            note.id,
            NotePatch {
                content: Some(TextEdit::Append(" and v2".into())),
                ..NotePatch::default()
            },
        )
        .await
        .expect("edit");
    let mut l = connect(&a.store, &b.store);
    l.caught_up().await;
    let (sa, sb) = (a.store.clone(), b.store.clone());
    wait_for(|| sa.summary_blocking().ok() == sb.summary_blocking().ok()).await;
    for s in [&sa, &sb] {
        let rec = s.get::<Note>(note.id).await.expect("tombstone readable");
        assert!(rec.deleted, "delete wins");
        assert_eq!(
            rec.value.content, "v1 and v2",
            "the concurrent edit is kept in the tombstone"
        );
        assert_eq!(
            s.list(Filter::new(Kind::Note)).await.expect("list").total,
            0
        );
    }
    l.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_edits_flow_both_ways() {
    let a = replica();
    let b = replica();
    let mut l = connect(&a.store, &b.store);
    l.caught_up().await;
    let note = a
        .store
        .create(Note {
            title: "live".into(),
            content: String::new(),
            project: None,
        })
        .await
        .expect("note");
    let sb = b.store.clone();
    wait_for(|| {
        sb.heads_blocking(note.id)
            .map(|h| !h.is_empty())
            .unwrap_or(false)
    })
    .await;
    for i in 0..20 {
        let (writer, reader) = if i % 2 == 0 {
            (&a.store, &b.store)
        } else {
            (&b.store, &a.store)
        };
        writer
            .update(
                note.id,
                NotePatch {
                    content: Some(TextEdit::Append(format!("{i};"))),
                    ..NotePatch::default()
                },
            )
            .await
            .expect("edit");
        let want = writer.heads_blocking(note.id).expect("heads");
        let r = reader.clone();
        wait_for(|| r.heads_blocking(note.id).ok() == Some(want.clone())).await;
    }
    let expected: String = (0..20).map(|i| format!("{i};")).collect();
    assert_eq!(note_content(&a.store, note.id).await, expected);
    l.close().await;
}

#[tokio::test]
async fn bad_frames_end_the_session_with_a_clear_error() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("malformed", {
            let mut f = vec![0, 0, 0, 5, hearth_protocol::PROTOCOL_VERSION];
            f.extend([0xff, 0xff, 0xff, 0xff]);
            f
        }),
        (
            "truncated",
            vec![0, 0, 0, 100, hearth_protocol::PROTOCOL_VERSION, 0],
        ),
        (
            "oversized",
            (hearth_protocol::MAX_FRAME as u32 + 1)
                .to_be_bytes()
                .to_vec(),
        ),
        ("wrong version", vec![0, 0, 0, 2, 99, 0]),
    ];
    for (name, bytes) in cases {
        let r = replica();
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (rd, wr) = tokio::io::split(ours);
        let session = tokio::spawn(run_session(
            r.store.clone(),
            rd,
            wr,
            SessionConfig::default(),
            Arc::new(SessionStats::default()),
            None,
            std::future::pending(),
        ));
        let (_peer_rd, mut peer_wr) = tokio::io::split(theirs);
        peer_wr.write_all(&bytes).await.expect("write");
        peer_wr.shutdown().await.expect("close");
        let err = tokio::time::timeout(Duration::from_secs(5), session)
            .await
            .expect("session ends")
            .expect("join")
            .expect_err(name);
        let text = err.to_string();
        match name {
            "malformed" => assert!(text.contains("malformed"), "{name}: {text}"),
            "truncated" => assert!(text.contains("middle of a frame"), "{name}: {text}"),
            "oversized" => assert!(text.contains("exceeds the maximum"), "{name}: {text}"),
            _ => assert!(text.contains("version"), "{name}: {text}"),
        }
        assert!(!err.is_retryable());
        // The store is untouched and usable.
        r.store
            .create(Note {
                title: "still fine".into(),
                ..Note::default()
            })
            .await
            .expect("usable");
    }
}

/// Deterministic pseudo-random concurrent edits on two offline replicas, several rounds:
/// after each reconnect both hold the same text and the same heads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_concurrent_splices_converge() {
    let a = replica();
    let b = replica();
    let note = a
        .store
        .create(Note {
            title: "fuzz".into(),
            content: "seed text".into(),
            project: None,
        })
        .await
        .expect("note");
    let mut l = connect(&a.store, &b.store);
    l.caught_up().await;
    l.close().await;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n.max(1) as u64) as usize
    };
    for round in 0..3 {
        for (side, store) in [("a", &a.store), ("b", &b.store)] {
            for i in 0..30 {
                let len = note_content(store, note.id).await.chars().count();
                let pos = next(len + 1);
                let delete = next((len - pos).min(5) + 1);
                let insert = format!("{side}{round}{i}é");
                store
                    .update(
                        note.id,
                        NotePatch {
                            content: Some(TextEdit::Splice {
                                pos,
                                delete,
                                insert,
                            }),
                            ..NotePatch::default()
                        },
                    )
                    .await
                    .expect("splice");
            }
        }
        let mut l = connect(&a.store, &b.store);
        l.caught_up().await;
        let (sa, sb) = (a.store.clone(), b.store.clone());
        wait_for(|| sa.heads_blocking(note.id).ok() == sb.heads_blocking(note.id).ok()).await;
        assert_eq!(
            note_content(&a.store, note.id).await,
            note_content(&b.store, note.id).await
        );
        l.close().await;
    }
}

/// A raw peer: writes frames to a session over an in-memory stream.
async fn raw_peer(
    r: &Replica,
) -> (
    JoinHandle<Result<(), SessionError>>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (rd, wr) = tokio::io::split(ours);
    let session = tokio::spawn(run_session(
        r.store.clone(),
        rd,
        wr,
        SessionConfig::default(),
        Arc::new(SessionStats::default()),
        None,
        std::future::pending(),
    ));
    let (peer_rd, peer_wr) = tokio::io::split(theirs);
    (session, peer_wr, peer_rd)
}

fn frame(msg: &hearth_protocol::SyncMessage) -> Vec<u8> {
    hearth_protocol::encode_frame(msg).expect("encode")
}

#[tokio::test]
async fn a_bad_document_does_not_end_the_session_for_the_others() {
    let r = replica();
    let (session, mut peer, mut peer_rd) = raw_peer(&r).await;
    // Keep reading what the session sends so it never waits on us.
    let drain = tokio::spawn(async move {
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut peer_rd, &mut sink).await;
    });
    // A sync message that is not one, then one whose change does not load.
    let bad_id = hearth_sync::DocId::random();
    peer.write_all(&frame(&hearth_protocol::SyncMessage::Sync {
        doc: bad_id.0,
        message: vec![0x42, 1, 2, 3],
    }))
    .await
    .expect("write");
    // Then a good document, whole.
    let good = replica();
    let note = good
        .store
        .create(Note {
            title: "kept".into(),
            content: "fine".into(),
            project: None,
        })
        .await
        .expect("create");
    let docs = good.store.export(vec![note.id]).await.expect("export");
    peer.write_all(&frame(&hearth_protocol::SyncMessage::Snapshots { docs }))
        .await
        .expect("write");
    wait_for(|| r.store.count_blocking().ok() == Some(1)).await;
    assert!(!session.is_finished(), "one bad document ended the session");
    assert_eq!(note_content(&r.store, note.id).await, "fine");
    session.abort();
    drain.abort();
}

#[tokio::test]
async fn a_flood_of_summary_rounds_ends_the_session() {
    let r = replica();
    let (session, mut peer, mut peer_rd) = raw_peer(&r).await;
    let drain = tokio::spawn(async move {
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut peer_rd, &mut sink).await;
    });
    let hello = frame(&hearth_protocol::SyncMessage::Hello {
        root: [1; 16],
        docs: 1,
    });
    for _ in 0..100 {
        if peer.write_all(&hello).await.is_err() {
            break;
        }
    }
    let err = tokio::time::timeout(Duration::from_secs(10), session)
        .await
        .expect("session ends")
        .expect("join")
        .expect_err("refused");
    assert!(err.to_string().contains("too often"), "{err}");
    drain.abort();
}

#[tokio::test]
async fn a_declared_length_is_not_allocated_before_its_bytes_arrive() {
    // A header announcing the whole 16 MiB, then 10 bytes, then the stream ends.
    let mut bytes = (hearth_protocol::MAX_FRAME as u32).to_be_bytes().to_vec();
    bytes.extend([hearth_protocol::PROTOCOL_VERSION; 10]);
    let mut reader = bytes.as_slice();
    let mut buf = Vec::new();
    let err = hearth_sync::read_frame::<hearth_protocol::SyncMessage, _>(
        &mut reader,
        &mut buf,
        hearth_protocol::MAX_FRAME,
    )
    .await
    .expect_err("truncated");
    assert!(err.to_string().contains("middle of a frame"), "{err}");
    assert!(
        buf.capacity() <= 256 * 1024,
        "buffered {} bytes for 10 received",
        buf.capacity()
    );
    // And a pairing-sized limit refuses a larger header outright.
    let mut reader: &[u8] = &[0, 0, 0x20, 0];
    let err = hearth_sync::read_frame::<hearth_protocol::PairRequest, _>(
        &mut reader,
        &mut buf,
        hearth_protocol::PAIR_MAX_FRAME,
    )
    .await
    .expect_err("oversized");
    assert!(err.to_string().contains("exceeds the maximum"), "{err}");
}

#[tokio::test]
async fn documents_received_whole_are_forwarded_once_verified() {
    let (a, hub, b) = (replica(), replica(), replica());
    let mut hb = connect(&hub.store, &b.store);
    hb.caught_up().await;
    for i in 0..20 {
        a.store
            .create(Note {
                title: format!("from a {i}"),
                content: "travels through the hub".into(),
                project: None,
            })
            .await
            .expect("create");
    }
    // A's notes reach the hub whole (unverified), are verified there in the background,
    // and only then go on to B.
    let mut ah = connect(&a.store, &hub.store);
    ah.caught_up().await;
    wait_for(|| b.store.count_blocking().ok() == Some(20)).await;
    wait_for(|| b.store.unverified_blocking().ok() == Some(0)).await;
    assert_eq!(hub.store.quarantined_blocking().expect("q"), 0);
    assert_eq!(
        a.store.summary_blocking().expect("a"),
        b.store.summary_blocking().expect("b")
    );
    ah.close().await;
    hb.close().await;
}
