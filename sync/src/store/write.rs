//! The write path: chunks, compaction, heads, digests and derived rows in one transaction.

use super::*;
use crate::entity::TextSplice;

pub(super) fn bucket_update(
    tx: &Transaction<'_>,
    bucket: u8,
    old: Option<&Digest>,
    new: &Digest,
) -> Result<(), StoreError> {
    let current: Option<(Vec<u8>, i64)> = tx
        .query_row(
            "SELECT digest, docs FROM buckets WHERE bucket = ?1",
            [bucket],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (mut digest, mut docs) = current
        .map(|(d, n)| (digest_from_sql(d), n))
        .unwrap_or((EMPTY, 0));
    match old {
        Some(old) => xor_into(&mut digest, old),
        None => docs += 1,
    }
    xor_into(&mut digest, new);
    tx.execute(
        "INSERT INTO buckets (bucket, digest, docs) VALUES (?1, ?2, ?3)
         ON CONFLICT(bucket) DO UPDATE SET digest = excluded.digest, docs = excluded.docs",
        params![bucket, &digest[..], docs],
    )?;
    Ok(())
}

pub(super) struct IndexRow<'a> {
    pub(super) kind: &'a str,
    pub(super) derived: &'a Derived,
    pub(super) deleted: bool,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
    /// `None`: the body is not known yet (document received whole, not loaded).
    pub(super) body: Option<&'a str>,
}

/// Writes the derived row (and search row) of document `id`. A project's row takes its
/// parent from its placement when this replica holds one; a placement's row moves its
/// project's row with it.
pub(super) fn write_index(
    tx: &Connection,
    id: &DocId,
    row: &IndexRow<'_>,
) -> Result<(), StoreError> {
    let d = row.derived;
    let placement = row.kind == PLACEMENT_KIND;
    let parent = if row.kind == Kind::Project.as_str() {
        placed_parent(tx, id)?.unwrap_or(d.parent)
    } else {
        d.parent
    };
    let rowid: i64 = tx.query_row(
        "INSERT INTO entities (id, kind, project, title, status, due, parent, deleted, created_at,
           updated_at, indexed, details)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT(id) DO UPDATE SET kind = excluded.kind, project = excluded.project,
           title = excluded.title, status = excluded.status, due = excluded.due,
           parent = excluded.parent, deleted = excluded.deleted, created_at = excluded.created_at,
           updated_at = excluded.updated_at, indexed = excluded.indexed, details = excluded.details
         RETURNING rowid",
        params![
            &id.0[..],
            row.kind,
            d.project.map(|p| p.to_string()),
            d.title,
            d.status,
            d.due,
            parent.map(|p| p.to_string()),
            row.deleted,
            row.created_at,
            row.updated_at,
            row.body.is_some(),
            details_to_sql(&d.details)?,
        ],
        |r| r.get(0),
    )?;
    tx.execute("DELETE FROM search WHERE rowid = ?1", [rowid])?;
    if !row.deleted && !placement {
        tx.execute(
            "INSERT INTO search (rowid, title, body) VALUES (?1, ?2, ?3)",
            params![rowid, d.title, row.body.unwrap_or("")],
        )?;
    }
    if let (true, Some(project)) = (placement, d.project) {
        tx.execute(
            "UPDATE entities SET parent = ?2 WHERE id = ?1 AND kind = 'project'",
            params![&project.0[..], parent.map(|p| p.to_string())],
        )?;
    }
    Ok(())
}

pub(super) fn index_doc(
    tx: &Connection,
    id: &DocId,
    kind: &str,
    doc: &AutoCommit,
) -> Result<(), StoreError> {
    let Some(k) = DocKind::parse(kind) else {
        return Ok(());
    };
    let derived = k.derive(doc);
    write_index(
        tx,
        id,
        &IndexRow {
            kind,
            derived: &derived,
            deleted: read_bool(doc, "deleted"),
            created_at: read_i64(doc, "created_at"),
            updated_at: read_i64(doc, "updated_at"),
            body: Some(&derived.body),
        },
    )
}

