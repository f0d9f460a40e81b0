//! Reading entities: get, resolve, list (filters, each kind's listed details, from the
//! derived rows only), full-text search, re-deriving the rows marked stale.

use super::*;

pub(super) fn listed_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Listed> {
    let kind: String = r.get(1)?;
    Ok(Listed {
        id: id_from_sql(r.get(0)?)?,
        kind: kind.parse().unwrap_or(Kind::Note),
        title: r.get(2)?,
        project: opt_id(r.get(3)?),
        status: r.get(4)?,
        due: r.get(5)?,
        parent: opt_id(r.get(6)?),
        deleted: r.get(7)?,
        updated_at: r.get(8)?,
        details: details_from_sql(r.get(9)?),
    })
}

/// The columns [`listed_from_row`] reads, in its order.
pub(super) const LISTED_COLUMNS: &str = "e.id, e.kind, e.title, e.project, e.status, e.due, \
     e.parent, e.deleted, e.updated_at, e.details";

/// Quotes every word of a user's query so FTS5 syntax in it is taken literally.
pub(super) fn fts_query(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// An entity with the heads of the version it was read at: what a client computes a
/// text patch against ([`DocumentStore::update_text_at`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<E> {
    /// The entity.
    pub record: Record<E>,
    /// The document's heads at that version, as hex change hashes.
    pub heads: Vec<String>,
}

impl DocumentStore {
    /// Reads an entity together with the heads of the version read (one lock, so the
    /// heads and the content always match).
    pub async fn get_versioned<E: Entity>(&self, id: DocId) -> Result<Versioned<E>, StoreError> {
        self.blocking(move |s| s.get_versioned_blocking(id)).await
    }

    /// [`Self::get_versioned`] for synchronous callers.
    pub fn get_versioned_blocking<E: Entity>(&self, id: DocId) -> Result<Versioned<E>, StoreError> {
        self.read_entity::<E, _>(id, |doc, placed| Versioned {
            record: record_of(id, doc, placed),
            heads: doc.get_heads().iter().map(|h| h.to_string()).collect(),
        })
    }

    /// Reads an entity.
    pub async fn get<E: Entity>(&self, id: DocId) -> Result<Record<E>, StoreError> {
        self.blocking(move |s| s.get_blocking(id)).await
    }

    /// [`Self::get`] for synchronous callers.
    pub fn get_blocking<E: Entity>(&self, id: DocId) -> Result<Record<E>, StoreError> {
        self.read_entity::<E, _>(id, |doc, placed| record_of(id, doc, placed))
    }

    /// Reads entity `id` of kind `E` through `read`, which also gets the parent that a
    /// project's placement names, if this replica holds one. A document still waiting
    /// for verification is verified first (with any others waiting); a verified one
    /// costs nothing extra.
    fn read_entity<E: Entity, T>(
        &self,
        id: DocId,
        read: impl FnOnce(&mut AutoCommit, Option<Option<DocId>>) -> T,
    ) -> Result<T, StoreError> {
        let not_found = || StoreError::NotFound {
            kind: E::KIND.as_str(),
            id: id.to_string(),
        };
        let verified = doc_row(&self.lock().conn, &id)?
            .ok_or_else(not_found)?
            .verified;
        if !verified {
            self.verify_all_pending_blocking()?;
        }
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        // Quarantined meanwhile, or still waiting: not there as far as readers go.
        let row = doc_row(conn, &id)?
            .filter(|r| r.verified)
            .ok_or_else(not_found)?;
        if row.kind != E::KIND.as_str() {
            return Err(StoreError::WrongKind {
                id,
                expected: E::KIND,
                found: row.kind,
            });
        }
        let placed = match E::KIND {
            Kind::Project => placed_parent(conn, &id)?,
            _ => None,
        };
        let entry = cached(conn, cache, &id, &row)?;
        Ok(read(&mut entry.doc, placed))
    }

