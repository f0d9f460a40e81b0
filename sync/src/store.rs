//! [`DocumentStore`]: the one write API for every writer, on SQLite.
//!
//! Owns the database file. Each document is stored as a compacted snapshot plus
//! appended incremental chunks (`documents`, `chunks`); its heads, heads digest and the
//! XOR digest of its bucket are updated in the same transaction as the chunk, and so are
//! the derived `entities` row and the FTS5 `search` row. Every committed change is then
//! announced on a broadcast feed ([`DocChange`]).
//!
//! Several processes may write one database (the node daemon and `hearth note edit`):
//! every write runs in `BEGIN IMMEDIATE`, each document row carries a version that the
//! in-memory cache is checked against, and an optional watcher thread turns other
//! processes' commits (`change_log`) into feed events. Writers wake it with a datagram to
//! a loopback port it publishes beside the database (`hearth.db.notify`), with a slow
//! poll as fallback, so no process busy-polls.
//!
//! Local edits commit with `synchronous=FULL` (they exist nowhere else); changes from
//! peers and derived data with `NORMAL` (a lost tail after a power cut is re-sent by the
//! peer, because summaries are computed from what is on disk).
//!
//! This module never does network I/O and never holds its mutex across an `.await`:
//! async methods run their SQLite work on tokio's blocking pool.

use std::{
    collections::HashSet,
    num::NonZeroUsize,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, MutexGuard,
    },
    thread::JoinHandle,
    time::Duration,
};

use automerge::transaction::Transactable;
use automerge::{
    sync::{self, SyncDoc},
    AutoCommit, ChangeHash, ScalarValue, ROOT,
};
use hearth_protocol::{Digest, DocEntry, DocIndex, DocSnapshot};
use lru::LruCache;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use tokio::sync::broadcast;

use crate::{
    entity::{
        apply_edit, derive_any, now_ms, read_bool, read_i64, read_str, write_header, Derived,
        DocId, Entity, Kind, Patch, Record,
    },
    error::StoreError,
    summary::{doc_digest, root_digest, xor_into, BUCKETS, EMPTY},
};

/// Documents kept loaded in memory; the rest stay on disk.
const CACHE_DOCS: usize = 256;
/// Compact a document once it has this many incremental chunks.
const COMPACT_CHUNKS: i64 = 64;
/// How often the watcher looks for other processes' commits.
/// How often the watcher looks for other processes' commits when no wake-up datagram
/// arrives (writers send one to the watcher's loopback port after each commit).
const WATCH_FALLBACK: Duration = Duration::from_millis(250);
/// Change-log rows kept for the watchers of other processes.
const CHANGE_LOG_KEEP: i64 = 100_000;
/// Capacity of the change feed; a slower subscriber sees `Lagged` and must resummarise.
const FEED_CAPACITY: usize = 16_384;

/// Identifies one replication peer within this process, so its own changes are not
/// echoed back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerTag(pub u64);

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This process, through the store API.
    Local,
    /// A replication peer.
    Peer(PeerTag),
    /// Another process writing the same database.
    External,
}

/// A committed change to one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocChange {
    /// The document.
    pub id: DocId,
    /// Who changed it.
    pub origin: Origin,
}

/// The replica's set digest: one digest per bucket, their root, the document count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// 256 bucket digests.
    pub buckets: Vec<Digest>,
    /// Digest over the buckets.
    pub root: Digest,
    /// Number of documents, tombstones included.
    pub docs: u64,
}

/// Which entities to list.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Kind of entity.
    pub kind: Kind,
    /// Only this project.
    pub project: Option<DocId>,
    /// Only this task status.
    pub status: Option<String>,
    /// Only children of this parent.
    pub parent: Option<DocId>,
    /// Include tombstones.
    pub include_deleted: bool,
    /// Page size.
    pub limit: u32,
    /// Rows to skip.
    pub offset: u32,
}

impl Filter {
    /// Every live entity of a kind, first page of 100.
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            project: None,
            status: None,
            parent: None,
            include_deleted: false,
            limit: 100,
            offset: 0,
        }
    }
}

/// A listed entity: the derived row, no document load.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Document id.
    pub id: DocId,
    /// Kind.
    pub kind: Kind,
    /// Title or name.
    pub title: String,
    /// Project.
    pub project: Option<DocId>,
    /// Task status.
    pub status: Option<String>,
    /// Due date.
    pub due: Option<String>,
    /// Parent.
    pub parent: Option<DocId>,
    /// Tombstone.
    pub deleted: bool,
    /// Last update, ms.
    pub updated_at: i64,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// Rows.
    pub data: Vec<T>,
    /// Rows matching in total.
    pub total: u64,
    /// Page size asked for.
    pub limit: u32,
    /// Offset asked for.
    pub offset: u32,
}

/// A full-text search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The entity.
    pub entity: Listed,
    /// An excerpt with the match in `[` `]`.
    pub snippet: String,
}

struct Cached {
    doc: AutoCommit,
    version: i64,
    gen: i64,
    last_chunk: i64,
}

struct Inner {
    conn: Connection,
    cache: LruCache<DocId, Cached>,
}