pub(super) fn log_change(tx: &Connection, id: &DocId, writer: i64) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO change_log (doc_id, writer) VALUES (?1, ?2)",
        params![&id.0[..], writer],
    )?;
    let seq = tx.last_insert_rowid();
    if seq % 1024 == 0 {
        tx.execute(
            "DELETE FROM change_log WHERE seq < ?1",
            [seq - CHANGE_LOG_KEEP],
        )?;
    }
    Ok(())
}

/// Inserts a brand-new document (created locally or first received from a peer).
pub(super) fn insert_new(
    tx: &Transaction<'_>,
    writer: i64,
    id: &DocId,
    kind: &str,
    doc: &mut AutoCommit,
) -> Result<(), StoreError> {
    let heads = doc.get_heads();
    let digest = doc_digest(id, &raw_heads(&heads));
    let snapshot = doc.save();
    tx.execute(
        "INSERT INTO documents (id, kind, heads, digest, bucket, snapshot) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![&id.0[..], kind, heads_to_bytes(&heads), &digest[..], id.bucket(), snapshot],
    )?;
    bucket_update(tx, id.bucket(), None, &digest)?;
    index_doc(tx, id, kind, doc)?;
    log_change(tx, id, writer)
}

/// One document's part of a write, done inside the caller's transaction: `f`'s value,
/// whether the document changed, and its cache entry, to put back only after the commit.
pub(super) struct Written<T> {
    pub(super) out: T,
    pub(super) changed: bool,
    pub(super) entry: Cached,
}

/// Runs `f` on the up-to-date document `id` inside the caller's transaction; if the
/// heads moved, appends the new changes as a chunk, updates heads, digests and derived
/// rows, maybe compacts. `None` when there is no such document. The caller commits, then
/// puts the entry back into the cache.
pub(super) fn write_in<T>(
    tx: &Transaction<'_>,
    cache: &mut LruCache<DocId, Cached>,
    writer: i64,
    id: &DocId,
    f: impl FnOnce(&Connection, &str, &mut AutoCommit) -> Result<T, StoreError>,
) -> Result<Option<Written<T>>, StoreError> {
    let Some(row) = doc_row(tx, id)? else {
        return Ok(None);
    };
    // Owned until the commit: an error (or a panic) on the way drops it, so a change
    // that a failed sync message half applied never stays in the cache.
    let mut entry = take_cached(tx, cache, id, &row)?;
    let before = entry.doc.get_heads();
    let out = f(tx, &row.kind, &mut entry.doc)?;
    entry.doc.commit();
    let after = entry.doc.get_heads();
    if before == after && row.verified {
        return Ok(Some(Written {
            out,
            changed: false,
            entry,
        }));
    }
    // A document received whole and not yet verified has now been loaded and merged:
    // its heads, digest and rows are recomputed below from content like any other.
    let chunk = (before != after).then(|| entry.doc.save_after(&before));
    let digest = doc_digest(id, &raw_heads(&after));
    let chunk_len = chunk.as_ref().map_or(0, |c| c.len() as i64);
    let compact = !row.verified
        || row.chunk_count + 1 >= COMPACT_CHUNKS
        || row.chunk_bytes + chunk_len > row.snapshot_len.max(4096);
    let mut gen = row.gen;
    let mut seq = 0;
    if compact {
        // The new snapshot is written in the same transaction that drops the chunks.
        let snapshot = entry.doc.save();
        tx.execute("DELETE FROM chunks WHERE doc_id = ?1", [&id.0[..]])?;
        gen += 1;
        tx.execute(
            "UPDATE documents SET heads = ?2, digest = ?3, snapshot = ?4, snapshot_gen = ?5,
               version = version + 1, chunk_count = 0, chunk_bytes = 0,
               unverified_from = NULL, kind = ?6 WHERE id = ?1",
            params![
                &id.0[..],
                heads_to_bytes(&after),
                &digest[..],
                snapshot,
                gen,
                row.kind,
            ],
        )?;
    } else if let Some(chunk) = &chunk {
        tx.execute(
            "INSERT INTO chunks (doc_id, data) VALUES (?1, ?2)",
            params![&id.0[..], chunk],
        )?;
        seq = tx.last_insert_rowid();
        tx.execute(
            "UPDATE documents SET heads = ?2, digest = ?3, version = version + 1,
               chunk_count = chunk_count + 1, chunk_bytes = chunk_bytes + ?4 WHERE id = ?1",
            params![&id.0[..], heads_to_bytes(&after), &digest[..], chunk_len],
        )?;
    }
    let old = row.verified.then_some(&row.digest);
    bucket_update(tx, id.bucket(), old, &digest)?;
    index_doc(tx, id, &row.kind, &entry.doc)?;
    log_change(tx, id, writer)?;
    entry.version = row.version + 1;
    entry.gen = gen;
    entry.last_chunk = if compact { 0 } else { seq };
    Ok(Some(Written {
        out,
        changed: true,
        entry,
    }))
}

