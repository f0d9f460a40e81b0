//! Writes the seed corpora of every fuzz target from real data, and the store fixture.
//!
//! 1. The fixture (`sync/tests/fuzz_fixtures/base.frame`): projects `work` (with a child
//!    `work-sub`) and `home`, notes and tasks in each, made through the entity API in a
//!    fresh store and exported as one `Snapshots` frame. It is kept if it exists (crashers
//!    and seeds refer to its ids); `--new-fixture` replaces it.
//! 2. A two-store exchange: `peer` (the fixture plus edits and new documents, through
//!    the entity API) and `target` (the fixture, as the fuzzing store starts) run
//!    Automerge's sync protocol over the store API for every document the peer changed;
//!    the messages `peer` sent are recorded as `Sync` frames.
//! 3. Corpora under `fuzz/corpus/<target>/`: frames of every kind, pairing messages, the
//!    recorded sync messages (per document and all at once, unscoped and scoped),
//!    snapshots of known and new ids, and compression bombs of 16 and 256 MiB.
//!
//! Run: `cargo run --release --bin seeds` from `fuzz/`.

use std::path::{Path, PathBuf};

use automerge::sync;
use hearth_fuzz::{
    amfmt::{self, Chunk, DocChunk},
    bomb, replay,
};
use hearth_protocol::{
    encode_frame, DocSnapshot, PairRequest, PairResponse, SyncMessage, PROTOCOL_VERSION,
};
use hearth_sync::{
    DocId, DocumentStore, Note, NotePatch, Origin, Project, Task, TaskPatch, TaskStatus, TextEdit,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn open(dir: &Path, name: &str) -> Res<DocumentStore> {
    Ok(DocumentStore::open(dir.join(name))?)
}

fn make_fixture(dir: &Path) -> Res<Vec<DocSnapshot>> {
    let s = open(dir, "origin.db")?;
    let work = s.create_blocking(Project {
        name: "work".into(),
        ..Project::default()
    })?;
    let sub = s.create_blocking(Project {
        name: "work-sub".into(),
        parent: Some(work.id),
        instructions: "Answer briefly.".into(),
        ..Project::default()
    })?;
    let home = s.create_blocking(Project {
        name: "home".into(),
        ..Project::default()
    })?;
    let mut ids = vec![work.id, sub.id, home.id];
    for (project, title, content) in [
        (work.id, "Roadmap", "- ship sync\n- fuzz the store\n"),
        (sub.id, "Minutes", "Decided: one session per device."),
        (home.id, "Groceries", "- oat milk\n- lemons"),
    ] {
        let n = s.create_blocking(Note {
            project: Some(project),
            title: title.into(),
            content: content.into(),
        })?;
        ids.push(n.id);
    }
    let t = s.create_blocking(Task {
        project: Some(work.id),
        name: "Review the fuzz findings".into(),
        status: TaskStatus::default(),
        due: Some("2030-01-31".into()),
        notes: "see fuzz-findings.md".into(),
        parent: None,
        interval: None,
    })?;
    let sub_t = s.create_blocking(Task {
        project: Some(work.id),
        name: "Minimise crashers".into(),
        parent: Some(t.id),
        ..Task::default()
    })?;
    let h = s.create_blocking(Task {
        project: Some(home.id),
        name: "Water the plants".into(),
        interval: Some("1w".into()),
        ..Task::default()
    })?;
    ids.extend([t.id, sub_t.id, h.id]);
    // Some history: edits after creation.
    s.update_blocking(
        ids[3],
        NotePatch {
            content: Some(TextEdit::Splice {
                pos: 2,
                delete: 4,
                insert: "release".into(),
            }),
            ..NotePatch::default()
        },
    )?;
    let rt = runtime()?;
    Ok(rt.block_on(s.export(ids))?)
}

fn runtime() -> Res<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Res<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(name), bytes)?;
    Ok(())
}

fn frame(m: &SyncMessage) -> Res<Vec<u8>> {
    Ok(encode_frame(m)?)
}

