//! The cache of loaded documents and how a cached copy is brought up to the stored version.

use super::*;

pub(super) struct Cached {
    pub(super) doc: AutoCommit,
    pub(super) version: i64,
    pub(super) gen: i64,
    pub(super) last_chunk: i64,
}

impl Cached {
    /// A document just inserted (version 1, no chunks).
    pub(super) fn inserted(doc: AutoCommit) -> Self {
        Self {
            doc,
            version: 1,
            gen: 0,
            last_chunk: 0,
        }
    }
}

/// The row of `documents` that the cache is checked against.
pub(super) struct DocRow {
    pub(super) kind: String,
    pub(super) digest: Digest,
    pub(super) version: i64,
    pub(super) gen: i64,
    pub(super) chunk_count: i64,
    pub(super) chunk_bytes: i64,
    pub(super) snapshot_len: i64,
    /// `false` while a document received whole waits for verification: its heads and
    /// digest are the sender's claims and it is in no bucket digest, index or listing.
    pub(super) verified: bool,
}

pub(super) fn doc_row(tx: &Connection, id: &DocId) -> Result<Option<DocRow>, StoreError> {
    Ok(tx
        .query_row(
            "SELECT kind, digest, version, snapshot_gen, chunk_count, chunk_bytes, length(snapshot),
                    unverified_from IS NULL
             FROM documents WHERE id = ?1",
            [&id.0[..]],
            |r| {
                Ok(DocRow {
                    kind: r.get(0)?,
                    digest: digest_from_sql(r.get(1)?),
                    version: r.get(2)?,
                    gen: r.get(3)?,
                    chunk_count: r.get(4)?,
                    chunk_bytes: r.get(5)?,
                    snapshot_len: r.get(6)?,
                    verified: r.get(7)?,
                })
            },
        )
        .optional()?)
}

pub(super) fn load_chunks(
    conn: &Connection,
    id: &DocId,
    after: i64,
    doc: &mut AutoCommit,
) -> Result<i64, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, data FROM chunks WHERE doc_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![&id.0[..], after])?;
    let mut last = after;
    while let Some(row) = rows.next()? {
        last = row.get(0)?;
        let data: Vec<u8> = row.get(1)?;
        doc.load_incremental(&data)
            .map_err(|e| StoreError::Corrupt {
                id: *id,
                reason: e.to_string(),
            })?;
    }
    Ok(last)
}

pub(super) fn load_fresh(
    conn: &Connection,
    id: &DocId,
    row: &DocRow,
) -> Result<Cached, StoreError> {
    let snapshot: Vec<u8> = conn.query_row(
        "SELECT snapshot FROM documents WHERE id = ?1",
        [&id.0[..]],
        |r| r.get(0),
    )?;
    let mut doc = if row.verified {
        AutoCommit::load(&snapshot).map_err(|e| StoreError::Corrupt {
            id: *id,
            reason: e.to_string(),
        })?
    } else {
        // Still the sender's bytes: load them as a peer's.
        load_untrusted(id, &snapshot)?
    };
    let last_chunk = load_chunks(conn, id, 0, &mut doc)?;
    Ok(Cached {
        doc,
        version: row.version,
        gen: row.gen,
        last_chunk,
    })
}

/// Brings the cached copy of `id` up to the stored version, loading it if needed.
pub(super) fn cached<'a>(
    conn: &Connection,
    cache: &'a mut LruCache<DocId, Cached>,
    id: &DocId,
    row: &DocRow,
) -> Result<&'a mut Cached, StoreError> {
    let stale = match cache.get(id) {
        Some(c) if c.version == row.version => false,
        Some(c) if c.gen == row.gen => {
            // Another process appended chunks: replay just those.
            let c = cache
                .get_mut(id)
                .ok_or_else(|| StoreError::Task("cache race".into()))?;
            c.last_chunk = load_chunks(conn, id, c.last_chunk, &mut c.doc)?;
            c.version = row.version;
            false
        }
        _ => true,
    };
    if stale {
        let fresh = load_fresh(conn, id, row)?;
        cache.put(*id, fresh);
    }
    cache
        .get_mut(id)
        .ok_or_else(|| StoreError::Task("cache race".into()))
}

/// Takes the up-to-date copy of `id` out of the cache, loading it if needed, for a write.
///
/// The caller puts it back only after its transaction committed: an error or a panic in
/// between drops the copy, so no later chunk is ever computed on top of changes that
/// were never persisted.
pub(super) fn take_cached(
    conn: &Connection,
    cache: &mut LruCache<DocId, Cached>,
    id: &DocId,
    row: &DocRow,
) -> Result<Cached, StoreError> {
    match cache.pop(id) {
        Some(c) if c.version == row.version => Ok(c),
        Some(mut c) if c.gen == row.gen => {
            c.last_chunk = load_chunks(conn, id, c.last_chunk, &mut c.doc)?;
            c.version = row.version;
            Ok(c)
        }
        _ => load_fresh(conn, id, row),
    }
}
