//! Schema: the numbered migrations, how connections are opened, and the SQL row conversions.

use super::*;

pub(super) const MIGRATIONS: &[&str] = &[
    // 1: documents, chunks, bucket digests, derived entities, search, change log.
    "CREATE TABLE documents (
        id BLOB PRIMARY KEY NOT NULL,
        kind TEXT NOT NULL,
        heads BLOB NOT NULL,
        digest BLOB NOT NULL,
        bucket INTEGER NOT NULL,
        snapshot BLOB NOT NULL,
        snapshot_gen INTEGER NOT NULL DEFAULT 0,
        version INTEGER NOT NULL DEFAULT 1,
        chunk_count INTEGER NOT NULL DEFAULT 0,
        chunk_bytes INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX documents_bucket ON documents(bucket, id);
    CREATE TABLE chunks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        doc_id BLOB NOT NULL REFERENCES documents(id),
        data BLOB NOT NULL
    );
    CREATE INDEX chunks_doc ON chunks(doc_id, seq);
    CREATE TABLE buckets (
        bucket INTEGER PRIMARY KEY,
        digest BLOB NOT NULL,
        docs INTEGER NOT NULL
    );
    CREATE TABLE entities (
        rowid INTEGER PRIMARY KEY,
        id BLOB NOT NULL UNIQUE REFERENCES documents(id),
        kind TEXT NOT NULL,
        project TEXT,
        title TEXT NOT NULL,
        status TEXT,
        due TEXT,
        parent TEXT,
        deleted INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        indexed INTEGER NOT NULL
    );
    CREATE INDEX entities_list ON entities(kind, deleted, updated_at);
    CREATE INDEX entities_project ON entities(project);
    CREATE INDEX entities_parent ON entities(parent);
    CREATE INDEX entities_pending ON entities(indexed) WHERE indexed = 0;
    CREATE VIRTUAL TABLE search USING fts5(title, body, tokenize = 'unicode61 remove_diacritics 2');
    CREATE TABLE change_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        doc_id BLOB NOT NULL,
        writer INTEGER NOT NULL
    );",
    // 2: documents received whole wait for verification (`unverified_from` holds the
    // receiving session's peer tag); documents that fail it are kept aside in quarantine.
    "ALTER TABLE documents ADD COLUMN unverified_from INTEGER;
    CREATE INDEX documents_unverified ON documents(unverified_from)
        WHERE unverified_from IS NOT NULL;
    CREATE TABLE quarantine (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        doc_id BLOB NOT NULL,
        reason TEXT NOT NULL,
        bytes BLOB NOT NULL,
        received_at INTEGER NOT NULL
    );",
    // 3: per document, this replica's digest when the upstream it follows (a node's hub)
    // was last known to hold all of it; see `upstream`.
    "CREATE TABLE upstream (
        doc_id BLOB PRIMARY KEY NOT NULL,
        digest BLOB NOT NULL
    ) WITHOUT ROWID;",
    // 4: the root digest at which every verified document was last recorded in
    // `upstream`: an unchanged reconnect then skips the scan of every document.
    "CREATE TABLE upstream_root (
        one INTEGER PRIMARY KEY CHECK (one = 0),
        root BLOB NOT NULL
    );",
    // 5: what a listing shows of a task, contact or skill besides its title (`Details`,
    // JSON). The rows written before it are marked for re-deriving from their documents
    // (`indexed = 0`), which the store does when it opens (`rederive_stale`), in batches.
    "ALTER TABLE entities ADD COLUMN details TEXT;
    UPDATE entities SET indexed = 0 WHERE kind IN ('task', 'contact', 'skill');",
];

/// How hard a commit must reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Durability {
    /// `synchronous=FULL`: survives power loss. For local edits, which exist nowhere else.
    Full,
    /// `synchronous=NORMAL` (WAL): survives a crash of the process, maybe not of the
    /// machine. For changes from peers and derived data: a lost tail is re-sent by the
    /// peer, because summaries are computed from what is on disk.
    Normal,
}

pub(super) fn begin(
    conn: &mut Connection,
    durability: Durability,
) -> Result<Transaction<'_>, StoreError> {
    let mode = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", mode)?;
    Ok(conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
}

pub(super) fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: a change acknowledged to a peer or reported to a user survives power loss.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::SchemaTooNew {
            found: version,
            known,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}

pub(super) fn heads_to_bytes(heads: &[ChangeHash]) -> Vec<u8> {
    heads.iter().flat_map(|h| h.0).collect()
}

pub(super) fn heads_from_bytes(bytes: &[u8]) -> Vec<[u8; 32]> {
    bytes
        .chunks_exact(32)
        .map(|c| {
            let mut h = [0u8; 32];
            h.copy_from_slice(c);
            h
        })
        .collect()
}

pub(super) fn raw_heads(heads: &[ChangeHash]) -> Vec<[u8; 32]> {
    heads.iter().map(|h| h.0).collect()
}

pub(super) fn id_from_sql(bytes: Vec<u8>) -> rusqlite::Result<DocId> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            "document id is not 16 bytes".into(),
        )
    })?;
    Ok(DocId(arr))
}

pub(super) fn opt_id(s: Option<String>) -> Option<DocId> {
    s.and_then(|s| s.parse().ok())
}

/// The `details` column of derived row `d`: `NULL` for kinds that list nothing more.
pub(super) fn details_to_sql(d: &Details) -> Result<Option<String>, StoreError> {
    match d {
        Details::None => Ok(None),
        d => serde_json::to_string(d)
            .map(Some)
            .map_err(|e| StoreError::Task(format!("cannot encode listed details: {e}"))),
    }
}

/// The listed details of a row; a column this build cannot read lists nothing more
/// (derived data: the next write of the document writes it again).
pub(super) fn details_from_sql(json: Option<String>) -> Details {
    json.and_then(|j| serde_json::from_str(&j).ok())
        .unwrap_or_default()
}

pub(super) fn digest_from_sql(bytes: Vec<u8>) -> Digest {
    let mut d = EMPTY;
    if bytes.len() == 16 {
        d.copy_from_slice(&bytes);
    }
    d
}