fn with_flags(flags: u8, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![flags];
    for f in frames {
        out.extend(f);
    }
    out
}

/// Replaces the first change of a sync message with a compressed-change bomb.
fn bomb_sync_message(message: &[u8], mib: usize) -> Option<Vec<u8>> {
    let mut m = amfmt::SyncMsg::parse(message)?;
    let change = m.changes.first()?.clone();
    let chunks = amfmt::parse_chunks(&change)?;
    let c = chunks.first()?;
    let stream = bomb::zeros(&bomb::prefix_blocks(&c.data), mib);
    let mut out = Vec::from(amfmt::MAGIC);
    out.extend(amfmt::checksum(amfmt::TYPE_CHANGE, &c.data));
    out.push(amfmt::TYPE_COMPRESSED);
    amfmt::write_uleb(&mut out, stream.len() as u64);
    out.extend(stream);
    m.changes[0] = out;
    Some(m.write())
}

/// Replaces the largest op column of a saved document with a deflate bomb.
fn bomb_document(bytes: &[u8], mib: usize) -> Option<Vec<u8>> {
    let mut chunks = amfmt::parse_chunks(bytes)?;
    let c: &mut Chunk = chunks.first_mut()?;
    let mut d = DocChunk::parse(&c.data)?;
    let col = d.op_cols.iter_mut().max_by_key(|c| c.data.len())?;
    col.spec |= amfmt::DEFLATE_BIT;
    col.data = bomb::zeros(&bomb::prefix_blocks(&col.data), mib);
    c.data = d.write();
    Some(amfmt::write_chunks(&chunks))
}

