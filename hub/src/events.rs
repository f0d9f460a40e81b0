//! The hub's one numbered event stream: document changes, chat turns (deltas, tool calls
//! and results, approvals) and device events, each numbered with a per-hub sequence
//! (`seq`, from 1, increasing by one) and kept in a bounded ring ([`RING`] events) so a
//! client that reconnects resumes after the last `seq` it saw, with no gap and no
//! duplicate. Front ends (the API's WebSocket and `POST /chat`'s server-sent events)
//! read it through a [`Subscription`]; knows no HTTP.
//!
//! Sources:
//! - chat: the agent's sink ([`Agent::set_sink`]) publishes each event as it is emitted,
//!   already redacted, so the stream's order is the agent's order and a turn's events
//!   are all numbered before the turn returns;
//! - documents: the store's change feed, as `{id, kind, origin, deleted}` only (never
//!   content; documents not yet verified are left out);
//! - devices: the registry, polled every second (paired, revoked, online, offline, and
//!   pairing requests).
//!
//! Every relay runs in a `JoinSet` this module owns; [`EventHub::shutdown`] stops them and
//! ends every subscription.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use hearth_sync::{DocChange, DocId, DocumentStore, Origin};
use serde_json::{json, Value};
use tokio::{
    sync::{broadcast, watch},
    task::JoinSet,
};

use crate::{
    agent::runner::{Agent, AgentEvent},
    devices::DeviceRegistry,
};

/// Events kept for resuming.
pub const RING: usize = 10_000;
/// Events a subscriber may fall behind the live stream before it lags.
pub const LIVE_QUEUE: usize = 1024;
/// How often the device registry is polled.
const DEVICE_POLL: Duration = Duration::from_secs(1);

/// The conversation a chat event belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatKey {
    /// Project.
    pub project: DocId,
    /// Conversation.
    pub conversation: String,
    /// Whether the event ends a turn's stream (`finished` or `error`).
    pub terminal: bool,
}

/// One numbered event.
#[derive(Debug)]
pub struct Event {
    /// Its sequence number.
    pub seq: u64,
    /// The conversation, for chat events.
    pub chat: Option<ChatKey>,
    /// The JSON object, `seq` first, serialized once.
    pub json: Arc<str>,
}

struct Ring {
    next: u64,
    buf: VecDeque<Arc<Event>>,
}

/// The numbered stream and its relays.
pub struct EventHub {
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<Event>>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Option<JoinSet<()>>>,
}

impl std::fmt::Debug for EventHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventHub")
            .field("last", &self.last())
            .finish_non_exhaustive()
    }
}

impl Default for EventHub {
    fn default() -> Self {
        Self::new()
    }
}

/// What a [`Subscription`] yields next.
#[derive(Debug)]
pub enum Next {
    /// The next event, in order.
    Event(Arc<Event>),
    /// Events after `after` are no longer kept (or come from another run of the hub):
    /// reload state, then go on; the following events come after `after`.
    Resync {
        /// The last event number the stream skipped to.
        after: u64,
    },
    /// The subscriber fell more than [`LIVE_QUEUE`] events behind.
    Lagged {
        /// The last event it was given.
        last: u64,
    },
    /// The hub is shutting down.
    Closed,
}

/// One reader's position in the stream.
pub struct Subscription {
    backlog: VecDeque<Arc<Event>>,
    resync: Option<u64>,
    rx: broadcast::Receiver<Arc<Event>>,
    last: u64,
    stop: watch::Receiver<bool>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// The last event number given out (or skipped to).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The next event; cancel-safe (nothing is lost if the future is dropped).
    pub async fn next(&mut self) -> Next {
        if let Some(after) = self.resync.take() {
            return Next::Resync { after };
        }
        if let Some(ev) = self.backlog.pop_front() {
            self.last = ev.seq;
            return Next::Event(ev);
        }
        loop {
            if *self.stop.borrow() {
                return Next::Closed;
            }
            tokio::select! {
                got = self.rx.recv() => match got {
                    Ok(ev) if ev.seq <= self.last => continue,
                    Ok(ev) => {
                        self.last = ev.seq;
                        return Next::Event(ev);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        return Next::Lagged { last: self.last }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Next::Closed,
                },
                _ = self.stop.wait_for(|s| *s) => return Next::Closed,
            }
        }
    }

    /// The next event without waiting, if one is queued.
    pub fn try_next(&mut self) -> Option<Next> {
        if let Some(after) = self.resync.take() {
            return Some(Next::Resync { after });
        }
        if let Some(ev) = self.backlog.pop_front() {
            self.last = ev.seq;
            return Some(Next::Event(ev));
        }
        loop {
            match self.rx.try_recv() {
                Ok(ev) if ev.seq <= self.last => continue,
                Ok(ev) => {
                    self.last = ev.seq;
                    return Some(Next::Event(ev));
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    return Some(Next::Lagged { last: self.last })
                }
                Err(_) => return None,
            }
        }
    }
}

fn origin_str(o: &Origin) -> &'static str {
    match o {
        Origin::Local => "local",
        Origin::Peer(_) => "peer",
        Origin::External => "external",
    }
}

