//! The numbered event stream that a hub's or node's API serves at `GET /events`: JSON
//! events, each numbered with a per-process sequence (`seq`, from 1, increasing by one)
//! and kept in a bounded ring ([`RING`] events) so a client that reconnects resumes after
//! the last `seq` it saw, with no gap and no duplicate. Readers take a [`Subscription`];
//! [`socket`] serves it as a WebSocket.
//!
//! Sources publish with [`EventRing::publish`]; the store's change feed is relayed by
//! [`EventRing::relay_documents`] (`documents`: id, kind and origin only, never content;
//! documents not yet verified are left out), and each server adds its own (the hub's
//! agent and devices, the events a node relays from its hub).
//!
//! Every relay runs in a `JoinSet` the ring owns ([`EventRing::spawn`]);
//! [`EventRing::shutdown`] stops them and ends every subscription. Never blocks a
//! publisher on a reader.

mod documents;
pub mod socket;

use std::{
    collections::VecDeque,
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use hearth_sync::DocId;
use serde_json::Value;
use tokio::{
    sync::{broadcast, watch},
    task::JoinSet,
};

/// Events kept for resuming.
pub const RING: usize = 10_000;
/// Events a subscriber may fall behind the live stream before it lags.
pub const LIVE_QUEUE: usize = 1024;

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

/// The numbered stream and the relays that feed it.
pub struct EventRing {
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<Event>>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Option<JoinSet<()>>>,
}

impl std::fmt::Debug for EventRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRing")
            .field("last", &self.last())
            .finish_non_exhaustive()
    }
}

impl Default for EventRing {
    fn default() -> Self {
        Self::new()
    }
}

/// What a [`Subscription`] yields next.
#[derive(Debug)]
pub enum Next {
    /// The next event, in order.
    Event(Arc<Event>),
    /// Events after `after` are no longer kept (or come from another run of the server):
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
    /// The server is shutting down.
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

impl EventRing {
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
    /// of an earlier run of the server), it first yields [`Next::Resync`] and goes on live.
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

    /// Runs `relay` until [`Self::shutdown`]: it should end once [`Self::stopping`]
    /// says so (it is aborted 2 s later otherwise). Ignored after shutdown began.
    pub fn spawn(&self, relay: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tasks) = tasks.as_mut() {
            tasks.spawn(relay);
        }
    }

    /// Completes once [`Self::shutdown`] began: relays select on it to stop.
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.stop.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// Stops the relays and ends every subscription.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner()).take();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seqs(sub: &mut Subscription) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(Next::Event(e)) = sub.try_next() {
            out.push(e.seq);
        }
        out
    }

    #[test]
    fn resuming_gives_each_event_once() {
        let hub = EventRing::new();
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
        let hub = EventRing::new();
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
        let hub = EventRing::new();
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
        let hub = EventRing::new();
        hub.publish(json!({ "type": "x", "a": 1 }), None);
        let mut sub = hub.subscribe(Some(0));
        let Some(Next::Event(e)) = sub.try_next() else {
            panic!("no event")
        };
        assert!(e.json.starts_with("{\"seq\":1,"), "{}", e.json);
    }
}