fn main() -> Res<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("corpus");
    let tmp = tempfile::tempdir()?;
    let rt = runtime()?;

    let fixture = replay::fixture_path();
    let base = if fixture.exists() && !std::env::args().any(|a| a == "--new-fixture") {
        replay::base_snapshots()?
    } else {
        let docs = make_fixture(tmp.path())?;
        std::fs::create_dir_all(fixture.parent().ok_or("fixture has no parent")?)?;
        std::fs::write(
            &fixture,
            frame(&SyncMessage::Snapshots { docs: docs.clone() })?,
        )?;
        println!("wrote {}", fixture.display());
        docs
    };
    let id_of = |kind: &str, title: &str| -> Res<DocId> {
        base.iter()
            .find(|d| d.index.kind == kind && d.index.title == title)
            .map(|d| DocId(d.id))
            .ok_or_else(|| format!("fixture lacks {kind} {title}").into())
    };
    let work = id_of("project", "work")?;
    let home = id_of("project", "home")?;
    let roadmap = id_of("note", "Roadmap")?;
    let groceries = id_of("note", "Groceries")?;
    let review = id_of("task", "Review the fuzz findings")?;

    // The two stores of the recorded exchange.
    let peer = open(tmp.path(), "peer.db")?;
    let target = open(tmp.path(), "target.db")?;
    for s in [&peer, &target] {
        rt.block_on(s.import(base.clone(), Origin::Peer(s.new_peer_tag()), None))?;
    }
    // Edits on the peer, through the entity API.
    peer.update_blocking(
        roadmap,
        NotePatch {
            content: Some(TextEdit::Splice {
                pos: 0,
                delete: 0,
                insert: "Q3: ".into(),
            }),
            title: Some(TextEdit::Replace("Roadmap 2030".into())),
            ..NotePatch::default()
        },
    )?;
    peer.update_blocking(
        groceries,
        NotePatch {
            content: Some(TextEdit::Replace("- bread".into())),
            ..NotePatch::default()
        },
    )?;
    peer.update_blocking(
        review,
        TaskPatch {
            status: Some(TaskStatus::Complete),
            ..TaskPatch::default()
        },
    )?;
    let new_note = peer.create_blocking(Note {
        project: Some(work),
        title: "New on the peer".into(),
        content: "arrives by sync".into(),
    })?;
    let new_home_note = peer.create_blocking(Note {
        project: Some(home),
        title: "Outside work".into(),
        content: "a scoped peer must not send this".into(),
    })?;
    let new_project = peer.create_blocking(Project {
        name: "work-child".into(),
        parent: Some(work),
        ..Project::default()
    })?;
    let changed = [
        roadmap,
        groceries,
        review,
        new_note.id,
        new_home_note.id,
        new_project.id,
    ];

    // The exchange, per document; what the peer sent is recorded.
    let mut per_doc: Vec<(DocId, Vec<Vec<u8>>)> = Vec::new();
    for id in changed {
        let (mut sp, mut st) = (sync::State::new(), sync::State::new());
        let mut sent = Vec::new();
        let (tp, tt) = (peer.new_peer_tag(), target.new_peer_tag());
        for _round in 0..16 {
            let (s, from_peer) = rt.block_on(peer.generate_sync(id, sp))?;
            sp = s;
            let (s, from_target) = rt.block_on(target.generate_sync(id, st))?;
            st = s;
            if from_peer.is_none() && from_target.is_none() {
                break;
            }
            if let Some(m) = from_peer {
                sent.push(frame(&SyncMessage::Sync {
                    doc: id.0,
                    message: m.clone(),
                })?);
                st = rt.block_on(target.receive_sync(id, st, m, Origin::Peer(tt), None))?;
            }
            if let Some(m) = from_target {
                sp = rt.block_on(peer.receive_sync(id, sp, m, Origin::Peer(tp), None))?;
            }
        }
        assert_eq!(
            peer.heads_blocking(id)?,
            target.heads_blocking(id)?,
            "exchange did not converge"
        );
        per_doc.push((id, sent));
    }

    // sync_message_apply
    let dir = corpus.join("sync_message_apply");
    let mut all = Vec::new();
    for (i, (_, frames)) in per_doc.iter().enumerate() {
        write(&dir, &format!("seed-doc{i}"), &with_flags(0, frames))?;
        write(&dir, &format!("seed-doc{i}-scoped"), &with_flags(1, frames))?;
        all.extend(frames.iter().cloned());
    }
    write(&dir, "seed-all", &with_flags(0, &all))?;
    write(&dir, "seed-all-scoped", &with_flags(1, &all))?;
    // Bombs: the first message that carries a change.
    let with_change = per_doc.iter().flat_map(|(id, f)| {
        f.iter()
            .filter_map(move |fr| match hearth_protocol::decode_frame(fr) {
                Ok(Some((SyncMessage::Sync { message, .. }, _))) => {
                    let m = sync::Message::decode(&message).ok()?;
                    (!m.changes.is_empty()).then_some((*id, message))
                }
                _ => None,
            })
    });
    if let Some((id, message)) = with_change.clone().next() {
        for mib in [16, 256] {
            if let Some(m) = bomb_sync_message(&message, mib) {
                let f = frame(&SyncMessage::Sync {
                    doc: id.0,
                    message: m,
                })?;
                write(
                    &dir,
                    &format!("seed-bomb-change-{mib}mib"),
                    &with_flags(0, &[f]),
                )?;
            }
        }
    }

    // snapshot_import: known ids as the peer has them now (merge), new ids, the base.
    let dir = corpus.join("snapshot_import");
    let exported = rt.block_on(peer.export(changed.to_vec()))?;
    for (i, snap) in exported.iter().enumerate() {
        let f = frame(&SyncMessage::Snapshots {
            docs: vec![snap.clone()],
        })?;
        write(&dir, &format!("seed-doc{i}"), &with_flags(0, &[f.clone()]))?;
        write(&dir, &format!("seed-doc{i}-scoped"), &with_flags(1, &[f]))?;
    }
    let f = frame(&SyncMessage::Snapshots {
        docs: exported.clone(),
    })?;
    write(&dir, "seed-all", &with_flags(0, &[f.clone()]))?;
    write(&dir, "seed-all-scoped", &with_flags(1, &[f]))?;
    let f = frame(&SyncMessage::Snapshots { docs: base.clone() })?;
    write(&dir, "seed-base", &with_flags(0, &[f]))?;
    // The same documents under ids the store does not know.
    let renamed: Vec<DocSnapshot> = exported
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.id[15] ^= 0x5a;
            d
        })
        .collect();
    let f = frame(&SyncMessage::Snapshots { docs: renamed })?;
    write(&dir, "seed-new-ids", &with_flags(0, &[f.clone()]))?;
    write(&dir, "seed-new-ids-scoped", &with_flags(1, &[f]))?;
    for mib in [16, 256] {
        for (name, known) in [("known", true), ("new", false)] {
            let mut d = exported[0].clone();
            if !known {
                d.id[0] ^= 0xa5;
            }
            if let Some(b) = bomb_document(&d.bytes, mib) {
                d.bytes = b;
                let f = frame(&SyncMessage::Snapshots { docs: vec![d] })?;
                write(
                    &dir,
                    &format!("seed-bomb-column-{name}-{mib}mib"),
                    &with_flags(0, &[f.clone()]),
                )?;
                write(
                    &dir,
                    &format!("seed-bomb-column-{name}-{mib}mib-scoped"),
                    &with_flags(1, &[f]),
                )?;
            }
        }
    }

    // frame_sync: one of each message, a whole session's worth, broken headers.
    let dir = corpus.join("frame_sync");
    let summary = rt.block_on(target.summary())?;
    let entries = rt.block_on(target.entries((0..=255).collect()))?;
    let session = [
        SyncMessage::Hello {
            root: summary.root,
            docs: summary.docs,
        },
        SyncMessage::Buckets {
            digests: summary.buckets.clone(),
        },
        SyncMessage::Entries {
            buckets: vec![1, 2, 3],
            entries,
        },
        SyncMessage::Snapshots {
            docs: exported[..2].to_vec(),
        },
        SyncMessage::CatchUpDone,
    ];
    let mut stream = Vec::new();
    for (i, m) in session.iter().enumerate() {
        let f = frame(m)?;
        write(&dir, &format!("seed-msg{i}"), &f)?;
        stream.extend(f);
    }
    for (i, f) in all.iter().take(4).enumerate() {
        write(&dir, &format!("seed-sync{i}"), f)?;
        stream.extend(f);
    }
    write(&dir, "seed-session", &stream)?;
    write(
        &dir,
        "seed-oversized",
        &[0xff, 0xff, 0xff, 0xff, PROTOCOL_VERSION],
    )?;

    // frame_pair: `[0 request | 1 response] ‖ frame`.
    let dir = corpus.join("frame_pair");
    let requests = [
        PairRequest::Start {
            device_name: "Ada's laptop".into(),
            ticket_secret: Some([7; 16]),
        },
        PairRequest::Start {
            device_name: String::new(),
            ticket_secret: None,
        },
        PairRequest::Poll,
    ];
    for (i, m) in requests.iter().enumerate() {
        let mut v = vec![0];
        v.extend(encode_frame(m)?);
        write(&dir, &format!("seed-request{i}"), &v)?;
    }
    let responses = [
        PairResponse::Code {
            user_code: "WDJB-MJHT".into(),
            expires_in_secs: 900,
        },
        PairResponse::Pending,
        PairResponse::Approved {
            hub_name: "hearth".into(),
            scope: Some(work.to_string()),
        },
        PairResponse::Denied,
        PairResponse::Expired,
        PairResponse::Throttled {
            retry_after_secs: 60,
        },
        PairResponse::Refused {
            reason: "ticket already used".into(),
        },
    ];
    for (i, m) in responses.iter().enumerate() {
        let mut v = vec![1];
        v.extend(encode_frame(m)?);
        write(&dir, &format!("seed-response{i}"), &v)?;
    }
    println!("seeds written under {}", corpus.display());
    Ok(())
}