impl EventHub {
    /// An empty stream with no relays yet.
    pub fn new() -> Self {
        let (live, _) = broadcast::channel(LIVE_QUEUE);
        let (stop, _) = watch::channel(false);
        Self {
            ring: Mutex::new(Ring {
                next: 1,
                buf: VecDeque::new(),
            }),
            live,
            stop,
            tasks: Mutex::new(Some(JoinSet::new())),
        }
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of the newest event (0 before the first).
    pub fn last(&self) -> u64 {
        self.ring().next - 1
    }

    /// Numbers `body` (a JSON object), keeps it and sends it to every subscriber.
    /// Never blocks on a subscriber.
    pub fn publish(&self, body: Value, chat: Option<ChatKey>) -> u64 {
        let body = match body {
            Value::Object(fields) if !fields.is_empty() => Value::Object(fields).to_string(),
            _ => "{}".to_string(),
        };
        // `{"seq":N,` then the body's fields: the number comes first.
        let fields = body.strip_prefix('{').unwrap_or("}");
        let mut ring = self.ring();
        let seq = ring.next;
        ring.next += 1;
        let sep = if fields == "}" { "" } else { "," };
        let ev = Arc::new(Event {
            seq,
            chat,
            json: format!("{{\"seq\":{seq}{sep}{fields}").into(),
        });
        if ring.buf.len() >= RING {
            ring.buf.pop_front();
        }
        ring.buf.push_back(ev.clone());
        // Sent under the ring's lock, so a subscriber that joins sees each event once:
        // either in the backlog it copied or live, never both, never neither.
        let _ = self.live.send(ev);
        seq
    }

    /// A reader from now on (`after: None`), or resuming after event `after`. If events
    /// after `after` are no longer kept, or `after` is beyond the newest event (a client
    /// of an earlier run of the hub), it first yields [`Next::Resync`] and goes on live.
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        let ring = self.ring();
        let rx = self.live.subscribe();
        let newest = ring.next - 1;
        let oldest = ring.buf.front().map_or(ring.next, |e| e.seq);
        let (backlog, resync, last) = match after {
            None => (VecDeque::new(), None, newest),
            Some(a) if a > newest || a.saturating_add(1) < oldest => {
                (VecDeque::new(), Some(newest), newest)
            }
            Some(a) => {
                let skip = usize::try_from(a + 1 - oldest).unwrap_or(usize::MAX);
                (ring.buf.iter().skip(skip).cloned().collect(), None, a)
            }
        };
        drop(ring);
        Subscription {
            backlog,
            resync,
            rx,
            last,
            stop: self.stop.subscribe(),
        }
    }

    /// Publishes a chat event (already redacted by the agent).
    pub fn publish_chat(&self, ev: &AgentEvent) {
        let key = ChatKey {
            project: ev.project(),
            conversation: ev.conversation().to_string(),
            terminal: matches!(ev, AgentEvent::Finished { .. }),
        };
        self.publish(crate::chat::event_json(ev), Some(key));
    }

    /// Publishes that a turn of `project`/`conversation` failed with `message` (redact
    /// it first).
    pub fn publish_turn_error(&self, project: DocId, conversation: &str, message: &str) {
        self.publish(
            json!({ "type": "error", "message": message,
                    "project": project.to_string(), "conversation": conversation }),
            Some(ChatKey {
                project,
                conversation: conversation.to_string(),
                terminal: true,
            }),
        );
    }