impl Inner {
    /// The write path shared by local edits and peers' sync messages: [`write_in`] on
    /// document `id` in a transaction of its own. Returns `f`'s value and whether
    /// anything changed.
    pub(super) fn write<T>(
        &mut self,
        writer: i64,
        durability: Durability,
        id: &DocId,
        f: impl FnOnce(&Connection, &str, &mut AutoCommit) -> Result<T, StoreError>,
    ) -> Result<Option<(T, bool)>, StoreError> {
        let Inner { conn, cache } = self;
        let tx = begin(conn, durability)?;
        let Some(written) = write_in(&tx, cache, writer, id, f)? else {
            return Ok(None);
        };
        // Unchanged: nothing was written, and dropping the transaction ends it.
        if written.changed {
            tx.commit()?;
        }
        cache.put(*id, written.entry);
        Ok(Some((written.out, written.changed)))
    }
}

impl DocumentStore {
    /// Creates an entity and returns it as stored.
    pub async fn create<E: Entity>(&self, value: E) -> Result<Record<E>, StoreError> {
        self.blocking(move |s| s.create_blocking(value)).await
    }

    /// [`Self::create`] for synchronous callers (tests, tools without a runtime).
    pub fn create_blocking<E: Entity>(&self, value: E) -> Result<Record<E>, StoreError> {
        value.validate()?;
        let id = DocId::random();
        let now = now_ms();
        let mut doc = AutoCommit::new();
        write_header(&mut doc, E::KIND, now)?;
        value.write_new(&mut doc)?;
        doc.commit();
        let mut inner = self.lock();
        let writer = self.shared.writer;
        let derived = value.derive();
        let placement = {
            let Inner { conn, cache } = &mut *inner;
            let tx = begin(conn, Durability::Full)?;
            check_refs_conn(&tx, &id, E::KIND, &derived)?;
            insert_new(&tx, writer, &id, E::KIND.as_str(), &mut doc)?;
            // A project's parent goes to its placement, in the same transaction.
            let placement = match E::KIND {
                Kind::Project => place(&tx, cache, writer, &id, derived.parent)?,
                _ => None,
            };
            tx.commit()?;
            placement
        };
        inner.cache.put(id, Cached::inserted(doc));
        let placement = placement.map(|(pid, entry)| {
            inner.cache.put(pid, entry);
            pid
        });
        drop(inner);
        // The placement first: a scoped peer then rarely sees the project before it.
        if let Some(pid) = placement {
            self.announce(pid, Origin::Local);
        }
        self.announce(id, Origin::Local);
        Ok(Record {
            id,
            created_at: now,
            updated_at: now,
            deleted: false,
            value,
        })
    }

    /// Applies a typed patch; the result is validated before it is committed.
    pub async fn update<P: Patch>(
        &self,
        id: DocId,
        patch: P,
    ) -> Result<Record<P::Entity>, StoreError> {
        self.blocking(move |s| s.update_blocking(id, patch)).await
    }

