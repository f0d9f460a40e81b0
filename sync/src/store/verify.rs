//! Verification of documents received whole: nothing a peer claims is believed.
//!
//! A snapshot from a full-scope peer is stored at once (fast catch-up) but unverified:
//! in no bucket digest, listing or search, never exported or offered to another peer.
//! The verifier loads each within [`Limits::PEER`](crate::bounds::Limits::PEER) on every
//! core, recomputes heads, digest and index rows from the content, and only then makes
//! the document visible and announces it (so sessions forward it). A document that fails
//! is moved to quarantine, logged and counted; the others are unaffected.
//!
//! The loads run without the store's lock; only the short commit of each batch takes it.
//! The verifier thread holds a weak reference and stops when the store is dropped.

use std::sync::{mpsc, Weak};

use super::*;

/// Documents verified per batch (one transaction).
const BATCH: u32 = 256;
/// The verifier starts once imports have paused this long, so it does not compete with
/// a catch-up for the cores...
const QUIET: Duration = Duration::from_millis(30);
/// ...but waits no longer than this while imports keep arriving.
const MAX_WAIT: Duration = Duration::from_millis(1000);

/// The running verifier thread.
pub(super) struct Verifier {
    pub(super) wake: mpsc::Sender<()>,
    pub(super) handle: JoinHandle<()>,
}

/// What a document's content says about it, computed without the lock.
struct Verified {
    kind: DocKind,
    heads: Vec<[u8; 32]>,
    digest: Digest,
    derived: Derived,
    deleted: bool,
    created_at: i64,
    updated_at: i64,
}

struct Pending {
    id: DocId,
    version: i64,
    tag: i64,
    bytes: Vec<u8>,
}

fn verify_one(p: &Pending) -> Result<Verified, StoreError> {
    let mut doc = load_untrusted(&p.id, &p.bytes)?;
    let kind = peer_doc_kind(&p.id, &doc)?;
    let heads = raw_heads(&doc.get_heads());
    if heads.is_empty() {
        return Err(StoreError::PeerData {
            id: p.id,
            reason: "empty document".into(),
        });
    }
    Ok(Verified {
        kind,
        digest: doc_digest(&p.id, &heads),
        heads,
        derived: kind.derive(&doc),
        deleted: read_bool(&doc, "deleted"),
        created_at: read_i64(&doc, "created_at"),
        updated_at: read_i64(&doc, "updated_at"),
    })
}

/// Runs `verify_one` over `pending` on every core.
fn verify_all(pending: &[Pending]) -> Vec<Result<Verified, StoreError>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let per = pending.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = pending
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(verify_one).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| {
                h.join().unwrap_or_else(|_| {
                    // `verify_one` catches Automerge's panics; this is a last resort.
                    vec![Err(StoreError::Task("verifier thread panicked".into()))]
                })
            })
            .collect()
    })
}

