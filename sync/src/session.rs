//! The replication session: one peer, one pair of byte streams.
//!
//! [`run_session`] drives `hearth/sync/1` over any `AsyncRead`/`AsyncWrite` pair (an iroh
//! QUIC stream, or an in-memory duplex in tests). Both sides run the same code:
//!
//! 1. send `Hello` with the root digest; equal roots mean nothing to do;
//! 2. otherwise exchange bucket digests, then entries of buckets both fill differently;
//! 3. send whole documents the peer lacks (`Snapshots`, batched) and run Automerge's sync
//!    protocol for documents that differ, at most `max_in_flight` started by this side at
//!    once; then `CatchUpDone`;
//! 4. stay open and push every change from the store's feed as a `Sync` message.
//!
//! A side that follows its peer as its upstream (a node and its hub,
//! [`SessionConfig::follow_upstream`]) also records what the peer holds, for
//! [`DocumentStore::pending_upstream`]: an equal root or equal buckets, equal entries,
//! documents the peer sent whole, and the heads in the peer's sync messages. Documents it
//! sends whole are followed by a small sync message at their heads, whose answer carries
//! the peer's heads: that is how a document created offline is seen to reach the hub.
//!
//! Three tasks: a reader that turns bytes into messages, a writer that owns the write half
//! (so the main loop never waits on the network and two peers can't deadlock each
//! other), and the main loop that owns all session state. This module does no SQLite
//! work itself; it goes through [`DocumentStore`].

use std::{
    collections::{HashSet, VecDeque},
    future::Future,
    num::NonZeroUsize,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use automerge::{sync, ChangeHash};
use hearth_protocol::{
    decode_frame, encode_frame, frame_len, Digest, DocEntry, DocSnapshot, FrameError, SyncMessage,
    FRAME_HEADER_LEN, MAX_FRAME,
};
use lru::LruCache;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::{broadcast, mpsc, Notify, OwnedSemaphorePermit, Semaphore},
};

use crate::{
    entity::DocId,
    error::{SessionError, StoreError},
    store::{DocumentStore, Origin},
    summary::{doc_digest, plan_buckets, plan_entries, BUCKETS},
};

/// Tunables of a session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Documents whose Automerge sync this side started and that are not settled yet.
    pub max_in_flight: usize,
    /// Target size of one `Snapshots` frame.
    pub snapshot_batch_bytes: usize,
    /// The project subtree the peer may see and write (`None`: everything). Documents
    /// outside it are never summarised, listed, sent or accepted.
    pub scope: Option<DocId>,
    /// This side follows the peer as its upstream (a node, of its hub): record what the
    /// peer confirms holding (see [`DocumentStore::pending_upstream`]).
    pub follow_upstream: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_in_flight: 64,
            snapshot_batch_bytes: 256 * 1024,
            scope: None,
            follow_upstream: false,
        }
    }
}

/// Byte and message counters of a session, readable while it runs.
#[derive(Debug, Default)]
pub struct SessionStats {
    /// Bytes written, frame headers included.
    pub bytes_sent: AtomicU64,
    /// Bytes read, frame headers included.
    pub bytes_received: AtomicU64,
    /// Frames written.
    pub frames_sent: AtomicU64,
    /// Frames read.
    pub frames_received: AtomicU64,
}

/// Milestones a session reports to its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// Both sides have exchanged everything that differed when the session began.
    CaughtUp {
        /// Documents received whole.
        received_whole: usize,
        /// Documents sent whole.
        sent_whole: usize,
        /// Documents reconciled with Automerge sync.
        synced: usize,
        /// Time since the session started.
        elapsed: Duration,
        /// Frame bytes sent so far.
        bytes_sent: u64,
        /// Frame bytes received so far.
        bytes_received: u64,
    },
}