    /// [`Self::update`] for synchronous callers.
    pub fn update_blocking<P: Patch>(
        &self,
        id: DocId,
        patch: P,
    ) -> Result<Record<P::Entity>, StoreError> {
        let kind = <P::Entity as Entity>::KIND;
        let mut patch = patch;
        let moved = patch.take_placement();
        let edits = patch.into_edits();
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        let tx = begin(conn, Durability::Full)?;
        let written = write_in(&tx, cache, writer, &id, |tx, stored, doc| {
            if stored != kind.as_str() {
                return Err(StoreError::WrongKind {
                    id,
                    expected: kind,
                    found: stored.to_string(),
                });
            }
            if read_bool(doc, "deleted") {
                return Err(StoreError::Deleted { kind, id });
            }
            for edit in &edits {
                apply_edit(doc, edit)?;
            }
            doc.put(ROOT, "updated_at", ScalarValue::Timestamp(now_ms()))?;
            let value = <P::Entity as Entity>::read(doc);
            value.validate()?;
            check_refs_conn(tx, &id, kind, &value.derive())?;
            Ok(())
        })?;
        let Some(written) = written else {
            return Err(StoreError::NotFound {
                kind: kind.as_str(),
                id: id.to_string(),
            });
        };
        // A move goes to the project's placement, in the same transaction.
        let placement = match moved {
            Some(parent) => place(&tx, cache, writer, &id, parent)?,
            None => None,
        };
        let changed = written.changed;
        if changed || placement.is_some() {
            tx.commit()?;
        } else {
            drop(tx);
        }
        cache.put(id, written.entry);
        let placement = placement.map(|(pid, entry)| {
            cache.put(pid, entry);
            pid
        });
        drop(inner);
        if let Some(pid) = placement {
            self.announce(pid, Origin::Local);
        }
        if changed {
            self.announce(id, Origin::Local);
        }
        self.get_blocking(id)
    }

    /// Deletes an entity: the document stays as a replicated tombstone. Idempotent.
    pub async fn delete(&self, kind: Kind, id: DocId) -> Result<(), StoreError> {
        self.blocking(move |s| s.delete_blocking(kind, id)).await
    }

    /// [`Self::delete`] for synchronous callers.
    pub fn delete_blocking(&self, kind: Kind, id: DocId) -> Result<(), StoreError> {
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let result = inner.write(writer, Durability::Full, &id, |_, stored, doc| {
            tombstone(id, kind, stored, doc)
        })?;
        drop(inner);
        match result {
            None => Err(StoreError::NotFound {
                kind: kind.as_str(),
                id: id.to_string(),
            }),
            Some((_, changed)) => {
                if changed {
                    self.announce(id, Origin::Local);
                }
                Ok(())
            }
        }
    }
}

/// Tombstones document `doc` of stored kind `stored`, which must be `kind`; a tombstone
/// stays as it is.
fn tombstone(id: DocId, kind: Kind, stored: &str, doc: &mut AutoCommit) -> Result<(), StoreError> {
    if stored != kind.as_str() {
        return Err(StoreError::WrongKind {
            id,
            expected: kind,
            found: stored.to_string(),
        });
    }
    if !read_bool(doc, "deleted") {
        doc.put(ROOT, "deleted", true)?;
        doc.put(ROOT, "updated_at", ScalarValue::Timestamp(now_ms()))?;
    }
    Ok(())
}

impl DocumentStore {
    /// Deletes task `id` and its subtasks, theirs too, in one transaction: no subtask is
    /// left naming a deleted parent. Idempotent (a deleted task's live subtasks still
    /// go). Returns how many tasks it tombstoned. Subtasks are found from the derived
    /// rows (`parent`), so only the tasks tombstoned are loaded.
    pub async fn delete_task_tree(&self, id: DocId) -> Result<usize, StoreError> {
        self.blocking(move |s| s.delete_task_tree_blocking(id))
            .await
    }