impl DocumentStore {
    /// Verifies up to `limit` documents received whole; returns how many it looked at
    /// (verified or quarantined). Safe to call from any process and any thread.
    pub fn verify_pending_blocking(&self, limit: u32) -> Result<usize, StoreError> {
        let pending: Vec<Pending> = {
            let inner = self.lock();
            let mut stmt = inner.conn.prepare_cached(
                "SELECT id, version, unverified_from, snapshot FROM documents
                 WHERE unverified_from IS NOT NULL LIMIT ?1",
            )?;
            let rows = stmt.query_map([limit], |r| {
                Ok(Pending {
                    id: id_from_sql(r.get(0)?)?,
                    version: r.get(1)?,
                    tag: r.get(2)?,
                    bytes: r.get(3)?,
                })
            })?;
            rows.collect::<Result<_, _>>()?
        };
        if pending.is_empty() {
            return Ok(0);
        }
        let verdicts = verify_all(&pending);
        let writer = self.shared.writer;
        let mut announce = Vec::new();
        {
            let mut inner = self.lock();
            let tx = begin(&mut inner.conn, Durability::Normal)?;
            for (p, verdict) in pending.iter().zip(verdicts) {
                // Merged or verified meanwhile (a sync message, another process): skip.
                let still: Option<i64> = tx
                    .query_row(
                        "SELECT version FROM documents WHERE id = ?1 AND unverified_from IS NOT NULL",
                        [&p.id.0[..]],
                        |r| r.get(0),
                    )
                    .optional()?;
                if still != Some(p.version) {
                    continue;
                }
                match verdict {
                    Ok(v) => {
                        tx.execute(
                            "UPDATE documents SET kind = ?2, heads = ?3, digest = ?4,
                               unverified_from = NULL WHERE id = ?1",
                            params![
                                &p.id.0[..],
                                v.kind.as_str(),
                                v.heads.iter().flatten().copied().collect::<Vec<u8>>(),
                                &v.digest[..]
                            ],
                        )?;
                        bucket_update(&tx, p.id.bucket(), None, &v.digest)?;
                        write_index(
                            &tx,
                            &p.id,
                            &IndexRow {
                                kind: v.kind.as_str(),
                                derived: &v.derived,
                                deleted: v.deleted,
                                created_at: v.created_at,
                                updated_at: v.updated_at,
                                body: Some(&v.derived.body),
                            },
                        )?;
                        log_change(&tx, &p.id, writer)?;
                        announce.push((p.id, p.tag));
                        // A placement moves its project: announce that too.
                        if v.kind == DocKind::Placement {
                            if let Some(project) = v.derived.project {
                                announce.push((project, p.tag));
                            }
                        }
                    }
                    Err(e) if e.is_document_fault() => {
                        tx.execute("DELETE FROM chunks WHERE doc_id = ?1", [&p.id.0[..]])?;
                        tx.execute("DELETE FROM documents WHERE id = ?1", [&p.id.0[..]])?;
                        quarantine(&tx, &p.id, &e.to_string(), &p.bytes)?;
                    }
                    Err(e) => return Err(e),
                }
            }
            tx.commit()?;
        }
        for (id, tag) in announce {
            self.announce(id, Origin::Peer(PeerTag(tag as u64)));
        }
        Ok(pending.len())
    }

    /// Verifies every document still waiting (entity queries call this first, so what
    /// they show is complete and verified).
    pub fn verify_all_pending_blocking(&self) -> Result<(), StoreError> {
        while self.verify_pending_blocking(BATCH)? > 0 {}
        Ok(())
    }

    /// Documents received whole and not yet verified.
    pub fn unverified_blocking(&self) -> Result<u64, StoreError> {
        let n: i64 = self.lock().conn.query_row(
            "SELECT count(*) FROM documents WHERE unverified_from IS NOT NULL",
            [],
            |r| r.get(0),
        )?;
        Ok(n as u64)
    }

    /// Starts the verifier thread if needed and tells it that documents arrived.
    pub(super) fn wake_verifier(&self) {
        let mut slot = self
            .shared
            .verifier
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(v) = slot.as_ref() {
            if v.wake.send(()).is_ok() {
                return;
            }
        }
        let (wake, rx) = mpsc::channel();
        let weak = Arc::downgrade(&self.shared);
        match std::thread::Builder::new()
            .name("hearth-store-verify".into())
            .spawn(move || run_verifier(weak, rx))
        {
            Ok(handle) => {
                let _ = wake.send(());
                *slot = Some(Verifier { wake, handle });
            }
            Err(e) => tracing::error!(error = %e, "cannot start the document verifier"),
        }
    }
}

fn run_verifier(store: Weak<Shared>, wake: mpsc::Receiver<()>) {
    loop {
        // Wait for imports, then for a pause in them (or MAX_WAIT).
        if wake.recv().is_err() {
            return;
        }
        let first = std::time::Instant::now();
        loop {
            match wake.recv_timeout(QUIET) {
                Ok(()) if first.elapsed() < MAX_WAIT => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
        let Some(shared) = store.upgrade() else {
            return;
        };
        let store = DocumentStore { shared };
        loop {
            match store.verify_pending_blocking(BATCH) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "document verification failed; will retry");
                    break;
                }
            }
        }
        // Dropping the last clone here runs the store's shutdown on this thread, which
        // then does not join itself (see `Shared::drop`).
    }
}
