//! Documents from a scoped peer that wait for the document that decides their place.
//!
//! A device scoped to a project that creates a subproject writes two documents, the
//! project and its placement, and they reach this replica in any order (in different
//! `Snapshots` frames, or as two live syncs racing). Without its placement the project
//! would be a new top-level project, which a scoped peer may never create; so a new
//! document from a scoped peer whose deciding reference (a project's placement, a
//! placement's parent, an entity's project) this replica does not hold yet is neither
//! stored nor refused: it waits here. When that reference is committed (any origin), the
//! document is judged again from scratch, against its session's scope as it is then, and
//! stored or refused; it may wait again for the next link of a chain (a subproject of a
//! new subproject). A project whose placement never comes is never stored.
//!
//! Waiting documents live in memory only, at most [`MAX_WAITING`] of them and
//! [`MAX_WAITING_BYTES`] in all (oldest dropped first), and are dropped when their
//! session ends: the peer offers them again in its next session, since this replica still
//! lacks them. This module never stores a document that has not passed
//! `scope::judge_new` after its wait.

use super::*;

/// Documents that may wait at once.
const MAX_WAITING: usize = 256;
/// Bytes that waiting documents may hold in all; a larger document is not kept.
const MAX_WAITING_BYTES: usize = 16 * 1024 * 1024;

/// One waiting document.
pub(super) struct Waiter {
    /// The document it waits for.
    awaits: DocId,
    /// Its bytes as the peer sent them (a saved document).
    bytes: Vec<u8>,
    /// The root of the sending session's scope.
    scope: DocId,
    /// The sending session.
    origin: Origin,
}

/// The waiting documents, by id.
pub(super) struct Waiting {
    docs: LruCache<DocId, Waiter>,
    bytes: usize,
}

impl Waiting {
    pub(super) fn new() -> Self {
        Self {
            docs: LruCache::unbounded(),
            bytes: 0,
        }
    }

    fn add(&mut self, id: DocId, waiter: Waiter) {
        if let Some(old) = self.docs.pop(&id) {
            self.bytes -= old.bytes.len();
        }
        if waiter.bytes.len() > MAX_WAITING_BYTES {
            return;
        }
        self.bytes += waiter.bytes.len();
        self.docs.put(id, waiter);
        while self.docs.len() > MAX_WAITING || self.bytes > MAX_WAITING_BYTES {
            match self.docs.pop_lru() {
                Some((id, old)) => {
                    tracing::info!(%id, "dropped a waiting document: too many wait");
                    self.bytes -= old.bytes.len();
                }
                None => break,
            }
        }
    }

    fn take_awaiting(&mut self, arrived: &DocId) -> Vec<(DocId, Waiter)> {
        let ids: Vec<DocId> = self
            .docs
            .iter()
            .filter(|(_, w)| w.awaits == *arrived)
            .map(|(id, _)| *id)
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(w) = self.docs.pop(&id) {
                self.bytes -= w.bytes.len();
                out.push((id, w));
            }
        }
        out
    }

    fn forget(&mut self, origin: Origin) {
        let ids: Vec<DocId> = self
            .docs
            .iter()
            .filter(|(_, w)| w.origin == origin)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(w) = self.docs.pop(&id) {
                self.bytes -= w.bytes.len();
            }
        }
    }
}

impl DocumentStore {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.shared
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps document `id` (saved `bytes`, from a session of `origin` scoped to `scope`)
    /// until document `awaits` is committed.
    pub(super) fn wait(
        &self,
        id: DocId,
        awaits: DocId,
        bytes: Vec<u8>,
        scope: DocId,
        origin: Origin,
    ) {
        tracing::debug!(%id, %awaits, "a scoped peer's document waits for the one deciding its place");
        self.waiting().add(
            id,
            Waiter {
                awaits,
                bytes,
                scope,
                origin,
            },
        );
    }