    /// Finds the one entity of `kind` whose hex id starts with `prefix` (at least 4 digits).
    pub fn resolve_blocking(&self, kind: Kind, prefix: &str) -> Result<DocId, StoreError> {
        // Documents received whole are shown once verified; finish that first.
        self.verify_all_pending_blocking()?;
        let prefix = prefix.to_ascii_lowercase();
        if prefix.len() < 4 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::invalid(
                "id",
                format!("{prefix:?}: give at least 4 hex digits"),
            ));
        }
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached(
            "SELECT id FROM entities WHERE kind = ?1 AND lower(hex(id)) LIKE ?2 || '%' LIMIT 2",
        )?;
        let ids: Vec<DocId> = stmt
            .query_map(params![kind.as_str(), prefix], |r| id_from_sql(r.get(0)?))?
            .collect::<Result<_, _>>()?;
        match ids.as_slice() {
            [one] => Ok(*one),
            [] => Err(StoreError::NotFound {
                kind: kind.as_str(),
                id: prefix,
            }),
            _ => Err(StoreError::Ambiguous(prefix)),
        }
    }

    /// The kind of each stored, verified entity among `ids` and whether it is deleted, in
    /// the order given; an id without an entity (a document received whole and not yet
    /// verified, or a project's placement) is left out. Reads no document content.
    pub fn kinds_blocking(&self, ids: &[DocId]) -> Result<Vec<(DocId, Kind, bool)>, StoreError> {
        let inner = self.lock();
        let mut stmt = inner
            .conn
            .prepare_cached("SELECT kind, deleted FROM entities WHERE id = ?1")?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let row: Option<(String, bool)> = stmt
                .query_row([&id.0[..]], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((kind, deleted)) = row {
                if let Ok(kind) = kind.parse() {
                    out.push((*id, kind, deleted));
                }
            }
        }
        Ok(out)
    }

    /// Lists entities from the derived table, newest first.
    pub async fn list(&self, filter: Filter) -> Result<Page<Listed>, StoreError> {
        self.blocking(move |s| s.list_blocking(&filter)).await
    }

    /// [`Self::list`] for synchronous callers.
    pub fn list_blocking(&self, f: &Filter) -> Result<Page<Listed>, StoreError> {
        // Documents received whole are shown once verified; finish that first.
        self.verify_all_pending_blocking()?;
        let inner = self.lock();
        // A tag is looked up in the row's listed details: no document is loaded.
        let where_sql = "WHERE e.kind = ?1 AND (?2 OR e.deleted = 0)
            AND (?3 IS NULL OR e.project = ?3) AND (?4 IS NULL OR e.status = ?4)
            AND (?5 IS NULL OR e.parent = ?5)
            AND (?6 IS NULL OR EXISTS (
                SELECT 1 FROM json_each(e.details, '$.tags') t WHERE t.value = ?6))";
        let args = params![
            f.kind.as_str(),
            f.include_deleted,
            f.project.map(|p| p.to_string()),
            f.status,
            f.parent.map(|p| p.to_string()),
            f.tag,
        ];
        let total: i64 = inner.conn.query_row(
            &format!("SELECT count(*) FROM entities e {where_sql}"),
            args,
            |r| r.get(0),
        )?;
        let mut stmt = inner.conn.prepare_cached(&format!(
            "SELECT {LISTED_COLUMNS} FROM entities e {where_sql}
             ORDER BY e.updated_at DESC, e.id LIMIT ?7 OFFSET ?8"
        ))?;
        let data = stmt
            .query_map(
                params![
                    f.kind.as_str(),
                    f.include_deleted,
                    f.project.map(|p| p.to_string()),
                    f.status,
                    f.parent.map(|p| p.to_string()),
                    f.tag,
                    f.limit,
                    f.offset,
                ],
                listed_from_row,
            )?
            .collect::<Result<_, _>>()?;
        Ok(Page {
            data,
            total: total as u64,
            limit: f.limit,
            offset: f.offset,
        })
    }

    /// Full-text search over titles and bodies, best match first.
    pub async fn search(
        &self,
        query: String,
        kind: Option<Kind>,
        limit: u32,
    ) -> Result<Vec<SearchHit>, StoreError> {
        self.blocking(move |s| s.search_blocking(&query, kind, limit))
            .await
    }

    /// [`Self::search`] for synchronous callers.
    pub fn search_blocking(
        &self,
        query: &str,
        kind: Option<Kind>,
        limit: u32,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let Some(q) = fts_query(query) else {
            return Ok(Vec::new());
        };
        // Documents received whole are searchable once verified; finish that first (and
        // index rows an older version left pending).
        self.verify_all_pending_blocking()?;
        while self.index_pending_blocking(512)? > 0 {}
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached(&format!(
            "SELECT {LISTED_COLUMNS}, snippet(search, -1, '[', ']', '…', 12)
             FROM search JOIN entities e ON e.rowid = search.rowid
             WHERE search MATCH ?1 AND (?2 IS NULL OR e.kind = ?2) AND e.deleted = 0
             ORDER BY rank LIMIT ?3"
        ))?;
        let hits = stmt
            .query_map(params![q, kind.map(|k| k.as_str()), limit], |r| {
                Ok(SearchHit {
                    entity: listed_from_row(r)?,
                    snippet: r.get(10)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(hits)
    }

    /// Re-derives from their documents up to `limit` rows marked stale (`indexed = 0`:
    /// rows a migration marked, or an older build left without a search row): the
    /// derived row and the search row. Returns how many rows it looked at. A document
    /// that cannot be loaded keeps the row it has (logged), so no pass stops on it.
    pub fn index_pending_blocking(&self, limit: u32) -> Result<usize, StoreError> {
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        let tx = begin(conn, Durability::Normal)?;
        let ids: Vec<DocId> = {
            let mut stmt =
                tx.prepare_cached("SELECT id FROM entities WHERE indexed = 0 LIMIT ?1")?;
            let ids = stmt
                .query_map([limit], |r| id_from_sql(r.get(0)?))?
                .collect::<Result<_, _>>()?;
            ids
        };
        for id in &ids {
            if let Some(row) = doc_row(&tx, id)? {
                match cache.peek(id) {
                    Some(c) if c.version == row.version => index_doc(&tx, id, &row.kind, &c.doc)?,
                    // Load without caching: a bulk pass must not evict hot documents.
                    _ => match load_fresh(&tx, id, &row) {
                        Ok(loaded) => index_doc(&tx, id, &row.kind, &loaded.doc)?,
                        Err(e) if e.is_document_fault() => {
                            tracing::warn!(%id, error = %e, "cannot load a document to re-derive its row");
                        }
                        Err(e) => return Err(e),
                    },
                }
            }
            // Looked at: a row that cannot be re-derived keeps what it has, and no later
            // pass stops on it.
            tx.execute("UPDATE entities SET indexed = 1 WHERE id = ?1", [&id.0[..]])?;
        }
        tx.commit()?;
        Ok(ids.len())
    }

    /// Re-derives every row marked stale, [`REDERIVE_BATCH`] documents per transaction
    /// (each loaded and dropped, never cached), so that listings, which never load a
    /// document, find every row complete: migration 5 marks the tasks, contacts and
    /// skills written before rows carried their listed details. Runs when the store
    /// opens; finds nothing to do once done. Returns how many rows it re-derived.
    pub(super) fn rederive_stale(&self) -> Result<usize, StoreError> {
        let started = std::time::Instant::now();
        let mut total = 0;
        loop {
            let n = self.index_pending_blocking(REDERIVE_BATCH)?;
            if n == 0 {
                break;
            }
            total += n;
        }
        if total > 0 {
            tracing::info!(
                documents = total,
                ms = started.elapsed().as_millis() as u64,
                "re-derived the listed rows of documents written by an older build"
            );
        }
        Ok(total)
    }
}

/// Documents re-derived per transaction by [`DocumentStore::rederive_stale`].
const REDERIVE_BATCH: u32 = 256;

/// The record a document holds; `placed` (a project's placement's parent) replaces the
/// parent its own document may still name.
pub(super) fn record_of<E: Entity>(
    id: DocId,
    doc: &AutoCommit,
    placed: Option<Option<DocId>>,
) -> Record<E> {
    let mut value = E::read(doc);
    if let Some(parent) = placed {
        value.set_placed_parent(parent);
    }
    Record {
        id,
        created_at: read_i64(doc, "created_at"),
        updated_at: read_i64(doc, "updated_at"),
        deleted: read_bool(doc, "deleted"),
        value,
    }
}