    /// Publishes every event of `agent` as it is emitted.
    pub fn hook_agent(self: &Arc<Self>, agent: &Agent) {
        let me = self.clone();
        agent.set_sink(Arc::new(move |ev| me.publish_chat(ev)));
    }

    /// Starts the relays of the store's change feed and the device registry.
    pub fn start(self: &Arc<Self>, store: DocumentStore, registry: Arc<DeviceRegistry>) {
        let Ok(mut tasks) = self.tasks.lock() else {
            return;
        };
        let Some(tasks) = tasks.as_mut() else { return };
        tasks.spawn(relay_documents(
            self.clone(),
            store.clone(),
            store.subscribe(),
            self.stop.subscribe(),
        ));
        tasks.spawn(relay_devices(self.clone(), registry, self.stop.subscribe()));
    }

    /// Stops the relays and ends every subscription.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let tasks = self.tasks.lock().ok().and_then(|mut t| t.take());
        if let Some(mut tasks) = tasks {
            let drained = tokio::time::timeout(Duration::from_secs(2), async {
                while tasks.join_next().await.is_some() {}
            })
            .await;
            if drained.is_err() {
                tasks.shutdown().await;
            }
        }
    }
}

/// Relays the store's change feed: `{type: "document", id, kind, origin, deleted}`,
/// looked up in batches off the async threads. A lagging feed is reported as
/// `{type: "lost", source: "documents", count}`.
async fn relay_documents(
    hub: Arc<EventHub>,
    store: DocumentStore,
    mut feed: broadcast::Receiver<DocChange>,
    mut stop: watch::Receiver<bool>,
) {
    use broadcast::error::{RecvError, TryRecvError};
    loop {
        let first = tokio::select! {
            got = feed.recv() => got,
            _ = stop.wait_for(|s| *s) => return,
        };
        let mut batch = Vec::new();
        match first {
            Ok(c) => batch.push(c),
            Err(RecvError::Lagged(n)) => {
                hub.publish(
                    json!({ "type": "lost", "source": "documents", "count": n }),
                    None,
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        }
        while batch.len() < 512 {
            match feed.try_recv() {
                Ok(c) => batch.push(c),
                Err(TryRecvError::Lagged(n)) => {
                    hub.publish(
                        json!({ "type": "lost", "source": "documents", "count": n }),
                        None,
                    );
                }
                Err(_) => break,
            }
        }
        let ids: Vec<DocId> = batch.iter().map(|c| c.id).collect();
        let s = store.clone();
        let kinds = tokio::task::spawn_blocking(move || s.kinds_blocking(&ids)).await;
        let kinds: HashMap<DocId, (hearth_sync::Kind, bool)> = match kinds {
            Ok(Ok(k)) => k.into_iter().map(|(id, k, d)| (id, (k, d))).collect(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read the kinds of changed documents");
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "document kind lookup panicked");
                continue;
            }
        };
        for c in batch {
            if let Some((kind, deleted)) = kinds.get(&c.id) {
                hub.publish(
                    json!({ "type": "document", "id": c.id.to_string(), "kind": kind.as_str(),
                            "origin": origin_str(&c.origin), "deleted": deleted }),
                    None,
                );
            }
        }
    }
}

/// What the device poll remembers of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    name: String,
    revoked: bool,
    online: bool,
}