    /// Drops the documents a session's peer sent that still wait (the session ended).
    pub(crate) fn forget_waiting(&self, origin: Origin) {
        self.waiting().forget(origin);
    }

    /// Judges again the documents that waited for `arrived`, which was just committed,
    /// and those waiting for what they bring in turn.
    pub(super) fn release_waiting(&self, arrived: DocId) {
        let mut arrived = vec![arrived];
        while let Some(done) = arrived.pop() {
            let ready = {
                let mut waiting = self.waiting();
                if waiting.docs.is_empty() {
                    return;
                }
                waiting.take_awaiting(&done)
            };
            for (id, waiter) in ready {
                let origin = waiter.origin;
                match self.admit_waiter(id, waiter) {
                    Ok(stored) => {
                        for stored in stored {
                            self.publish(stored, origin);
                            arrived.push(stored);
                        }
                    }
                    Err(StoreError::OutOfScope { id }) => {
                        tracing::warn!(%id, "refused a document outside the peer's scope");
                    }
                    Err(e) if e.is_document_fault() => {
                        tracing::warn!(%id, error = %e, "refused a scoped peer's waiting document");
                    }
                    Err(e) => tracing::error!(%id, error = %e, "cannot store a waiting document"),
                }
            }
        }
    }

    /// Stores a waiting document if it now passes; returns what to announce.
    fn admit_waiter(&self, id: DocId, waiter: Waiter) -> Result<Vec<DocId>, StoreError> {
        let doc = load_untrusted(&id, &waiter.bytes)?;
        let mut inner = self.lock();
        let scope = Scope::load(&inner.conn, waiter.scope)?;
        match self.store_new(&mut inner, id, doc, Some(&scope))? {
            NewDoc::Stored(ids) => Ok(ids),
            NewDoc::Waits(awaits, _) => {
                drop(inner);
                self.wait(id, awaits, waiter.bytes, waiter.scope, waiter.origin);
                Ok(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(awaits: u8, len: usize, origin: u64) -> Waiter {
        Waiter {
            awaits: DocId([awaits; 16]),
            bytes: vec![0; len],
            scope: DocId([0; 16]),
            origin: Origin::Peer(PeerTag(origin)),
        }
    }

    #[test]
    fn waiting_documents_are_bounded_in_number_and_bytes() {
        let mut w = Waiting::new();
        for i in 0..MAX_WAITING as u32 + 10 {
            w.add(DocId::random(), waiter((i % 3) as u8, 10, 1));
        }
        assert_eq!(w.docs.len(), MAX_WAITING);
        assert_eq!(w.bytes, MAX_WAITING * 10);
        let mut w = Waiting::new();
        w.add(DocId([1; 16]), waiter(1, MAX_WAITING_BYTES + 1, 1));
        assert!(
            w.docs.is_empty(),
            "a document over the byte bound is not kept"
        );
        for _ in 0..3 {
            w.add(DocId::random(), waiter(1, MAX_WAITING_BYTES / 2, 1));
        }
        assert_eq!(w.docs.len(), 2);
        assert!(w.bytes <= MAX_WAITING_BYTES);
    }

    #[test]
    fn waiting_documents_leave_with_what_they_wait_for_or_their_session() {
        let mut w = Waiting::new();
        let (a, b, c) = (DocId([1; 16]), DocId([2; 16]), DocId([3; 16]));
        w.add(a, waiter(9, 5, 1));
        w.add(b, waiter(8, 5, 1));
        w.add(c, waiter(9, 5, 2));
        // Offered again: replaced, not counted twice.
        w.add(a, waiter(9, 7, 1));
        assert_eq!(w.bytes, 17);
        let mut ready: Vec<DocId> = w
            .take_awaiting(&DocId([9; 16]))
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ready.sort();
        assert_eq!(ready, [a, c]);
        w.forget(Origin::Peer(PeerTag(1)));
        assert!(w.docs.is_empty());
        assert_eq!(w.bytes, 0);
    }
}