/// Reads one frame of any message type whose body is at most `max` bytes (each ALPN has
/// its own limit: [`hearth_protocol::PAIR_MAX_FRAME`], [`MAX_FRAME`]); `Ok(None)` at a
/// clean end of stream between frames.
///
/// An oversized frame is refused from its header, and the body buffer grows only as
/// bytes arrive: a peer that announces 16 MiB and sends nothing costs nothing.
pub async fn read_frame<T: serde::de::DeserializeOwned, R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<Option<T>, SessionError> {
    /// Bytes read per step; the buffer never runs ahead of the data by more.
    const STEP: usize = 64 * 1024;
    buf.clear();
    buf.resize(FRAME_HEADER_LEN, 0);
    let mut got = 0;
    while got < FRAME_HEADER_LEN {
        let n = reader.read(&mut buf[got..FRAME_HEADER_LEN]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(SessionError::Truncated {
                got,
                want: FRAME_HEADER_LEN,
            });
        }
        got += n;
    }
    let len = frame_len(buf)?.unwrap_or(0);
    if len > max {
        return Err(FrameError::Oversized { len, max }.into());
    }
    let mut got = 0;
    while got < len {
        let start = FRAME_HEADER_LEN + got;
        buf.resize(start + (len - got).min(STEP), 0);
        let n = reader.read(&mut buf[start..]).await?;
        if n == 0 {
            return Err(SessionError::Truncated { got, want: len });
        }
        got += n;
        buf.truncate(FRAME_HEADER_LEN + got);
    }
    match decode_frame::<T>(buf)? {
        Some((msg, _)) => Ok(Some(msg)),
        None => Err(SessionError::Truncated {
            got: buf.len(),
            want: FRAME_HEADER_LEN + len,
        }),
    }
}

/// Frames waiting for the writer task, counted in bytes.
///
/// Answers to the peer are always queued (blocking on them could deadlock two sessions
/// that flood each other); work this side starts itself (new document syncs, live pushes)
/// waits while more than [`OUTBOX_HIGH`] bytes are queued, and a peer that stops reading
/// altogether ends the session at [`OUTBOX_MAX`].
struct Outbox {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
}

/// Above this many queued bytes, this side starts no new work.
const OUTBOX_HIGH: usize = 8 * 1024 * 1024;
/// A peer that lets this much pile up is not reading: the session ends.
const OUTBOX_MAX: usize = 256 * 1024 * 1024;
/// Bytes of received frames waiting for the main loop; the reader stops reading beyond.
const INBOX_BYTES: usize = 32 * 1024 * 1024;
/// Per-document Automerge sync states kept per session; older ones start afresh.
const MAX_STATES: usize = 4096;
/// Summary rounds (`Hello`) a peer may ask for: a burst, then one per this interval.
const HELLO_BURST: u32 = 8;
const HELLO_INTERVAL: Duration = Duration::from_secs(2);

impl Outbox {
    fn send(&self, msg: &SyncMessage) -> Result<(), SessionError> {
        let frame = encode_frame(msg)?;
        let queued = self.queued.fetch_add(frame.len(), Ordering::Relaxed) + frame.len();
        if queued > OUTBOX_MAX {
            return Err(SessionError::Protocol(format!(
                "the peer is not reading: {queued} bytes queued"
            )));
        }
        self.tx
            .send(frame)
            .map_err(|_| SessionError::Io(std::io::Error::from(std::io::ErrorKind::BrokenPipe)))
    }

    fn busy(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > OUTBOX_HIGH
    }
}

struct Session {
    store: DocumentStore,
    origin: Origin,
    config: SessionConfig,
    out: Outbox,
    states: LruCache<DocId, sync::State>,
    hello_tokens: u32,
    hello_refill: Instant,
    in_flight: HashSet<DocId>,
    queue: VecDeque<DocId>,
    peer_done: bool,
    caught_up: bool,
    started: Instant,
    received_whole: usize,
    sent_whole: usize,
    synced: usize,
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
    stats: Arc<SessionStats>,
    /// The root this side's last `Hello` sent, and how many it sent.
    hello_root: Digest,
    hellos_sent: u32,
    /// Whether the peer sent `Buckets` (it answers a `Hello` whose root differs from
    /// its own with them, before answering anything sent after that `Hello`).
    peer_buckets_seen: bool,
    /// An upstream root equal to this side's, to record once caught up: recording scans
    /// every document, so it must not hold up the catch-up it confirms.
    root_to_confirm: Option<Digest>,
}

