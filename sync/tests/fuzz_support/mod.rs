//! The store path that the fuzz targets drive and `fuzz_regressions.rs` replays: one
//! implementation, compiled into both (the cargo-fuzz crate includes this file by path).
//!
//! A fuzz input for the store targets is `flags ‖ frame*`: `flags & 1` scopes the peer to
//! the fixture's `work` project; each frame is a `hearth/sync/1` frame handled the way a
//! session handles it: `Sync` → `DocumentStore::receive_sync` then `generate_sync` (the
//! reply), `Snapshots` → `DocumentStore::import`, the verifier
//! (`verify_all_pending_blocking`), then `generate_sync` on every id (which loads the
//! document, as serving it to the next peer would). An error ends the input,
//! as it ends a session.
//!
//! The store is seeded from `tests/fuzz_fixtures/base.frame`: one `Snapshots` frame of
//! projects, notes and tasks made through the entity API by `fuzz/src/bin/seeds.rs`, so
//! recorded sync messages and snapshots refer to ids and histories the store holds.

#![allow(dead_code, unreachable_pub)]

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering::Relaxed},
};

use automerge::sync;
use hearth_protocol::{decode_frame, DocSnapshot, SyncMessage};
use hearth_sync::{DocId, DocumentStore, Origin, StoreError};
use sha2::{Digest, Sha256};

/// Input flag: the peer is scoped to the fixture's `work` project.
pub const FLAG_SCOPED: u8 = 1;

/// Where the fixture lives, from this crate (`sync`) or from `fuzz/`.
pub fn fixture_path() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let here = manifest.join("tests/fuzz_fixtures/base.frame");
    if here.exists() {
        here
    } else {
        manifest.join("../sync/tests/fuzz_fixtures/base.frame")
    }
}

/// The fixture's snapshots.
pub fn base_snapshots() -> Result<Vec<DocSnapshot>, String> {
    let path = fixture_path();
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    match decode_frame::<SyncMessage>(&bytes) {
        Ok(Some((SyncMessage::Snapshots { docs }, _))) => Ok(docs),
        other => Err(format!(
            "{}: not a Snapshots frame: {other:?}",
            path.display()
        )),
    }
}

/// How far inputs got; the fuzz targets print these.
#[derive(Debug, Default)]
pub struct Stats {
    /// Inputs replayed.
    pub inputs: AtomicU64,
    /// Frames that decoded.
    pub frames: AtomicU64,
    /// `Sync` frames.
    pub sync_frames: AtomicU64,
    /// ... whose message `automerge::sync::Message::decode` accepts.
    pub sync_decoded: AtomicU64,
    /// ... carrying at least one change, every chunk with a valid checksum: past decoding.
    pub sync_valid_changes: AtomicU64,
    /// `receive_sync` returned Ok.
    pub sync_ok: AtomicU64,
    /// ... and the document's stored heads moved (the message was applied).
    pub sync_applied: AtomicU64,
    /// `Snapshots` frames.
    pub snapshot_frames: AtomicU64,
    /// ... every document made of chunks with valid checksums: past decoding.
    pub snapshot_valid: AtomicU64,
    /// `import` returned Ok.
    pub import_ok: AtomicU64,
    /// Imported documents the store then loaded without error.
    pub loaded_ok: AtomicU64,
    /// Imported documents that failed to load afterwards.
    pub loaded_err: AtomicU64,
    /// Inputs with at least one `Sync` frame past decoding (changes with valid checksums).
    pub inputs_sync_valid: AtomicU64,
    /// Inputs that moved a document's heads through `receive_sync`.
    pub inputs_sync_applied: AtomicU64,
    /// Inputs with at least one `Snapshots` frame past decoding (valid chunk checksums).
    pub inputs_snapshot_valid: AtomicU64,
    /// Inputs whose imported documents the store then loaded.
    pub inputs_snapshot_loaded: AtomicU64,
}

impl Stats {
    /// All zero, for a `static`.
    pub const fn new() -> Self {
        Self {
            inputs: AtomicU64::new(0),
            frames: AtomicU64::new(0),
            sync_frames: AtomicU64::new(0),
            sync_decoded: AtomicU64::new(0),
            sync_valid_changes: AtomicU64::new(0),
            sync_ok: AtomicU64::new(0),
            sync_applied: AtomicU64::new(0),
            snapshot_frames: AtomicU64::new(0),
            snapshot_valid: AtomicU64::new(0),
            import_ok: AtomicU64::new(0),
            loaded_ok: AtomicU64::new(0),
            loaded_err: AtomicU64::new(0),
            inputs_sync_valid: AtomicU64::new(0),
            inputs_sync_applied: AtomicU64::new(0),
            inputs_snapshot_valid: AtomicU64::new(0),
            inputs_snapshot_loaded: AtomicU64::new(0),
        }
    }

