//! [`DocumentStore`]: the one write API for every writer, on SQLite.
//!
//! Owns the database file. Each document is stored as a compacted snapshot plus
//! appended incremental chunks (`documents`, `chunks`); its heads, heads digest and the
//! XOR digest of its bucket are updated in the same transaction as the chunk, and so are
//! the derived `entities` row (what listings show, each kind's listed details included)
//! and the FTS5 `search` row. Every committed change is then announced on a broadcast
//! feed ([`DocChange`]). Rows a migration marks stale are re-derived when the store opens.
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
//! Nothing a peer sends is believed: its bytes are bounded before Automerge loads them
//! (`untrusted`), its changes are checked against its [`Scope`] before and after they
//! apply (`scope`), and documents it sends whole stay invisible until verified from
//! content (`verify`). A scoped peer's new document whose place depends on one not held
//! yet waits in memory for it (`waiting`).
//!
//! A project's parent lives in its placement document (`crate::placement`), written in
//! the same transaction as the project by the one write path (`placement`); the
//! project's row carries the effective parent, so listings and scopes read no document.
//!
//! One file per concern: `schema` (migrations, connections, row conversions), `cache`
//! (loaded documents), `write` (the write path and compaction), `refs` (references
//! between documents), `placement`, `scope`, `untrusted`, `waiting`, `verify`, `query`
//! (reads, listing, search), `replication` (summaries, export, import, sync messages),
//! `upstream` (what the peer a node follows has confirmed holding: its pending changes),
//! `watcher` (other processes' commits).
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

mod cache;
mod placement;
mod query;
mod refs;
mod replication;
mod schema;
mod scope;
mod untrusted;
mod upstream;
mod verify;
mod waiting;
mod watcher;
mod write;

use cache::*;
use placement::*;
pub use query::Versioned;
use refs::*;
use replication::{quarantine, NewDoc};
use schema::*;
pub use scope::Scope;
use scope::*;
use untrusted::*;
use verify::*;
use waiting::*;
use watcher::*;
use write::*;

use crate::{
    entity::{
        apply_edit, derive_any, now_ms, read_bool, read_i64, read_str, validate_slug, write_header,
        Derived, Details, DocId, Entity, Kind, Patch, Record,
    },
    error::StoreError,
    placement::PLACEMENT_KIND,
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

/// A committed change to one document. A change to a project's placement is announced
/// for the placement and then for the project (its place in the tree moved), so
/// listeners that know only entities see the move.
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
    /// Only contacts with this tag.
    pub tag: Option<String>,
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
            tag: None,
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
    /// What the listing shows of this kind besides the fields above.
    pub details: Details,
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
struct Inner {
    conn: Connection,
    cache: LruCache<DocId, Cached>,
}
struct Shared {
    inner: Mutex<Inner>,
    feed: broadcast::Sender<DocChange>,
    writer: i64,
    next_peer: AtomicU64,
    path: PathBuf,
    watcher: Mutex<Option<Watcher>>,
    verifier: Mutex<Option<Verifier>>,
    /// Scoped peers' documents waiting for the one that decides their place.
    waiting: Mutex<Waiting>,
    /// Sends wake-up datagrams to another process's watcher.
    notifier: Option<std::net::UdpSocket>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let verifier = self
            .verifier
            .get_mut()
            .map(Option::take)
            .unwrap_or_else(|e| e.into_inner().take());
        if let Some(Verifier { wake, handle }) = verifier {
            // Closing the channel stops the thread; it may be the one dropping us.
            drop(wake);
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
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
impl DocumentStore {
    /// Opens (creating if needed) the store at `path` and runs pending migrations.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = open_connection(&path)?;
        migrate(&mut conn)?;
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        let writer = i64::from_le_bytes(DocId::random().0[..8].try_into().unwrap_or([1; 8]));
        let cache = LruCache::new(NonZeroUsize::new(CACHE_DOCS).unwrap_or(NonZeroUsize::MIN));
        let store = Self {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner { conn, cache }),
                feed,
                writer,
                next_peer: AtomicU64::new(1),
                path,
                watcher: Mutex::new(None),
                verifier: Mutex::new(None),
                waiting: Mutex::new(Waiting::new()),
                notifier: std::net::UdpSocket::bind(("127.0.0.1", 0)).ok(),
            }),
        };
        store.place_legacy_projects()?;
        store.rederive_stale()?;
        Ok(store)
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

    /// Announces a committed change, then judges again the scoped peers' documents that
    /// waited for this one.
    fn announce(&self, id: DocId, origin: Origin) {
        self.publish(id, origin);
        self.release_waiting(id);
    }

    /// Puts a committed change on the feed and wakes other processes' watchers.
    fn publish(&self, id: DocId, origin: Origin) {
        // No subscribers is fine: nothing is listening yet.
        let _ = self.shared.feed.send(DocChange { id, origin });
        self.wake_other_watcher();
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
}