impl Session {
    async fn hello(&mut self) -> Result<(), SessionError> {
        let summary = self.store.summary().await?;
        self.hello_root = summary.root;
        self.hellos_sent += 1;
        self.out.send(&SyncMessage::Hello {
            root: summary.root,
            docs: summary.docs,
        })
    }

    /// After documents went whole to the upstream: a sync message at each one's heads
    /// (nothing to send but the heads), whose answer carries the peer's heads.
    async fn ask_upstream_heads(
        &mut self,
        sent: Vec<(DocId, Vec<[u8; 32]>)>,
    ) -> Result<(), SessionError> {
        for (id, heads) in sent {
            let state = sync::State {
                shared_heads: heads.into_iter().map(ChangeHash).collect(),
                ..sync::State::default()
            };
            match self.store.generate_sync(id, state).await {
                Ok((state, msg)) => {
                    self.states.put(id, state);
                    if let Some(message) = msg {
                        self.out.send(&SyncMessage::Sync { doc: id.0, message })?;
                    }
                }
                Err(e) if e.is_document_fault() => {
                    tracing::warn!(%id, error = %e, "cannot ask the upstream about a document");
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn send_whole(&mut self, ids: Vec<DocId>) -> Result<(), SessionError> {
        let mut batch: Vec<DocSnapshot> = Vec::new();
        let mut batch_bytes = 0;
        let mut sent = Vec::new();
        for group in ids.chunks(64) {
            for snap in self.store.export(group.to_vec()).await? {
                // A document too large for one frame falls back to Automerge sync.
                if snap.bytes.len() + 4096 > MAX_FRAME {
                    self.queue.push_back(DocId(snap.id));
                    continue;
                }
                if batch_bytes + snap.bytes.len() > self.config.snapshot_batch_bytes
                    && !batch.is_empty()
                {
                    self.out.send(&SyncMessage::Snapshots {
                        docs: std::mem::take(&mut batch),
                    })?;
                    batch_bytes = 0;
                }
                batch_bytes += snap.bytes.len() + 128;
                self.sent_whole += 1;
                if self.config.follow_upstream {
                    sent.push((DocId(snap.id), snap.heads.clone()));
                }
                batch.push(snap);
            }
        }
        if !batch.is_empty() {
            self.out.send(&SyncMessage::Snapshots { docs: batch })?;
        }
        self.ask_upstream_heads(sent).await
    }

    /// Starts queued document syncs up to the in-flight bound, unless the outbox is full.
    async fn pump(&mut self) -> Result<(), SessionError> {
        while self.in_flight.len() < self.config.max_in_flight && !self.out.busy() {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            if self.in_flight.contains(&id) {
                continue;
            }
            if self.push(id).await? {
                self.in_flight.insert(id);
            }
        }
        Ok(())
    }

    /// Sends the next sync message for `id`, if Automerge has one. Returns whether it did.
    async fn push(&mut self, id: DocId) -> Result<bool, SessionError> {
        let state = self.states.pop(&id).unwrap_or_default();
        let (state, msg) = match self.store.generate_sync(id, state).await {
            Ok(out) => out,
            Err(e) if e.is_document_fault() => {
                tracing::warn!(%id, error = %e, "cannot offer a document; skipping it");
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        self.states.put(id, state);
        match msg {
            Some(message) => {
                self.out.send(&SyncMessage::Sync { doc: id.0, message })?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Allows a burst of summary rounds, then one per [`HELLO_INTERVAL`]: each costs a
    /// summary (a scan for a scoped peer) and may trigger a full comparison.
    fn take_hello_token(&mut self) -> Result<(), SessionError> {
        let earned = (self.hello_refill.elapsed().as_millis() / HELLO_INTERVAL.as_millis()) as u32;
        if earned > 0 {
            self.hello_tokens = (self.hello_tokens + earned).min(HELLO_BURST);
            self.hello_refill = Instant::now();
        }
        if self.hello_tokens == 0 {
            return Err(SessionError::Protocol(
                "the peer asks for summaries too often".into(),
            ));
        }
        self.hello_tokens -= 1;
        Ok(())
    }

    /// The upstream listed its entries of some buckets: those equal to ours are held.
    /// Entries answer this side's `Buckets`; if the peer sent no `Buckets` before them,
    /// it answered this side's only `Hello` with `CatchUpDone`: its root (in this side's
    /// scope) was the one that `Hello` sent, so if ours still is, it holds everything.
    async fn confirm_from_entries(&mut self, entries: &[DocEntry]) -> Result<(), SessionError> {
        let held = entries.iter().map(|e| (DocId(e.id), e.digest)).collect();
        self.store.confirm_upstream_digests(held).await?;
        if !self.peer_buckets_seen && self.hellos_sent == 1 {
            self.root_to_confirm = Some(self.hello_root);
        }
        Ok(())
    }

    fn check_caught_up(&mut self) {
        if self.caught_up || !self.peer_done || !self.in_flight.is_empty() || !self.queue.is_empty()
        {
            return;
        }
        self.caught_up = true;
        let event = SessionEvent::CaughtUp {
            received_whole: self.received_whole,
            sent_whole: self.sent_whole,
            synced: self.synced,
            elapsed: self.started.elapsed(),
            bytes_sent: self.stats.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.stats.bytes_received.load(Ordering::Relaxed),
        };
        tracing::info!(?event, "replica caught up");
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }

    async fn handle(&mut self, msg: SyncMessage) -> Result<(), SessionError> {
        match msg {
            SyncMessage::Hello { root, .. } => {
                self.take_hello_token()?;
                let summary = self.store.summary_in(self.config.scope).await?;
                if summary.root == root {
                    self.out.send(&SyncMessage::CatchUpDone)?;
                    if self.config.follow_upstream {
                        self.root_to_confirm = Some(root);
                    }
                } else {
                    self.out.send(&SyncMessage::Buckets {
                        digests: summary.buckets,
                    })?;
                }
            }
            SyncMessage::Buckets { digests } => {
                if digests.len() != BUCKETS {
                    return Err(SessionError::Protocol(format!(
                        "expected {BUCKETS} bucket digests, got {}",
                        digests.len()
                    )));
                }
                if self.config.follow_upstream {
                    self.peer_buckets_seen = true;
                    self.store.confirm_upstream_buckets(digests.clone()).await?;
                }
                let summary = self.store.summary_in(self.config.scope).await?;
                let plan = plan_buckets(&summary.buckets, &digests);
                let whole: Vec<DocId> = self
                    .store
                    .entries_in(plan.send_whole, self.config.scope)
                    .await?
                    .into_iter()
                    .map(|e| DocId(e.id))
                    .collect();
                self.send_whole(whole).await?;
                // Always answer Buckets with Entries (maybe empty) and Entries with
                // CatchUpDone: if the two sides' bucket plans differ because something
                // changed meanwhile, neither waits for a message that never comes.
                let entries = if plan.list.is_empty() {
                    Vec::new()
                } else {
                    self.store
                        .entries_in(plan.list.clone(), self.config.scope)
                        .await?
                };
                self.out.send(&SyncMessage::Entries {
                    buckets: plan.list,
                    entries,
                })?;
            }
            SyncMessage::Entries { buckets, entries } => {
                if self.config.follow_upstream {
                    self.confirm_from_entries(&entries).await?;
                }
                let mine = self.store.entries_in(buckets, self.config.scope).await?;
                let plan = plan_entries(&mine, &entries);
                self.send_whole(plan.send_whole).await?;
                self.queue.extend(plan.sync);
                self.pump().await?;
                self.out.send(&SyncMessage::CatchUpDone)?;
            }
            SyncMessage::Snapshots { docs } => {
                self.received_whole += docs.len();
                let held: Vec<(DocId, Digest)> = if self.config.follow_upstream {
                    docs.iter()
                        .map(|d| (DocId(d.id), doc_digest(&DocId(d.id), &d.heads)))
                        .collect()
                } else {
                    Vec::new()
                };
                self.store
                    .import(docs, self.origin, self.config.scope)
                    .await?;
                self.store.confirm_upstream_digests(held).await?;
            }
            SyncMessage::Sync { doc, message } => {
                let id = DocId(doc);
                let state = self.states.pop(&id).unwrap_or_default();
                let state = match self
                    .store
                    .receive_sync(id, state, message, self.origin, self.config.scope)
                    .await
                {
                    Ok(state) => state,
                    Err(StoreError::OutOfScope { id }) => {
                        // Refused, and no reply: the peer learns nothing about the document.
                        tracing::warn!(%id, "refused a change outside the peer's scope");
                        self.in_flight.remove(&id);
                        return Ok(());
                    }
                    Err(StoreError::Waiting { id, awaiting }) => {
                        // Kept by the store until `awaiting` arrives; no reply, so the
                        // exchange for this document rests until then.
                        tracing::debug!(%id, %awaiting, "a new document waits for the one deciding its place");
                        self.in_flight.remove(&id);
                        return Ok(());
                    }
                    Err(e) if e.is_document_fault() => {
                        // One bad document never ends the session for the others.
                        tracing::warn!(%id, error = %e, "refused a peer's change to a document");
                        self.in_flight.remove(&id);
                        return Ok(());
                    }
                    Err(e) => return Err(e.into()),
                };
                if self.config.follow_upstream {
                    if let Some(theirs) = &state.their_heads {
                        let theirs = theirs.iter().map(|h| h.0).collect();
                        self.store.confirm_upstream_heads(id, theirs).await?;
                    }
                }
                self.states.put(id, state);
                let sent = self.push(id).await?;
                if !sent && self.in_flight.remove(&id) {
                    self.synced += 1;
                    self.pump().await?;
                }
            }
            SyncMessage::CatchUpDone => self.peer_done = true,
        }
        self.check_caught_up();
        self.confirm_root_once_caught_up().await
    }

    /// Records a deferred upstream root once the catch-up is reported. The store checks
    /// it against this replica's root at that moment, so an edit made meanwhile is never
    /// confirmed by it.
    async fn confirm_root_once_caught_up(&mut self) -> Result<(), SessionError> {
        if self.caught_up {
            if let Some(root) = self.root_to_confirm.take() {
                self.store.confirm_upstream_root(root).await?;
            }
        }
        Ok(())
    }
}

/// Runs one replication session until the peer closes the stream (`Ok`), `shutdown`
/// completes (`Ok`), or something fails (`Err`, the session is over).
pub async fn run_session<R, W>(
    store: DocumentStore,
    mut reader: R,
    mut writer: W,
    config: SessionConfig,
    stats: Arc<SessionStats>,
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SessionError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut feed = store.subscribe();
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let queued = Arc::new(AtomicUsize::new(0));
    let drained = Arc::new(Notify::new());
    // Received frames wait here holding permits for their bytes: the reader stops reading
    // from the peer while the main loop is INBOX_BYTES behind.
    let inbox = Arc::new(Semaphore::new(INBOX_BYTES));
    type Inbound = Result<(SyncMessage, OwnedSemaphorePermit), SessionError>;
    let (in_tx, mut in_rx) = mpsc::channel::<Inbound>(1024);

    let read_stats = stats.clone();
    let reader_inbox = inbox.clone();
    let reader_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        loop {
            let item = read_frame::<SyncMessage, _>(&mut reader, &mut buf, MAX_FRAME).await;
            let stop = !matches!(item, Ok(Some(_)));
            let item = match item {
                Ok(Some(msg)) => {
                    read_stats
                        .bytes_received
                        .fetch_add(buf.len() as u64, Ordering::Relaxed);
                    read_stats.frames_received.fetch_add(1, Ordering::Relaxed);
                    let bytes = buf.len().clamp(1, INBOX_BYTES) as u32;
                    let Ok(permit) = reader_inbox.clone().acquire_many_owned(bytes).await else {
                        break;
                    };
                    // Don't keep a 16 MiB buffer around for the next small frame.
                    if buf.capacity() > 1024 * 1024 {
                        buf = Vec::new();
                    }
                    Ok((msg, permit))
                }
                Ok(None) => break,
                Err(e) => Err(e),
            };
            if in_tx.send(item).await.is_err() || stop {
                break;
            }
        }
    });
    let write_stats = stats.clone();
    let write_queued = queued.clone();
    let write_drained = drained.clone();
    let writer_task = tokio::spawn(async move {
        while let Some(frame) = out_rx.recv().await {
            writer.write_all(&frame).await?;
            if write_queued.fetch_sub(frame.len(), Ordering::Relaxed) - frame.len()
                <= OUTBOX_HIGH / 2
            {
                write_drained.notify_one();
            }
            write_stats
                .bytes_sent
                .fetch_add(frame.len() as u64, Ordering::Relaxed);
            write_stats.frames_sent.fetch_add(1, Ordering::Relaxed);
            if out_rx.is_empty() {
                writer.flush().await?;
            }
        }
        writer.shutdown().await
    });

    let origin = Origin::Peer(store.new_peer_tag());
    let mut session = Session {
        store,
        origin,
        config,
        out: Outbox { tx: out_tx, queued },
        states: LruCache::new(NonZeroUsize::new(MAX_STATES).unwrap_or(NonZeroUsize::MIN)),
        hello_tokens: HELLO_BURST,
        hello_refill: Instant::now(),
        in_flight: HashSet::new(),
        queue: VecDeque::new(),
        peer_done: false,
        caught_up: false,
        started: Instant::now(),
        received_whole: 0,
        sent_whole: 0,
        synced: 0,
        events,
        stats: stats.clone(),
        hello_root: [0; 16],
        hellos_sent: 0,
        peer_buckets_seen: false,
        root_to_confirm: None,
    };

    let result = async {
        session.hello().await?;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                msg = in_rx.recv() => match msg {
                    None => return Ok(()),
                    Some(Err(e)) => return Err(e),
                    Some(Ok((msg, permit))) => {
                        session.handle(msg).await?;
                        drop(permit);
                    }
                },
                // The outbox drained: start what waited for room.
                _ = drained.notified() => {
                    session.pump().await?;
                    session.check_caught_up();
                    session.confirm_root_once_caught_up().await?;
                },
                // Live pushes wait while the outbox is full (a lag resummarises later).
                change = feed.recv(), if !session.out.busy() => match change {
                    Ok(change) => {
                        if change.origin != session.origin
                            && session.store.in_scope(change.id, session.config.scope).await?
                        {
                            session.push(change.id).await?;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        // Too many changes to follow one by one: summarise again.
                        tracing::warn!(missed, "change feed lagged; resummarising with peer");
                        session.hello().await?;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
    .await;

    // What the peer sent that still waits is offered again in its next session.
    session.store.forget_waiting(session.origin);
    // Let queued frames go out, then close our half.
    drop(session);
    reader_task.abort();
    match tokio::time::timeout(Duration::from_secs(5), writer_task).await {
        // The peer may already be gone when we close: not an error of this session.
        Ok(Ok(Err(e))) => tracing::debug!(error = %e, "closing the stream failed"),
        Err(_) => tracing::warn!("session writer did not drain within 5 s"),
        _ => {}
    }
    result
}