    /// [`Self::delete_task_tree`] for synchronous callers.
    pub fn delete_task_tree_blocking(&self, id: DocId) -> Result<usize, StoreError> {
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        let tx = begin(conn, Durability::Full)?;
        let mut todo = vec![id];
        let mut seen = HashSet::new();
        let mut written = Vec::new();
        while let Some(task) = todo.pop() {
            // Parents come from peers too: a loop among them must not spin.
            if !seen.insert(task) {
                continue;
            }
            let Some(w) = write_in(&tx, cache, writer, &task, |_, stored, doc| {
                tombstone(task, Kind::Task, stored, doc)
            })?
            else {
                return Err(StoreError::NotFound {
                    kind: Kind::Task.as_str(),
                    id: task.to_string(),
                });
            };
            written.push((task, w));
            let mut stmt = tx.prepare_cached(
                "SELECT id FROM entities WHERE kind = 'task' AND parent = ?1 AND deleted = 0",
            )?;
            let children = stmt
                .query_map([task.to_string()], |r| id_from_sql(r.get(0)?))?
                .collect::<Result<Vec<_>, _>>()?;
            todo.extend(children);
        }
        let changed: Vec<DocId> = written
            .iter()
            .filter(|(_, w)| w.changed)
            .map(|(id, _)| *id)
            .collect();
        if changed.is_empty() {
            // Nothing was written: dropping the transaction ends it.
            drop(tx);
        } else {
            tx.commit()?;
        }
        for (task, w) in written {
            cache.put(task, w.entry);
        }
        drop(inner);
        for task in &changed {
            self.announce(*task, Origin::Local);
        }
        Ok(changed.len())
    }
}

/// Most splices one text patch may carry.
pub(super) const MAX_SPLICES: usize = 1024;

/// The text fields of each kind: the ones a text patch may edit.
pub(super) fn text_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Project => &["instructions"],
        Kind::Note => &["title", "content"],
        Kind::Task => &["name", "notes"],
        Kind::Contact => &["notes"],
        Kind::Skill => &["description", "body"],
    }
}

/// Where UTF-16 position `pos16` of `text` falls in Automerge's unit `enc`.
fn utf16_to_units(
    text: &str,
    pos16: usize,
    enc: automerge::TextEncoding,
    field: &'static str,
) -> Result<usize, StoreError> {
    use automerge::TextEncoding as E;
    let (mut u16s, mut chars, mut bytes) = (0usize, 0usize, 0usize);
    for c in text.chars() {
        if u16s >= pos16 {
            break;
        }
        u16s += c.len_utf16();
        chars += 1;
        bytes += c.len_utf8();
    }
    if u16s != pos16 {
        let reason = if u16s < pos16 {
            format!("position {pos16} is past the end of the text ({u16s} UTF-16 code units)")
        } else {
            format!("position {pos16} falls inside a surrogate pair")
        };
        return Err(StoreError::invalid(field, reason));
    }
    match enc {
        E::UnicodeCodePoint => Ok(chars),
        E::Utf8CodeUnit => Ok(bytes),
        E::Utf16CodeUnit => Ok(u16s),
        _ => Err(StoreError::invalid(
            field,
            "this build counts text in grapheme clusters, which a UTF-16 splice cannot address",
        )),
    }
}

