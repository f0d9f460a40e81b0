//! The hub's one numbered event stream: document changes, chat turns (deltas, tool calls
//! and results, approvals) and device events, in the shared ring of
//! [`hearth_ui::events`] (numbered per hub, kept for resuming, served at `GET /events`
//! as on a node). Front ends (the API's WebSocket and `POST /chat`'s server-sent events)
//! read it through a [`Subscription`]; knows no HTTP.
//!
//! Sources:
//! - chat: the agent's sink ([`Agent::set_sink`]) publishes each event as it is emitted,
//!   already redacted, so the stream's order is the agent's order and a turn's events
//!   are all numbered before the turn returns;
//! - documents: the store's change feed, through the ring's shared relay (id, kind,
//!   origin, deleted; never content);
//! - devices: the registry, polled every second (paired, revoked, online, offline, and
//!   pairing requests).
//!
//! Every relay runs in the ring's `JoinSet`; [`EventHub::shutdown`] stops them and ends
//! every subscription.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use hearth_sync::{DocId, DocumentStore};
pub use hearth_ui::events::{ChatKey, Event, EventRing, Next, Subscription, LIVE_QUEUE, RING};
use serde_json::{json, Value};

use crate::{
    agent::runner::{Agent, AgentEvent},
    devices::DeviceRegistry,
};

/// How often the device registry is polled.
const DEVICE_POLL: Duration = Duration::from_secs(1);

/// The hub's numbered stream and its relays.
#[derive(Debug, Default)]
pub struct EventHub {
    ring: Arc<EventRing>,
}

impl EventHub {
    /// An empty stream with no relays yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared ring underneath (for the WebSocket route).
    pub fn ring(&self) -> &Arc<EventRing> {
        &self.ring
    }

    /// The number of the newest event (0 before the first).
    pub fn last(&self) -> u64 {
        self.ring.last()
    }

    /// Numbers `body` (a JSON object), keeps it and sends it to every subscriber.
    /// Never blocks on a subscriber.
    pub fn publish(&self, body: Value, chat: Option<ChatKey>) -> u64 {
        self.ring.publish(body, chat)
    }

    /// A reader from now on (`after: None`), or resuming after event `after` (see
    /// [`EventRing::subscribe`]).
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        self.ring.subscribe(after)
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
    pub fn start(&self, store: DocumentStore, registry: Arc<DeviceRegistry>) {
        self.ring.relay_documents(store);
        self.ring.spawn(relay_devices(self.ring.clone(), registry));
    }

    /// Stops the relays and ends every subscription.
    pub async fn shutdown(&self) {
        self.ring.shutdown().await;
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
async fn relay_devices(hub: Arc<EventRing>, registry: Arc<DeviceRegistry>) {
    let stopping = hub.stopping();
    tokio::pin!(stopping);
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
            _ = &mut stopping => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_numbers_chat_events_in_the_shared_ring() {
        let hub = EventHub::new();
        let project = DocId([7; 16]);
        hub.publish(json!({ "type": "x" }), None);
        hub.publish_turn_error(project, "web", "boom");
        let mut sub = hub.subscribe(Some(0));
        let Some(Next::Event(first)) = sub.try_next() else {
            panic!("no event")
        };
        assert_eq!((first.seq, first.chat.is_none()), (1, true));
        let Some(Next::Event(err)) = sub.try_next() else {
            panic!("no error event")
        };
        let key = err.chat.as_ref().expect("chat key");
        assert!(key.terminal && key.project == project && key.conversation == "web");
        assert!(err.json.starts_with("{\"seq\":2,"), "{}", err.json);
        assert_eq!(hub.last(), hub.ring().last());
    }
}