    /// One line for the log.
    pub fn line(&self) -> String {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let inputs = g(&self.inputs).max(1);
        let pct = |n: u64| 100.0 * n as f64 / inputs as f64;
        format!(
            "inputs={} frames={} | sync: frames={} decoded={} valid={} ok={} applied={}; inputs past decoding {:.1}%, applied {:.1}% | snapshots: frames={} valid={} import_ok={} loaded_ok={} loaded_err={}; inputs past decoding {:.1}%, loaded {:.1}%",
            g(&self.inputs),
            g(&self.frames),
            g(&self.sync_frames),
            g(&self.sync_decoded),
            g(&self.sync_valid_changes),
            g(&self.sync_ok),
            g(&self.sync_applied),
            pct(g(&self.inputs_sync_valid)),
            pct(g(&self.inputs_sync_applied)),
            g(&self.snapshot_frames),
            g(&self.snapshot_valid),
            g(&self.import_ok),
            g(&self.loaded_ok),
            g(&self.loaded_err),
            pct(g(&self.inputs_snapshot_valid)),
            pct(g(&self.inputs_snapshot_loaded)),
        )
    }
}

/// Whether `b` is one or more chunks whose checksums Automerge would accept (compressed
/// chunks are not inflated here and count as not valid).
pub fn chunks_valid(b: &[u8]) -> bool {
    fn uleb(b: &[u8], pos: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*pos)?;
            *pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut pos = 0;
    let mut any = false;
    while pos < b.len() {
        let Some(head) = b.get(pos..pos + 9) else {
            return false;
        };
        if head[..4] != [0x85, 0x6f, 0x4a, 0x83] || head[8] > 1 {
            return false;
        }
        let start = pos + 8;
        pos += 9;
        let Some(len) = uleb(b, &mut pos).and_then(|l| usize::try_from(l).ok()) else {
            return false;
        };
        let Some(data_end) = pos.checked_add(len).filter(|&e| e <= b.len()) else {
            return false;
        };
        let hash = Sha256::digest(&b[start..data_end]);
        if hash[..4] != head[4..8] {
            return false;
        }
        pos = data_end;
        any = true;
    }
    any
}

/// A store seeded with the fixture, and a runtime to drive its async API.
pub struct Fixture {
    /// The store under test.
    pub store: DocumentStore,
    /// The fixture's `work` project, the scope of scoped inputs.
    pub work: DocId,
    /// Ids of the fixture's documents.
    pub base_ids: Vec<[u8; 16]>,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// Opens a store in a fresh temporary directory and imports the fixture.
    pub fn new() -> Result<Self, String> {
        let docs = base_snapshots()?;
        let work = docs
            .iter()
            .find(|d| d.index.kind == "project" && d.index.title == "work")
            .map(|d| DocId(d.id))
            .ok_or("the fixture has no project named work")?;
        let base_ids = docs.iter().map(|d| d.id).collect();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let store = DocumentStore::open(dir.path().join("fuzz.db")).map_err(|e| e.to_string())?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let tag = store.new_peer_tag();
        rt.block_on(store.import(docs, Origin::Peer(tag), None))
            .map_err(|e| e.to_string())?;
        Ok(Self {
            store,
            work,
            base_ids,
            rt,
            _dir: dir,
        })
    }