/// Polls the registry every second: `{type: "device", event: "paired" | "revoked" |
/// "online" | "offline", id, name}` and `{type: "device", event: "pair_requested", id,
/// name, code}`. The first poll only records the state.
async fn relay_devices(
    hub: Arc<EventHub>,
    registry: Arc<DeviceRegistry>,
    mut stop: watch::Receiver<bool>,
) {
    let mut known: Option<(HashMap<String, Seen>, HashSet<String>)> = None;
    loop {
        let reg = registry.clone();
        let now = tokio::task::spawn_blocking(move || {
            let devices = reg.list()?;
            let pending = reg.pending()?;
            Ok::<_, crate::devices::DeviceError>((devices, pending))
        })
        .await;
        match now {
            Ok(Ok((devices, pending))) => {
                let devices: HashMap<String, Seen> = devices
                    .into_iter()
                    .map(|d| {
                        (
                            d.node_id,
                            Seen {
                                name: d.name,
                                revoked: d.revoked_at.is_some(),
                                online: d.online,
                            },
                        )
                    })
                    .collect();
                let codes: HashSet<String> = pending.iter().map(|p| p.code.clone()).collect();
                if let Some((before, before_codes)) = &known {
                    for (id, d) in &devices {
                        let old = before.get(id);
                        let say = |event: &str| {
                            hub.publish(
                                json!({ "type": "device", "event": event, "id": id, "name": d.name }),
                                None,
                            );
                        };
                        if old.is_none_or(|o| o.revoked) && !d.revoked {
                            say("paired");
                        }
                        if d.revoked && !old.is_some_and(|o| o.revoked) {
                            say("revoked");
                        }
                        let was_online = old.is_some_and(|o| o.online);
                        if d.online != was_online {
                            say(if d.online { "online" } else { "offline" });
                        }
                    }
                    for p in pending.iter().filter(|p| !before_codes.contains(&p.code)) {
                        hub.publish(
                            json!({ "type": "device", "event": "pair_requested", "id": p.node_id,
                                    "name": p.device_name, "code": p.code }),
                            None,
                        );
                    }
                }
                known = Some((devices, codes));
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot poll the device registry"),
            Err(e) => tracing::warn!(error = %e, "device poll panicked"),
        }
        tokio::select! {
            _ = tokio::time::sleep(DEVICE_POLL) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(sub: &mut Subscription) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(Next::Event(e)) = sub.try_next() {
            out.push(e.seq);
        }
        out
    }

    #[test]
    fn resuming_gives_each_event_once() {
        let hub = EventHub::new();
        for _ in 0..5 {
            hub.publish(json!({ "type": "x" }), None);
        }
        let mut sub = hub.subscribe(Some(2));
        hub.publish(json!({ "type": "x" }), None);
        assert_eq!(seqs(&mut sub), vec![3, 4, 5, 6]);
        let mut live = hub.subscribe(None);
        hub.publish(json!({ "type": "x" }), None);
        assert_eq!(seqs(&mut live), vec![7]);
        let mut all = hub.subscribe(Some(0));
        assert_eq!(seqs(&mut all), (1..=7).collect::<Vec<_>>());
    }

    #[test]
    fn a_gap_older_than_the_ring_or_from_another_run_is_a_resync() {
        let hub = EventHub::new();
        for _ in 0..RING + 10 {
            hub.publish(json!({ "type": "x" }), None);
        }
        let newest = hub.last();
        let mut old = hub.subscribe(Some(3));
        assert!(matches!(old.try_next(), Some(Next::Resync { after }) if after == newest));
        let mut future = hub.subscribe(Some(newest + 100));
        assert!(matches!(future.try_next(), Some(Next::Resync { .. })));
        let mut edge = hub.subscribe(Some(10));
        assert!(matches!(edge.try_next(), Some(Next::Event(e)) if e.seq == 11));
    }

    #[test]
    fn a_subscriber_that_falls_behind_is_told_where_it_stopped() {
        let hub = EventHub::new();
        let mut slow = hub.subscribe(None);
        hub.publish(json!({ "type": "x" }), None);
        assert!(matches!(slow.try_next(), Some(Next::Event(e)) if e.seq == 1));
        for _ in 0..LIVE_QUEUE + 10 {
            hub.publish(json!({ "type": "x" }), None);
        }
        assert!(matches!(slow.try_next(), Some(Next::Lagged { last: 1 })));
        // It resumes from the ring where it stopped.
        let mut again = hub.subscribe(Some(1));
        assert_eq!(seqs(&mut again).len(), LIVE_QUEUE + 10);
    }

    #[test]
    fn an_event_starts_with_its_number() {
        let hub = EventHub::new();
        hub.publish(json!({ "type": "x", "a": 1 }), None);
        let mut sub = hub.subscribe(Some(0));
        let Some(Next::Event(e)) = sub.try_next() else {
            panic!("no event")
        };
        assert!(e.json.starts_with("{\"seq\":1,"), "{}", e.json);
    }
}
