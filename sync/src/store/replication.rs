//! Replication hooks: summaries, entries, export, import and Automerge sync messages.

use super::*;
use crate::bounds::Limits;

/// What became of a document a peer sent that this replica did not hold.
pub(super) enum NewDoc {
    /// Stored (or merged, if it arrived meanwhile): the ids to announce.
    Stored(Vec<DocId>),
    /// Waiting for this document, which decides its place; the new document, unstored.
    Waits(DocId, Box<AutoCommit>),
}

impl DocumentStore {
    /// The set digest of this replica; reads 256 small rows, loads no document.
    pub async fn summary(&self) -> Result<Summary, StoreError> {
        self.blocking(|s| s.summary_blocking()).await
    }

    /// [`Self::summary`] for synchronous callers.
    pub fn summary_blocking(&self) -> Result<Summary, StoreError> {
        let inner = self.lock();
        let mut buckets = vec![EMPTY; BUCKETS];
        let mut docs = 0u64;
        let mut stmt = inner
            .conn
            .prepare_cached("SELECT bucket, digest, docs FROM buckets")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let b: i64 = r.get(0)?;
            if let Some(slot) = buckets.get_mut(b as usize) {
                *slot = digest_from_sql(r.get(1)?);
            }
            docs += r.get::<_, i64>(2)? as u64;
        }
        let root = root_digest(&buckets);
        Ok(Summary {
            buckets,
            root,
            docs,
        })
    }

    /// The entries (id, digest) of every document in `buckets`, sorted by id.
    pub async fn entries(&self, buckets: Vec<u8>) -> Result<Vec<DocEntry>, StoreError> {
        self.blocking(move |s| {
            let inner = s.lock();
            let mut stmt = inner
                .conn
                .prepare_cached("SELECT id, digest FROM documents WHERE bucket = ?1 AND unverified_from IS NULL ORDER BY id")?;
            let mut out = Vec::new();
            for b in buckets {
                let rows = stmt.query_map([b], |r| {
                    let id: Vec<u8> = r.get(0)?;
                    Ok(DocEntry {
                        id: id_from_sql(id)?.0,
                        digest: digest_from_sql(r.get(1)?),
                    })
                })?;
                for row in rows {
                    out.push(row?);
                }
            }
            Ok(out)
        })
        .await
    }

    /// Whole documents for a peer that lacks them: compacted snapshot, heads and derived
    /// fields. Documents with pending chunks are compacted first (and stay compacted).
    pub async fn export(&self, ids: Vec<DocId>) -> Result<Vec<DocSnapshot>, StoreError> {
        self.blocking(move |s| s.export_blocking(&ids)).await
    }

    pub(super) fn export_blocking(&self, ids: &[DocId]) -> Result<Vec<DocSnapshot>, StoreError> {
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            // A document not yet verified is never forwarded.
            let Some(row) = doc_row(conn, id)?.filter(|r| r.verified) else {
                continue;
            };
            if row.chunk_count > 0 {
                let tx = begin(conn, Durability::Normal)?;
                let Some(row) = doc_row(&tx, id)? else {
                    continue;
                };
                let mut entry = take_cached(&tx, cache, id, &row)?;
                let snapshot = entry.doc.save();
                tx.execute("DELETE FROM chunks WHERE doc_id = ?1", [&id.0[..]])?;
                tx.execute(
                    "UPDATE documents SET snapshot = ?2, snapshot_gen = snapshot_gen + 1,
                       version = version + 1, chunk_count = 0, chunk_bytes = 0 WHERE id = ?1",
                    params![&id.0[..], snapshot],
                )?;
                tx.commit()?;
                entry.version = row.version + 1;
                entry.gen = row.gen + 1;
                entry.last_chunk = 0;
                cache.put(*id, entry);
            }
            let snap = conn.query_row(
                "SELECT d.heads, d.snapshot, e.kind, e.project, e.title, e.status, e.due, e.parent,
                        e.deleted, e.updated_at
                 FROM documents d JOIN entities e ON e.id = d.id WHERE d.id = ?1",
                [&id.0[..]],
                |r| {
                    let heads: Vec<u8> = r.get(0)?;
                    let kind: String = r.get(2)?;
                    // A project's parent is its placement's business: a peer scoped to
                    // this project must not learn it from the index either.
                    let parent = if kind == Kind::Project.as_str() {
                        None
                    } else {
                        r.get(7)?
                    };
                    Ok(DocSnapshot {
                        id: id.0,
                        heads: heads_from_bytes(&heads),
                        bytes: r.get(1)?,
                        index: DocIndex {
                            kind,
                            project: r.get(3)?,
                            title: r.get(4)?,
                            status: r.get(5)?,
                            due: r.get(6)?,
                            parent,
                            deleted: r.get(8)?,
                            updated_at: r.get(9)?,
                        },
                    })
                },
            )?;
            out.push(snap);
        }
        Ok(out)
    }

    /// Stores documents received whole from a peer, in one transaction. Documents this
    /// replica already holds are merged instead, through the same checks as a sync
    /// message. Returns how many were new.
    ///
    /// From a peer with full scope a new document is stored as it came, unverified: it
    /// is in no digest, listing or search and is never forwarded until the verifier has
    /// loaded it within [`Limits::PEER`] and recomputed its heads, digest and index. From a
    /// scoped peer it is loaded and judged by content at once (placements first, then
    /// projects, so a new subproject and its documents pass in one batch); one whose place
    /// depends on a document not held yet waits for it (`waiting`). A document that fails
    /// is quarantined; the rest of the batch is stored.
    pub async fn import(
        &self,
        docs: Vec<DocSnapshot>,
        origin: Origin,
        scope: Option<DocId>,
    ) -> Result<usize, StoreError> {
        let fresh = self
            .blocking(move |s| s.import_blocking(docs, origin, scope))
            .await?;
        if fresh > 0 {
            self.wake_verifier();
        }
        Ok(fresh)
    }

    pub(super) fn import_blocking(
        &self,
        docs: Vec<DocSnapshot>,
        origin: Origin,
        scope: Option<DocId>,
    ) -> Result<usize, StoreError> {
        let writer = self.shared.writer;
        let tag = match origin {
            Origin::Peer(PeerTag(t)) => t as i64,
            _ => 0,
        };
        let mut merges = Vec::new();
        let mut fresh = 0;
        let mut checked = Vec::new();
        let mut waits = Vec::new();
        let mut announce = Vec::new();
        {
            let mut inner = self.lock();
            let mut scope = scope.map(|r| Scope::load(&inner.conn, r)).transpose()?;
            let Inner { conn, cache } = &mut *inner;
            let tx = begin(conn, Durability::Normal)?;
            let mut scoped_new = Vec::new();
            for snap in docs {
                let id = DocId(snap.id);
                if doc_row(&tx, &id)?.is_some() {
                    merges.push(snap);
                    continue;
                }
                if snap.bytes.len() > Limits::PEER.max_bytes {
                    quarantine(&tx, &id, "larger than the document limit", &[])?;
                    continue;
                }
                if scope.is_none() {
                    let Some(kind) = DocKind::parse(&snap.index.kind) else {
                        quarantine(&tx, &id, "unknown kind", &snap.bytes)?;
                        continue;
                    };
                    // Claimed heads and digest: replaced by the verifier's.
                    let digest = doc_digest(&id, &snap.heads);
                    let heads: Vec<u8> = snap.heads.iter().flatten().copied().collect();
                    tx.execute(
                        "INSERT INTO documents (id, kind, heads, digest, bucket, snapshot, unverified_from)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        params![&id.0[..], kind.as_str(), heads, &digest[..], id.bucket(), snap.bytes, tag],
                    )?;
                    fresh += 1;
                    continue;
                }
                match load_untrusted(&id, &snap.bytes) {
                    Ok(doc) => scoped_new.push((id, doc, snap.bytes)),
                    Err(e) => quarantine(&tx, &id, &e.to_string(), &snap.bytes)?,
                }
            }
            // A scoped peer's new documents, judged on content: placements, then projects,
            // then the rest, so each finds what decides its place already stored.
            let rank = |doc: &AutoCommit| match read_str(doc, "kind").as_deref() {
                Some(PLACEMENT_KIND) => 0,
                Some(k) if k == Kind::Project.as_str() => 1,
                _ => 2,
            };
            scoped_new.sort_by_key(|(_, doc, _)| rank(doc));
            if let Some(scope) = scope.as_mut() {
                for (id, mut doc, bytes) in scoped_new {
                    match judge_new(&tx, Some(scope), &id, &doc) {
                        Ok(Verdict::Store(kind)) => {
                            insert_new(&tx, writer, &id, kind.as_str(), &mut doc)?;
                            if kind == DocKind::Entity(Kind::Project) && !read_bool(&doc, "deleted")
                            {
                                scope.admit(id);
                            }
                            announce.push(id);
                            announce.extend(placed_project(kind.as_str(), &doc));
                            checked.push((id, doc));
                            fresh += 1;
                        }
                        Ok(Verdict::Wait(awaits)) => waits.push((id, awaits, bytes)),
                        Err(StoreError::OutOfScope { id }) => {
                            tracing::warn!(%id, "refused a document outside the peer's scope");
                        }
                        Err(e) if e.is_document_fault() => {
                            quarantine(&tx, &id, &e.to_string(), &bytes)?
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            tx.commit()?;
            for (id, doc) in checked {
                cache.put(id, Cached::inserted(doc));
            }
        }
        if let Some(root) = scope {
            for (id, awaits, bytes) in waits {
                self.wait(id, awaits, bytes, root, origin);
            }
        }
        for id in announce {
            self.announce(id, origin);
        }
        // Loaded once, after this batch's new documents: merges cannot change who is a
        // member (the guard refuses moving a project in or out of the scope).
        let scope = match scope {
            Some(root) if !merges.is_empty() => Some(Scope::load(&self.lock().conn, root)?),
            _ => None,
        };
        for snap in merges {
            let id = DocId(snap.id);
            let mut inner = self.lock();
            let result = inner.write(writer, Durability::Normal, &id, |tx, kind, doc| {
                guard_peer_change(tx, &id, kind, doc, scope.as_ref(), |doc| {
                    merge_untrusted(&id, doc, &snap.bytes)
                })
            });
            drop(inner);
            match result {
                Ok(Some((placed, true))) => {
                    self.announce(id, origin);
                    if let Some(project) = placed {
                        self.announce(project, origin);
                    }
                }
                Ok(_) => {}
                Err(e) if e.is_document_fault() => {
                    tracing::warn!(%id, error = %e, "refused a peer's snapshot of a document we hold");
                    let inner = self.lock();
                    quarantine(&inner.conn, &id, &e.to_string(), &snap.bytes)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(fresh)
    }

    /// Documents refused and kept aside since the store was created.
    pub fn quarantined_blocking(&self) -> Result<u64, StoreError> {
        let n: i64 = self
            .lock()
            .conn
            .query_row("SELECT count(*) FROM quarantine", [], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// Applies one Automerge sync message from a peer to document `id`, creating the
    /// document if this replica did not have it. Committed before this returns.
    pub async fn receive_sync(
        &self,
        id: DocId,
        state: sync::State,
        message: Vec<u8>,
        origin: Origin,
        scope: Option<DocId>,
    ) -> Result<sync::State, StoreError> {
        self.blocking(move |s| {
            let mut state = state;
            s.receive_sync_blocking(id, &mut state, &message, origin, scope)?;
            Ok(state)
        })
        .await
    }

    pub(super) fn receive_sync_blocking(
        &self,
        id: DocId,
        state: &mut sync::State,
        message: &[u8],
        origin: Origin,
        scope: Option<DocId>,
    ) -> Result<(), StoreError> {
        if message.len() > Limits::PEER.max_bytes {
            return Err(StoreError::PeerData {
                id,
                reason: "sync message larger than the document limit".into(),
            });
        }
        let msg =
            sync::Message::decode(message).map_err(|e| StoreError::SyncMessage(e.to_string()))?;
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let loaded = scope.map(|r| Scope::load(&inner.conn, r)).transpose()?;
        let result = inner.write(writer, Durability::Normal, &id, |tx, kind, doc| {
            guard_peer_change(tx, &id, kind, doc, loaded.as_ref(), |doc| {
                receive_untrusted(&id, doc, state, msg.clone())
            })
        })?;
        let announce: Vec<DocId> = match result {
            Some((placed, true)) => std::iter::once(id).chain(placed).collect(),
            Some((_, false)) => Vec::new(),
            None => {
                // A document this replica has never seen.
                let mut doc = AutoCommit::new();
                receive_untrusted(&id, &mut doc, state, msg)?;
                if doc.get_heads().is_empty() {
                    return Ok(());
                }
                match self.store_new(&mut inner, id, doc, loaded.as_ref())? {
                    NewDoc::Stored(ids) => ids,
                    NewDoc::Waits(awaiting, mut doc) => {
                        drop(inner);
                        if let Some(root) = scope {
                            self.wait(id, awaiting, doc.save(), root, origin);
                        }
                        return Err(StoreError::Waiting { id, awaiting });
                    }
                }
            }
        };
        drop(inner);
        for id in announce {
            self.announce(id, origin);
        }
        Ok(())
    }

    /// Stores document `id`, which a peer sent and this replica did not hold, if
    /// `judge_new` lets it; if another process stored it meanwhile, merges it through the
    /// guard instead. Returns the ids to announce (a placement's project with it), or
    /// the document the new one waits for.
    pub(super) fn store_new(
        &self,
        inner: &mut Inner,
        id: DocId,
        mut doc: AutoCommit,
        scope: Option<&Scope>,
    ) -> Result<NewDoc, StoreError> {
        let writer = self.shared.writer;
        {
            let Inner { conn, cache } = &mut *inner;
            let tx = begin(conn, Durability::Normal)?;
            if doc_row(&tx, &id)?.is_none() {
                let kind = match judge_new(&tx, scope, &id, &doc)? {
                    Verdict::Store(kind) => kind,
                    Verdict::Wait(awaiting) => return Ok(NewDoc::Waits(awaiting, Box::new(doc))),
                };
                insert_new(&tx, writer, &id, kind.as_str(), &mut doc)?;
                tx.commit()?;
                let announce = std::iter::once(id)
                    .chain(placed_project(kind.as_str(), &doc))
                    .collect();
                cache.put(id, Cached::inserted(doc));
                return Ok(NewDoc::Stored(announce));
            }
        }
        let bytes = doc.save();
        let result = inner.write(writer, Durability::Normal, &id, |tx, kind, d| {
            guard_peer_change(tx, &id, kind, d, scope, |d| merge_untrusted(&id, d, &bytes))
        })?;
        Ok(NewDoc::Stored(match result {
            Some((placed, true)) => std::iter::once(id).chain(placed).collect(),
            _ => Vec::new(),
        }))
    }

    /// Generates the next Automerge sync message for document `id` and one peer, if any.
    pub async fn generate_sync(
        &self,
        id: DocId,
        state: sync::State,
    ) -> Result<(sync::State, Option<Vec<u8>>), StoreError> {
        self.blocking(move |s| {
            let mut state = state;
            let msg = s.generate_sync_blocking(id, &mut state)?;
            Ok((state, msg))
        })
        .await
    }

    pub(super) fn generate_sync_blocking(
        &self,
        id: DocId,
        state: &mut sync::State,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        // A document not yet verified is answered as if absent: nothing of it is forwarded.
        match doc_row(conn, &id)?.filter(|r| r.verified) {
            Some(row) => {
                // Owned while Automerge answers from a peer's sync state (its bloom
                // filters came from the peer): a panic drops the copy, not the cache.
                let mut entry = take_cached(conn, cache, &id, &row)?;
                let msg = no_panic(&id, || {
                    Ok(entry
                        .doc
                        .sync()
                        .generate_sync_message(state)
                        .map(|m| m.encode()))
                })?;
                cache.put(id, entry);
                Ok(msg)
            }
            None => Ok(AutoCommit::new()
                .sync()
                .generate_sync_message(state)
                .map(|m| m.encode())),
        }
    }

    /// The stored heads of a document (empty if absent); loads nothing.
    pub fn heads_blocking(&self, id: DocId) -> Result<Vec<[u8; 32]>, StoreError> {
        let inner = self.lock();
        let heads: Option<Vec<u8>> = inner
            .conn
            .query_row(
                "SELECT heads FROM documents WHERE id = ?1",
                [&id.0[..]],
                |r| r.get(0),
            )
            .optional()?;
        Ok(heads.map(|h| heads_from_bytes(&h)).unwrap_or_default())
    }

    /// Number of documents, tombstones and documents awaiting verification included.
    pub fn count_blocking(&self) -> Result<u64, StoreError> {
        let inner = self.lock();
        let n: i64 = inner
            .conn
            .query_row("SELECT count(*) FROM documents", [], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// Checkpoints the WAL into the database file (at shutdown).
    pub fn checkpoint_blocking(&self) -> Result<(), StoreError> {
        let inner = self.lock();
        inner
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// Keeps a refused document's bytes aside, for the owner to inspect; never forwarded.
pub(super) fn quarantine(
    conn: &Connection,
    id: &DocId,
    reason: &str,
    bytes: &[u8],
) -> Result<(), StoreError> {
    tracing::warn!(%id, reason, "quarantined a document from a peer");
    // A peer that keeps offering the same bad document (every reconnect) adds one row.
    conn.execute(
        "INSERT INTO quarantine (doc_id, reason, bytes, received_at)
         SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (
           SELECT 1 FROM quarantine WHERE doc_id = ?1 AND reason = ?2 AND bytes = ?3)",
        params![&id.0[..], reason, bytes, now_ms()],
    )?;
    Ok(())
}