    /// Replays one input; returns every store call's result, stopping at the first error.
    pub fn replay(&self, input: &[u8], stats: &Stats) -> Vec<Result<(), StoreError>> {
        stats.inputs.fetch_add(1, Relaxed);
        let Some((&flags, mut rest)) = input.split_first() else {
            return Vec::new();
        };
        let scope = (flags & FLAG_SCOPED != 0).then_some(self.work);
        let tag = self.store.new_peer_tag();
        let mut states: HashMap<DocId, sync::State> = HashMap::new();
        let mut results = Vec::new();
        let before = [
            stats.sync_valid_changes.load(Relaxed),
            stats.sync_applied.load(Relaxed),
            stats.snapshot_valid.load(Relaxed),
            stats.loaded_ok.load(Relaxed),
        ];
        while let Ok(Some((msg, used))) = decode_frame::<SyncMessage>(rest) {
            rest = &rest[used..];
            stats.frames.fetch_add(1, Relaxed);
            let r = match msg {
                SyncMessage::Sync { doc, message } => {
                    self.sync(DocId(doc), message, tag, scope, &mut states, stats)
                }
                SyncMessage::Snapshots { docs } => self.import(docs, tag, scope, stats),
                _ => Ok(()),
            };
            let failed = r.is_err();
            results.push(r);
            if failed {
                break;
            }
        }
        let moved = |i: usize, a: &AtomicU64| u64::from(a.load(Relaxed) > before[i]);
        stats
            .inputs_sync_valid
            .fetch_add(moved(0, &stats.sync_valid_changes), Relaxed);
        stats
            .inputs_sync_applied
            .fetch_add(moved(1, &stats.sync_applied), Relaxed);
        stats
            .inputs_snapshot_valid
            .fetch_add(moved(2, &stats.snapshot_valid), Relaxed);
        stats
            .inputs_snapshot_loaded
            .fetch_add(moved(3, &stats.loaded_ok), Relaxed);
        results
    }

    fn sync(
        &self,
        id: DocId,
        message: Vec<u8>,
        tag: hearth_sync::PeerTag,
        scope: Option<DocId>,
        states: &mut HashMap<DocId, sync::State>,
        stats: &Stats,
    ) -> Result<(), StoreError> {
        stats.sync_frames.fetch_add(1, Relaxed);
        if let Ok(m) = sync::Message::decode(&message) {
            stats.sync_decoded.fetch_add(1, Relaxed);
            let valid = m.changes.len() > 0 && m.changes.iter().all(chunks_valid);
            if valid {
                stats.sync_valid_changes.fetch_add(1, Relaxed);
            }
        }
        let state = match states.remove(&id) {
            Some(s) => s,
            // A session opens a document's sync by generating its first message.
            None => {
                self.rt
                    .block_on(self.store.generate_sync(id, sync::State::new()))?
                    .0
            }
        };
        let before = self.store.heads_blocking(id)?;
        let state = self.rt.block_on(self.store.receive_sync(
            id,
            state,
            message,
            Origin::Peer(tag),
            scope,
        ))?;
        stats.sync_ok.fetch_add(1, Relaxed);
        if self.store.heads_blocking(id)? != before {
            stats.sync_applied.fetch_add(1, Relaxed);
        }
        // The session answers at once.
        let (state, _reply) = self.rt.block_on(self.store.generate_sync(id, state))?;
        states.insert(id, state);
        Ok(())
    }

    fn import(
        &self,
        docs: Vec<DocSnapshot>,
        tag: hearth_sync::PeerTag,
        scope: Option<DocId>,
        stats: &Stats,
    ) -> Result<(), StoreError> {
        stats.snapshot_frames.fetch_add(1, Relaxed);
        if !docs.is_empty() && docs.iter().all(|d| chunks_valid(&d.bytes)) {
            stats.snapshot_valid.fetch_add(1, Relaxed);
        }
        let ids: Vec<DocId> = docs.iter().map(|d| DocId(d.id)).collect();
        self.rt
            .block_on(self.store.import(docs, Origin::Peer(tag), scope))?;
        stats.import_ok.fetch_add(1, Relaxed);
        // New documents from a full-scope peer wait, unverified, for the verifier: run it
        // now, so their bytes are loaded within this input.
        self.store.verify_all_pending_blocking()?;
        for id in ids {
            // Serving the document to the next peer loads it.
            match self
                .rt
                .block_on(self.store.generate_sync(id, sync::State::new()))
            {
                Ok(_) => stats.loaded_ok.fetch_add(1, Relaxed),
                Err(e) => {
                    stats.loaded_err.fetch_add(1, Relaxed);
                    return Err(e);
                }
            };
        }
        Ok(())
    }
}

/// The message of a result that is a panic turned into an error by `spawn_blocking`.
pub fn panic_of(results: &[Result<(), StoreError>]) -> Option<String> {
    results.iter().find_map(|r| match r {
        Err(StoreError::Task(m)) if m.contains("panic") => Some(m.clone()),
        _ => None,
    })
}