/// The running external-write watcher thread.
struct Watcher {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
    port: u16,
}

struct Shared {
    inner: Mutex<Inner>,
    feed: broadcast::Sender<DocChange>,
    writer: i64,
    next_peer: AtomicU64,
    path: PathBuf,
    watcher: Mutex<Option<Watcher>>,
    /// Sends wake-up datagrams to another process's watcher.
    notifier: Option<std::net::UdpSocket>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let watcher = self
            .watcher
            .get_mut()
            .map(Option::take)
            .unwrap_or_else(|e| e.into_inner().take());
        if let Some(Watcher { stop, handle, port }) = watcher {
            stop.store(true, Ordering::Relaxed);
            // Wake the thread so it sees the flag now rather than after the timeout.
            if let Ok(s) = std::net::UdpSocket::bind(("127.0.0.1", 0)) {
                let _ = s.send_to(&[0], ("127.0.0.1", port));
            }
            let _ = handle.join();
        }
    }
}

/// The document store. Cheap to clone; all clones share one connection and cache.
#[derive(Clone)]
pub struct DocumentStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DocumentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentStore")
            .field("path", &self.shared.path)
            .finish()
    }
}

const MIGRATIONS: &[&str] = &[
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
];

/// How hard a commit must reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// `synchronous=FULL`: survives power loss. For local edits, which exist nowhere else.
    Full,
    /// `synchronous=NORMAL` (WAL): survives a crash of the process, maybe not of the
    /// machine. For changes from peers and derived data: a lost tail is re-sent by the
    /// peer, because summaries are computed from what is on disk.
    Normal,
}

fn begin(conn: &mut Connection, durability: Durability) -> Result<Transaction<'_>, StoreError> {
    let mode = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", mode)?;
    Ok(conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
}

/// Where a watching process publishes the loopback port of its wake-up socket.
fn notify_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".notify");
    PathBuf::from(name)
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: a change acknowledged to a peer or reported to a user survives power loss.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}

fn heads_to_bytes(heads: &[ChangeHash]) -> Vec<u8> {
    heads.iter().flat_map(|h| h.0).collect()
}

fn heads_from_bytes(bytes: &[u8]) -> Vec<[u8; 32]> {
    bytes
        .chunks_exact(32)
        .map(|c| {
            let mut h = [0u8; 32];
            h.copy_from_slice(c);
            h
        })
        .collect()
}

fn raw_heads(heads: &[ChangeHash]) -> Vec<[u8; 32]> {
    heads.iter().map(|h| h.0).collect()
}

fn id_from_sql(bytes: Vec<u8>) -> rusqlite::Result<DocId> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            "document id is not 16 bytes".into(),
        )
    })?;
    Ok(DocId(arr))
}

fn opt_id(s: Option<String>) -> Option<DocId> {
    s.and_then(|s| s.parse().ok())
}

fn digest_from_sql(bytes: Vec<u8>) -> Digest {
    let mut d = EMPTY;
    if bytes.len() == 16 {
        d.copy_from_slice(&bytes);
    }
    d
}

/// The row of `documents` that the cache is checked against.
struct DocRow {
    kind: String,
    digest: Digest,
    version: i64,
    gen: i64,
    chunk_count: i64,
    chunk_bytes: i64,
    snapshot_len: i64,
}

fn doc_row(tx: &Connection, id: &DocId) -> Result<Option<DocRow>, StoreError> {
    Ok(tx
        .query_row(
            "SELECT kind, digest, version, snapshot_gen, chunk_count, chunk_bytes, length(snapshot)
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
                })
            },
        )
        .optional()?)
}