fn parse_heads(id: DocId, heads: &[String]) -> Result<Vec<ChangeHash>, StoreError> {
    heads
        .iter()
        .map(|h| {
            h.parse::<ChangeHash>()
                .map_err(|_| StoreError::invalid("heads", format!("{h:?} is not a change hash")))
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| {
            if v.is_empty() {
                Err(StoreError::invalid(
                    "heads",
                    format!("a patch of {id} names the heads it was computed against"),
                ))
            } else {
                Ok(v)
            }
        })
}

/// Applies `splices` (UTF-16 positions, each against the text the previous ones left) to
/// text field `key` of `fork`, which stands at the client's version.
fn splice_utf16(
    fork: &mut AutoCommit,
    key: &'static str,
    splices: &[TextSplice],
) -> Result<(), StoreError> {
    use automerge::{ObjType, ReadDoc, Value};
    let obj = match fork.get(ROOT, key)? {
        Some((Value::Object(ObjType::Text), obj)) => obj,
        _ => {
            return Err(StoreError::invalid(
                key,
                "the field was not a text at that version",
            ))
        }
    };
    let enc = fork.text_encoding();
    for sp in splices {
        let text = fork.text(&obj)?;
        let end16 = sp
            .pos
            .checked_add(sp.delete)
            .ok_or_else(|| StoreError::invalid(key, "splice position plus deletion overflows"))?;
        let start = utf16_to_units(&text, sp.pos, enc, key)?;
        let end = utf16_to_units(&text, end16, enc, key)?;
        let delete = isize::try_from(end - start)
            .map_err(|_| StoreError::invalid(key, "deletion too long"))?;
        fork.splice_text(&obj, start, delete, &sp.insert)?;
    }
    Ok(())
}

/// Validates the entity a document holds, whatever its kind, and returns its projection.
fn validate_any(kind: Kind, doc: &AutoCommit) -> Result<Derived, StoreError> {
    use crate::entity::{Contact, Note, Project, Skill, Task};
    fn check<E: Entity>(doc: &AutoCommit) -> Result<Derived, StoreError> {
        let v = E::read(doc);
        v.validate()?;
        Ok(v.derive())
    }
    match kind {
        Kind::Project => check::<Project>(doc),
        Kind::Note => check::<Note>(doc),
        Kind::Task => check::<Task>(doc),
        Kind::Contact => check::<Contact>(doc),
        Kind::Skill => check::<Skill>(doc),
    }
}

impl DocumentStore {
    /// Applies a text patch computed against an earlier version: `splices` (positions and
    /// lengths in UTF-16 code units, what browsers count; each against the text the
    /// previous ones left) are applied to field `field` of the document as it was at
    /// `heads` (hex change hashes), and the result is merged into the current document,
    /// so edits that landed since (a peer's, another tab's) never shift the patch to the
    /// wrong place. Returns the new heads.
    ///
    /// Heads this replica does not have are [`StoreError::UnknownHeads`]; a field that is
    /// not a text field of `kind`, or a position outside the text at that version or
    /// inside a surrogate pair, is [`StoreError::Invalid`]. The write goes through the
    /// one write path (durability, derived rows, feed).
    pub async fn update_text_at(
        &self,
        id: DocId,
        kind: Kind,
        field: String,
        heads: Vec<String>,
        splices: Vec<TextSplice>,
    ) -> Result<Vec<String>, StoreError> {
        self.blocking(move |s| s.update_text_at_blocking(id, kind, &field, &heads, &splices))
            .await
    }

    /// [`Self::update_text_at`] for synchronous callers.
    pub fn update_text_at_blocking(
        &self,
        id: DocId,
        kind: Kind,
        field: &str,
        heads: &[String],
        splices: &[TextSplice],
    ) -> Result<Vec<String>, StoreError> {
        let Some(key) = text_fields(kind).iter().copied().find(|f| *f == field) else {
            return Err(StoreError::invalid(
                "field",
                format!(
                    "{field:?} is not a text field of a {kind} (text fields: {})",
                    text_fields(kind).join(", ")
                ),
            ));
        };
        if splices.len() > MAX_SPLICES {
            return Err(StoreError::invalid(
                "splices",
                format!("at most {MAX_SPLICES} splices per patch"),
            ));
        }
        let wanted = parse_heads(id, heads)?;
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let result = inner.write(writer, Durability::Full, &id, |tx, stored, doc| {
            if stored != kind.as_str() {
                return Err(StoreError::WrongKind {
                    id,
                    expected: kind,
                    found: stored.to_string(),
                });
            }
            if read_bool(doc, "deleted") {
                return Err(StoreError::Deleted { kind, id });
            }
            let mut current = doc.get_heads();
            current.sort();
            let mut asked = wanted.clone();
            asked.sort();
            if current == asked {
                // Computed against the latest version: splice in place (no new actor).
                splice_utf16(doc, key, splices)?;
            } else {
                let mut fork = doc.fork_at(&wanted).map_err(|_| StoreError::UnknownHeads {
                    id,
                    heads: heads.join(","),
                })?;
                // The fork carries a fresh actor (the document's own may have changes
                // past `heads`); its change is merged like a peer's.
                splice_utf16(&mut fork, key, splices)?;
                fork.commit();
                doc.merge(&mut fork)?;
            }
            doc.put(ROOT, "updated_at", ScalarValue::Timestamp(now_ms()))?;
            let derived = validate_any(kind, doc)?;
            check_refs_conn(tx, &id, kind, &derived)?;
            doc.commit();
            Ok(doc.get_heads())
        })?;
        drop(inner);
        let Some((after, changed)) = result else {
            return Err(StoreError::NotFound {
                kind: kind.as_str(),
                id: id.to_string(),
            });
        };
        if changed {
            self.announce(id, Origin::Local);
        }
        Ok(after.iter().map(|h| h.to_string()).collect())
    }
}