fn load_chunks(
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

fn load_fresh(conn: &Connection, id: &DocId, row: &DocRow) -> Result<Cached, StoreError> {
    let snapshot: Vec<u8> = conn.query_row(
        "SELECT snapshot FROM documents WHERE id = ?1",
        [&id.0[..]],
        |r| r.get(0),
    )?;
    let mut doc = AutoCommit::load(&snapshot).map_err(|e| StoreError::Corrupt {
        id: *id,
        reason: e.to_string(),
    })?;
    let last_chunk = load_chunks(conn, id, 0, &mut doc)?;
    Ok(Cached {
        doc,
        version: row.version,
        gen: row.gen,
        last_chunk,
    })
}

/// Brings the cached copy of `id` up to the stored version, loading it if needed.
fn cached<'a>(
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

fn bucket_update(
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

struct IndexRow<'a> {
    kind: &'a str,
    derived: &'a Derived,
    deleted: bool,
    created_at: i64,
    updated_at: i64,
    /// `None`: the body is not known yet (document received whole, not loaded).
    body: Option<&'a str>,
}

fn write_index(tx: &Connection, id: &DocId, row: &IndexRow<'_>) -> Result<(), StoreError> {
    let d = row.derived;
    let rowid: i64 = tx.query_row(
        "INSERT INTO entities (id, kind, project, title, status, due, parent, deleted, created_at, updated_at, indexed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT(id) DO UPDATE SET kind = excluded.kind, project = excluded.project,
           title = excluded.title, status = excluded.status, due = excluded.due,
           parent = excluded.parent, deleted = excluded.deleted, created_at = excluded.created_at,
           updated_at = excluded.updated_at, indexed = excluded.indexed
         RETURNING rowid",
        params![
            &id.0[..],
            row.kind,
            d.project.map(|p| p.to_string()),
            d.title,
            d.status,
            d.due,
            d.parent.map(|p| p.to_string()),
            row.deleted,
            row.created_at,
            row.updated_at,
            row.body.is_some(),
        ],
        |r| r.get(0),
    )?;
    tx.execute("DELETE FROM search WHERE rowid = ?1", [rowid])?;
    if !row.deleted {
        tx.execute(
            "INSERT INTO search (rowid, title, body) VALUES (?1, ?2, ?3)",
            params![rowid, d.title, row.body.unwrap_or("")],
        )?;
    }
    Ok(())
}

fn index_doc(tx: &Connection, id: &DocId, kind: &str, doc: &AutoCommit) -> Result<(), StoreError> {
    let Ok(k) = kind.parse::<Kind>() else {
        return Ok(());
    };
    let derived = derive_any(k, doc);
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

fn log_change(tx: &Connection, id: &DocId, writer: i64) -> Result<(), StoreError> {
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
fn insert_new(
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

impl Inner {
    /// The write path shared by local edits and peers' sync messages.
    ///
    /// Runs `f` on the up-to-date document inside `BEGIN IMMEDIATE`; if the heads moved,
    /// appends the new changes as a chunk, updates heads, digests and derived rows, maybe
    /// compacts, and commits. Returns `f`'s value and whether anything changed.
    fn write<T>(
        &mut self,
        writer: i64,
        durability: Durability,
        id: &DocId,
        f: impl FnOnce(&Connection, &str, &mut AutoCommit) -> Result<T, StoreError>,
    ) -> Result<Option<(T, bool)>, StoreError> {
        let Inner { conn, cache } = self;
        let tx = begin(conn, durability)?;
        let Some(row) = doc_row(&tx, id)? else {
            return Ok(None);
        };
        let entry = cached(&tx, cache, id, &row)?;
        let before = entry.doc.get_heads();
        let out = match f(&tx, &row.kind, &mut entry.doc) {
            Ok(out) => out,
            Err(e) => {
                entry.doc.rollback();
                // A failed sync message may have applied part of itself: reload later.
                cache.pop(id);
                return Err(e);
            }
        };
        entry.doc.commit();
        let after = entry.doc.get_heads();
        if before == after {
            return Ok(Some((out, false)));
        }
        let chunk = entry.doc.save_after(&before);
        tx.execute(
            "INSERT INTO chunks (doc_id, data) VALUES (?1, ?2)",
            params![&id.0[..], &chunk],
        )?;
        let seq = tx.last_insert_rowid();
        let digest = doc_digest(id, &raw_heads(&after));
        let compact = row.chunk_count + 1 >= COMPACT_CHUNKS
            || row.chunk_bytes + chunk.len() as i64 > row.snapshot_len.max(4096);
        let mut gen = row.gen;
        if compact {
            // The new snapshot is written in the same transaction that drops the chunks.
            let snapshot = entry.doc.save();
            tx.execute("DELETE FROM chunks WHERE doc_id = ?1", [&id.0[..]])?;
            gen += 1;
            tx.execute(
                "UPDATE documents SET heads = ?2, digest = ?3, snapshot = ?4, snapshot_gen = ?5,
                   version = version + 1, chunk_count = 0, chunk_bytes = 0 WHERE id = ?1",
                params![
                    &id.0[..],
                    heads_to_bytes(&after),
                    &digest[..],
                    snapshot,
                    gen
                ],
            )?;
        } else {
            tx.execute(
                "UPDATE documents SET heads = ?2, digest = ?3, version = version + 1,
                   chunk_count = chunk_count + 1, chunk_bytes = chunk_bytes + ?4 WHERE id = ?1",
                params![
                    &id.0[..],
                    heads_to_bytes(&after),
                    &digest[..],
                    chunk.len() as i64
                ],
            )?;
        }
        bucket_update(&tx, id.bucket(), Some(&row.digest), &digest)?;
        index_doc(&tx, id, &row.kind, &entry.doc)?;
        log_change(&tx, id, writer)?;
        tx.commit()?;
        entry.version = row.version + 1;
        entry.gen = gen;
        entry.last_chunk = if compact { 0 } else { seq };
        Ok(Some((out, true)))
    }

    fn check_refs(tx: &Connection, id: &DocId, kind: Kind, d: &Derived) -> Result<(), StoreError> {
        let kind_of =
            |other: &DocId| -> Result<Option<(String, bool, Option<String>)>, StoreError> {
                Ok(tx
                    .query_row(
                        "SELECT kind, deleted, parent FROM entities WHERE id = ?1",
                        [&other.0[..]],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()?)
            };
        if let Some(project) = &d.project {
            match kind_of(project)? {
                Some((k, false, _)) if k == "project" => {}
                _ => {
                    return Err(StoreError::invalid(
                        "project",
                        format!("no project {project}"),
                    ))
                }
            }
        }
        match (kind, &d.parent) {
            (Kind::Task, Some(parent)) => {
                if parent == id {
                    return Err(StoreError::invalid(
                        "parent",
                        "a task cannot be its own parent",
                    ));
                }
                match kind_of(parent)? {
                    Some((k, false, grandparent)) if k == "task" => {
                        if grandparent.is_some() {
                            return Err(StoreError::invalid(
                                "parent",
                                "subtasks go two levels deep: the parent is itself a subtask",
                            ));
                        }
                    }
                    _ => return Err(StoreError::invalid("parent", format!("no task {parent}"))),
                }
                let children: i64 = tx.query_row(
                    "SELECT count(*) FROM entities WHERE parent = ?1 AND kind = 'task' AND deleted = 0",
                    [id.to_string()],
                    |r| r.get(0),
                )?;
                if children > 0 {
                    return Err(StoreError::invalid(
                        "parent",
                        "a task with subtasks cannot become a subtask (two levels at most)",
                    ));
                }
            }
            (Kind::Project, Some(parent)) => {
                // Walk up from the new parent; meeting `id` would make a cycle.
                let mut cursor = Some(*parent);
                let mut steps = 0;
                while let Some(p) = cursor {
                    if p == *id {
                        return Err(StoreError::invalid(
                            "parent",
                            "projects cannot form a cycle",
                        ));
                    }
                    match kind_of(&p)? {
                        Some((k, false, up)) if k == "project" => cursor = opt_id(up),
                        _ => return Err(StoreError::invalid("parent", format!("no project {p}"))),
                    }
                    steps += 1;
                    if steps > 64 {
                        return Err(StoreError::invalid("parent", "project tree deeper than 64"));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

fn listed_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Listed> {
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
    })
}

const LISTED_COLUMNS: &str =
    "e.id, e.kind, e.title, e.project, e.status, e.due, e.parent, e.deleted, e.updated_at";

/// Quotes every word of a user's query so FTS5 syntax in it is taken literally.
fn fts_query(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The hex ids of project `root` and every project below it.
fn subtree(conn: &Connection, root: &DocId) -> Result<HashSet<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT lower(hex(id)), parent FROM entities WHERE kind = 'project' AND deleted = 0",
    )?;
    let rows: Vec<(String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut sub = HashSet::from([root.to_string()]);
    // Fixed point over the (small) project table: add children of members.
    loop {
        let before = sub.len();
        for (id, parent) in &rows {
            if parent.as_ref().is_some_and(|p| sub.contains(p)) {
                sub.insert(id.clone());
            }
        }
        if sub.len() == before {
            return Ok(sub);
        }
    }
}

/// Whether a document with these derived fields lies inside the subtree `sub`: a project
/// that is (or hangs under) a member, or an entity whose project is a member.
fn allowed(
    kind: &str,
    id: &DocId,
    project: Option<&str>,
    parent: Option<&str>,
    sub: &HashSet<String>,
) -> bool {
    if kind == "project" {
        sub.contains(&id.to_string()) || parent.is_some_and(|p| sub.contains(p))
    } else {
        project.is_some_and(|p| sub.contains(p))
    }
}

fn doc_allowed(doc: &AutoCommit, id: &DocId, sub: &HashSet<String>) -> bool {
    let kind = read_str(doc, "kind").unwrap_or_default();
    allowed(
        &kind,
        id,
        read_str(doc, "project").as_deref(),
        read_str(doc, "parent").as_deref(),
        sub,
    )
}

impl DocumentStore {
    /// Opens (creating if needed) the store at `path` and runs pending migrations.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = open_connection(&path)?;
        migrate(&mut conn)?;
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        let writer = i64::from_le_bytes(DocId::random().0[..8].try_into().unwrap_or([1; 8]));
        let cache = LruCache::new(NonZeroUsize::new(CACHE_DOCS).unwrap_or(NonZeroUsize::MIN));
        Ok(Self {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner { conn, cache }),
                feed,
                writer,
                next_peer: AtomicU64::new(1),
                path,
                watcher: Mutex::new(None),
                notifier: std::net::UdpSocket::bind(("127.0.0.1", 0)).ok(),
            }),
        })
    }

    /// Starts a thread that announces other processes' commits on the feed as
    /// [`Origin::External`]. Stops when the last clone of the store is dropped.
    pub fn watch_external_writes(&self) -> Result<(), StoreError> {
        let mut slot = self
            .shared
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Ok(());
        }
        let conn = open_connection(&self.shared.path)?;
        // Writers in other processes send a datagram here after each commit, so changes
        // are seen at once without busy polling (a laptop's battery matters).
        let wake = std::net::UdpSocket::bind(("127.0.0.1", 0))
            .and_then(|s| s.set_read_timeout(Some(WATCH_FALLBACK)).map(|()| s))
            .map_err(|e| StoreError::Task(format!("watcher socket: {e}")))?;
        let port = wake
            .local_addr()
            .map_err(|e| StoreError::Task(e.to_string()))?
            .port();
        std::fs::write(notify_path(&self.shared.path), port.to_string())
            .map_err(|e| StoreError::Task(format!("writing the notify port: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let feed = self.shared.feed.clone();
        let writer = self.shared.writer;
        let mut last: i64 =
            conn.query_row("SELECT coalesce(max(seq), 0) FROM change_log", [], |r| {
                r.get(0)
            })?;
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("hearth-store-watch".into())
            .spawn(move || {
                let mut version: i64 = -1;
                let mut buf = [0u8; 16];
                while !stop2.load(Ordering::Relaxed) {
                    // A datagram, or the fallback timeout: either way look for commits.
                    let _ = wake.recv(&mut buf);
                    let now: i64 = match conn.query_row("PRAGMA data_version", [], |r| r.get(0)) {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::warn!(error = %e, "store watcher cannot read data_version");
                            continue;
                        }
                    };
                    if now == version {
                        continue;
                    }
                    version = now;
                    let rows: Result<Vec<(i64, Vec<u8>, i64)>, _> = conn
                        .prepare_cached("SELECT seq, doc_id, writer FROM change_log WHERE seq > ?1 ORDER BY seq")
                        .and_then(|mut s| {
                            s.query_map([last], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
                        });
                    match rows {
                        Ok(rows) => {
                            for (seq, id, by) in rows {
                                last = seq;
                                if by == writer {
                                    continue;
                                }
                                if let Ok(id) = id_from_sql(id) {
                                    let _ = feed.send(DocChange { id, origin: Origin::External });
                                }
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "store watcher cannot read change_log"),
                    }
                }
            })
            .map_err(|e| StoreError::Task(e.to_string()))?;
        *slot = Some(Watcher { stop, handle, port });
        Ok(())
    }

    /// Subscribes to the change feed.
    pub fn subscribe(&self) -> broadcast::Receiver<DocChange> {
        self.shared.feed.subscribe()
    }

    /// A fresh tag for a replication peer.
    pub fn new_peer_tag(&self) -> PeerTag {
        PeerTag(self.shared.next_peer.fetch_add(1, Ordering::Relaxed))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn announce(&self, id: DocId, origin: Origin) {
        // No subscribers is fine: nothing is listening yet.
        let _ = self.shared.feed.send(DocChange { id, origin });
        self.wake_other_watcher();
    }

    /// Tells a watcher in another process (say `hearth run` beside `hearth note edit`)
    /// that something was committed. Best effort: its fallback poll catches a lost one.
    fn wake_other_watcher(&self) {
        let own = self
            .shared
            .watcher
            .lock()
            .map(|w| w.is_some())
            .unwrap_or(true);
        if own {
            return;
        }
        let Some(socket) = &self.shared.notifier else {
            return;
        };
        if let Some(port) = std::fs::read_to_string(notify_path(&self.shared.path))
            .ok()
            .and_then(|p| p.trim().parse::<u16>().ok())
        {
            let _ = socket.send_to(&[1], ("127.0.0.1", port));
        }
    }

    /// Runs blocking store work on tokio's blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&DocumentStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    // ---- entity API ------------------------------------------------------------------------

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
        {
            let Inner { conn, .. } = &mut *inner;
            let tx = begin(conn, Durability::Full)?;
            check_refs_conn(&tx, &id, E::KIND, &derived)?;
            insert_new(&tx, writer, &id, E::KIND.as_str(), &mut doc)?;
            tx.commit()?;
        }
        let version = 1;
        inner.cache.put(
            id,
            Cached {
                doc,
                version,
                gen: 0,
                last_chunk: 0,
            },
        );
        drop(inner);
        self.announce(id, Origin::Local);
        Ok(Record {
            id,
            created_at: now,
            updated_at: now,
            deleted: false,
            value,
        })
    }

    /// Reads an entity.
    pub async fn get<E: Entity>(&self, id: DocId) -> Result<Record<E>, StoreError> {
        self.blocking(move |s| s.get_blocking(id)).await
    }

    /// [`Self::get`] for synchronous callers.
    pub fn get_blocking<E: Entity>(&self, id: DocId) -> Result<Record<E>, StoreError> {
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        let not_found = || StoreError::NotFound {
            kind: E::KIND.as_str(),
            id: id.to_string(),
        };
        let row = doc_row(conn, &id)?.ok_or_else(not_found)?;
        if row.kind != E::KIND.as_str() {
            return Err(StoreError::WrongKind {
                id,
                expected: E::KIND,
                found: row.kind,
            });
        }
        let entry = cached(conn, cache, &id, &row)?;
        Ok(record_of(id, &entry.doc))
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
        let edits = patch.into_edits();
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
            for edit in &edits {
                apply_edit(doc, edit)?;
            }
            doc.put(ROOT, "updated_at", ScalarValue::Timestamp(now_ms()))?;
            let value = <P::Entity as Entity>::read(doc);
            value.validate()?;
            check_refs_conn(tx, &id, kind, &value.derive())?;
            Ok(())
        })?;
        let Some((_, changed)) = result else {
            return Err(StoreError::NotFound {
                kind: kind.as_str(),
                id: id.to_string(),
            });
        };
        drop(inner);
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

    /// Finds the one entity of `kind` whose hex id starts with `prefix` (at least 4 digits).
    pub fn resolve_blocking(&self, kind: Kind, prefix: &str) -> Result<DocId, StoreError> {
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

    /// Lists entities from the derived table, newest first.
    pub async fn list(&self, filter: Filter) -> Result<Page<Listed>, StoreError> {
        self.blocking(move |s| s.list_blocking(&filter)).await
    }

    /// [`Self::list`] for synchronous callers.
    pub fn list_blocking(&self, f: &Filter) -> Result<Page<Listed>, StoreError> {
        let inner = self.lock();
        let where_sql = "WHERE e.kind = ?1 AND (?2 OR e.deleted = 0)
            AND (?3 IS NULL OR e.project = ?3) AND (?4 IS NULL OR e.status = ?4)
            AND (?5 IS NULL OR e.parent = ?5)";
        let args = params![
            f.kind.as_str(),
            f.include_deleted,
            f.project.map(|p| p.to_string()),
            f.status,
            f.parent.map(|p| p.to_string()),
        ];
        let total: i64 = inner.conn.query_row(
            &format!("SELECT count(*) FROM entities e {where_sql}"),
            args,
            |r| r.get(0),
        )?;
        let mut stmt = inner.conn.prepare_cached(&format!(
            "SELECT {LISTED_COLUMNS} FROM entities e {where_sql}
             ORDER BY e.updated_at DESC, e.id LIMIT ?6 OFFSET ?7"
        ))?;
        let data = stmt
            .query_map(
                params![
                    f.kind.as_str(),
                    f.include_deleted,
                    f.project.map(|p| p.to_string()),
                    f.status,
                    f.parent.map(|p| p.to_string()),
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
        // Documents received whole are indexed lazily; finish that before answering.
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
                    snippet: r.get(9)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(hits)
    }

    /// Fills the search index for up to `limit` documents received whole; returns how many.
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
            let Some(row) = doc_row(&tx, id)? else {
                continue;
            };
            // Load without caching: a bulk index pass must not evict hot documents.
            let fresh = match cache.peek(id) {
                Some(c) if c.version == row.version => None,
                _ => Some(load_fresh(&tx, id, &row)?),
            };
            let doc = match &fresh {
                Some(c) => &c.doc,
                None => {
                    &cache
                        .peek(id)
                        .ok_or_else(|| StoreError::Task("cache race".into()))?
                        .doc
                }
            };
            index_doc(&tx, id, &row.kind, doc)?;
        }
        tx.commit()?;
        Ok(ids.len())
    }

    // ---- replication API ---------------------------------------------------------------------

    /// The summary a peer scoped to project `scope` may see (everything when `None`).
    /// Scoped summaries are computed from the derived rows, so they cost a scan.
    pub async fn summary_in(&self, scope: Option<DocId>) -> Result<Summary, StoreError> {
        let Some(root) = scope else {
            return self.summary().await;
        };
        self.blocking(move |s| {
            let mut buckets = vec![EMPTY; BUCKETS];
            let mut docs = 0u64;
            for e in s.scoped_entries(&root, None)? {
                xor_into(&mut buckets[e.id[0] as usize], &e.digest);
                docs += 1;
            }
            let root = root_digest(&buckets);
            Ok(Summary {
                buckets,
                root,
                docs,
            })
        })
        .await
    }

    /// [`Self::entries`] restricted to what a peer scoped to `scope` may see.
    pub async fn entries_in(
        &self,
        buckets: Vec<u8>,
        scope: Option<DocId>,
    ) -> Result<Vec<DocEntry>, StoreError> {
        let Some(root) = scope else {
            return self.entries(buckets).await;
        };
        self.blocking(move |s| s.scoped_entries(&root, Some(&buckets)))
            .await
    }

    fn scoped_entries(
        &self,
        root: &DocId,
        buckets: Option<&[u8]>,
    ) -> Result<Vec<DocEntry>, StoreError> {
        let inner = self.lock();
        let sub = subtree(&inner.conn, root)?;
        let mut stmt = inner.conn.prepare_cached(
            "SELECT d.id, d.digest, e.kind, e.project, e.parent FROM documents d
             JOIN entities e ON e.id = d.id ORDER BY d.id",
        )?;
        let mut out = Vec::new();
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let id = id_from_sql(r.get(0)?)?;
            if buckets.is_some_and(|b| !b.contains(&id.bucket())) {
                continue;
            }
            let kind: String = r.get(2)?;
            let project: Option<String> = r.get(3)?;
            let parent: Option<String> = r.get(4)?;
            if allowed(&kind, &id, project.as_deref(), parent.as_deref(), &sub) {
                out.push(DocEntry {
                    id: id.0,
                    digest: digest_from_sql(r.get(1)?),
                });
            }
        }
        Ok(out)
    }

    /// Project `root` and every project below it: what a device scoped to `root`, or the
    /// agent invoked in `root`, may see.
    pub fn subtree_blocking(&self, root: DocId) -> Result<HashSet<DocId>, StoreError> {
        let inner = self.lock();
        Ok(subtree(&inner.conn, &root)?
            .into_iter()
            .filter_map(|h| h.parse().ok())
            .collect())
    }

    /// Whether document `id` is visible to a peer scoped to `scope`.
    pub async fn in_scope(&self, id: DocId, scope: Option<DocId>) -> Result<bool, StoreError> {
        let Some(root) = scope else {
            return Ok(true);
        };
        self.blocking(move |s| {
            let inner = s.lock();
            let row: Option<(String, Option<String>, Option<String>)> = inner
                .conn
                .query_row(
                    "SELECT kind, project, parent FROM entities WHERE id = ?1",
                    [&id.0[..]],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            let sub = subtree(&inner.conn, &root)?;
            Ok(row.is_some_and(|(k, p, par)| allowed(&k, &id, p.as_deref(), par.as_deref(), &sub)))
        })
        .await
    }

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
                .prepare_cached("SELECT id, digest FROM documents WHERE bucket = ?1 ORDER BY id")?;
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

    fn export_blocking(&self, ids: &[DocId]) -> Result<Vec<DocSnapshot>, StoreError> {
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(row) = doc_row(conn, id)? else {
                continue;
            };
            if row.chunk_count > 0 {
                let tx = begin(conn, Durability::Normal)?;
                let Some(row) = doc_row(&tx, id)? else {
                    continue;
                };
                let entry = cached(&tx, cache, id, &row)?;
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
            }
            let snap = conn.query_row(
                "SELECT d.heads, d.snapshot, e.kind, e.project, e.title, e.status, e.due, e.parent,
                        e.deleted, e.updated_at
                 FROM documents d JOIN entities e ON e.id = d.id WHERE d.id = ?1",
                [&id.0[..]],
                |r| {
                    let heads: Vec<u8> = r.get(0)?;
                    Ok(DocSnapshot {
                        id: id.0,
                        heads: heads_from_bytes(&heads),
                        bytes: r.get(1)?,
                        index: DocIndex {
                            kind: r.get(2)?,
                            project: r.get(3)?,
                            title: r.get(4)?,
                            status: r.get(5)?,
                            due: r.get(6)?,
                            parent: r.get(7)?,
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
    /// replica already holds are merged instead. Returns how many were new.
    pub async fn import(
        &self,
        docs: Vec<DocSnapshot>,
        origin: Origin,
        scope: Option<DocId>,
    ) -> Result<usize, StoreError> {
        self.blocking(move |s| {
            let docs = match scope {
                None => docs,
                Some(root) => s.only_in_scope(docs, &root)?,
            };
            s.import_blocking(docs, origin)
        })
        .await
    }

    /// Keeps the documents a scoped peer may write, judged from their content (its
    /// claimed index is not trusted), and refreshes their index from that content.
    fn only_in_scope(
        &self,
        docs: Vec<DocSnapshot>,
        root: &DocId,
    ) -> Result<Vec<DocSnapshot>, StoreError> {
        let sub = subtree(&self.lock().conn, root)?;
        let mut keep = Vec::new();
        for mut snap in docs {
            let id = DocId(snap.id);
            let Ok(doc) = AutoCommit::load(&snap.bytes) else {
                return Err(StoreError::SyncMessage(format!(
                    "document {id} does not load"
                )));
            };
            if !doc_allowed(&doc, &id, &sub) {
                tracing::warn!(%id, "refused a document outside the peer's scope");
                continue;
            }
            if let Ok(kind) = read_str(&doc, "kind").unwrap_or_default().parse::<Kind>() {
                let d = derive_any(kind, &doc);
                snap.index = DocIndex {
                    kind: kind.as_str().to_string(),
                    project: d.project.map(|p| p.to_string()),
                    title: d.title,
                    status: d.status,
                    due: d.due,
                    parent: d.parent.map(|p| p.to_string()),
                    deleted: read_bool(&doc, "deleted"),
                    updated_at: read_i64(&doc, "updated_at"),
                };
            }
            keep.push(snap);
        }
        Ok(keep)
    }

    fn import_blocking(&self, docs: Vec<DocSnapshot>, origin: Origin) -> Result<usize, StoreError> {
        let writer = self.shared.writer;
        let mut merges = Vec::new();
        let mut fresh = Vec::new();
        {
            let mut inner = self.lock();
            let tx = begin(&mut inner.conn, Durability::Normal)?;
            for snap in docs {
                let id = DocId(snap.id);
                if snap.index.kind.parse::<Kind>().is_err() {
                    return Err(StoreError::SyncMessage(format!(
                        "document {id} has unknown kind {:?}",
                        snap.index.kind
                    )));
                }
                if snap.heads.is_empty() || snap.bytes.is_empty() {
                    return Err(StoreError::SyncMessage(format!(
                        "document {id} arrived empty"
                    )));
                }
                if doc_row(&tx, &id)?.is_some() {
                    merges.push(snap);
                    continue;
                }
                let digest = doc_digest(&id, &snap.heads);
                let heads: Vec<u8> = snap.heads.iter().flatten().copied().collect();
                tx.execute(
                    "INSERT INTO documents (id, kind, heads, digest, bucket, snapshot) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![&id.0[..], snap.index.kind, heads, &digest[..], id.bucket(), snap.bytes],
                )?;
                bucket_update(&tx, id.bucket(), None, &digest)?;
                let i = &snap.index;
                let derived = Derived {
                    project: opt_id(i.project.clone()),
                    title: i.title.clone(),
                    status: i.status.clone(),
                    due: i.due.clone(),
                    parent: opt_id(i.parent.clone()),
                    body: String::new(),
                };
                write_index(
                    &tx,
                    &id,
                    &IndexRow {
                        kind: &i.kind,
                        derived: &derived,
                        deleted: i.deleted,
                        created_at: i.updated_at,
                        updated_at: i.updated_at,
                        body: None,
                    },
                )?;
                log_change(&tx, &id, writer)?;
                fresh.push(id);
            }
            tx.commit()?;
        }
        for id in &fresh {
            self.announce(*id, origin);
        }
        for snap in merges {
            let id = DocId(snap.id);
            let mut inner = self.lock();
            let changed = inner.write(writer, Durability::Normal, &id, |_, _, doc| {
                doc.load_incremental(&snap.bytes)
                    .map_err(|e| StoreError::SyncMessage(format!("document {id}: {e}")))?;
                Ok(())
            })?;
            drop(inner);
            if matches!(changed, Some((_, true))) {
                self.announce(id, origin);
            }
        }
        Ok(fresh.len())
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

    fn receive_sync_blocking(
        &self,
        id: DocId,
        state: &mut sync::State,
        message: &[u8],
        origin: Origin,
        scope: Option<DocId>,
    ) -> Result<(), StoreError> {
        let msg =
            sync::Message::decode(message).map_err(|e| StoreError::SyncMessage(e.to_string()))?;
        let writer = self.shared.writer;
        let mut inner = self.lock();
        let sub = match &scope {
            Some(root) => Some(subtree(&inner.conn, root)?),
            None => None,
        };
        let out_of_scope = || StoreError::OutOfScope { id };
        let result = inner.write(writer, Durability::Normal, &id, |_, _, doc| {
            // A scoped peer may touch only documents inside its scope, and must leave them there.
            if sub.as_ref().is_some_and(|sub| !doc_allowed(doc, &id, sub)) {
                return Err(out_of_scope());
            }
            doc.sync()
                .receive_sync_message(state, msg.clone())
                .map_err(|e| StoreError::SyncMessage(e.to_string()))?;
            if sub.as_ref().is_some_and(|sub| !doc_allowed(doc, &id, sub)) {
                return Err(out_of_scope());
            }
            Ok(())
        })?;
        let changed = match result {
            Some((_, changed)) => changed,
            None => {
                // A document this replica has never seen.
                let mut doc = AutoCommit::new();
                doc.sync()
                    .receive_sync_message(state, msg)
                    .map_err(|e| StoreError::SyncMessage(e.to_string()))?;
                if doc.get_heads().is_empty() {
                    return Ok(());
                }
                if sub.as_ref().is_some_and(|sub| !doc_allowed(&doc, &id, sub)) {
                    return Err(out_of_scope());
                }
                let kind = read_str(&doc, "kind")
                    .filter(|k| k.parse::<Kind>().is_ok())
                    .ok_or_else(|| {
                        StoreError::SyncMessage(format!("document {id} has no known kind"))
                    })?;
                let Inner { conn, cache } = &mut *inner;
                let tx = begin(conn, Durability::Normal)?;
                if doc_row(&tx, &id)?.is_some() {
                    // Another process inserted it meanwhile: merge through the write path.
                    drop(tx);
                    let bytes = doc.save();
                    inner.write(writer, Durability::Normal, &id, |_, _, d| {
                        d.load_incremental(&bytes)?;
                        Ok(())
                    })?;
                } else {
                    insert_new(&tx, writer, &id, &kind, &mut doc)?;
                    tx.commit()?;
                    cache.put(
                        id,
                        Cached {
                            doc,
                            version: 1,
                            gen: 0,
                            last_chunk: 0,
                        },
                    );
                }
                true
            }
        };
        drop(inner);
        if changed {
            self.announce(id, origin);
        }
        Ok(())
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

    fn generate_sync_blocking(
        &self,
        id: DocId,
        state: &mut sync::State,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let mut inner = self.lock();
        let Inner { conn, cache } = &mut *inner;
        match doc_row(conn, &id)? {
            Some(row) => {
                let entry = cached(conn, cache, &id, &row)?;
                Ok(entry
                    .doc
                    .sync()
                    .generate_sync_message(state)
                    .map(|m| m.encode()))
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

    /// Number of documents, tombstones included.
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

fn check_refs_conn(tx: &Connection, id: &DocId, kind: Kind, d: &Derived) -> Result<(), StoreError> {
    Inner::check_refs(tx, id, kind, d)
}

fn record_of<E: Entity>(id: DocId, doc: &AutoCommit) -> Record<E> {
    Record {
        id,
        created_at: read_i64(doc, "created_at"),
        updated_at: read_i64(doc, "updated_at"),
        deleted: read_bool(doc, "deleted"),
        value: E::read(doc),
    }
}
