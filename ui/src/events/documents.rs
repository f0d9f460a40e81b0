//! The relay of a store's change feed into an [`EventRing`]: one event per committed
//! change, `{"type": "document", "id", "kind", "origin": "local"|"peer"|"external",
//! "deleted"}` — never content. Kinds are looked up in batches off the async threads; a
//! document not yet verified has no kind to show and is left out. A lagging feed is
//! reported as `{"type": "lost", "source": "documents", "count"}`.

use std::{collections::HashMap, sync::Arc};

use hearth_sync::{DocChange, DocId, DocumentStore, Origin};
use serde_json::json;
use tokio::sync::broadcast;

use super::EventRing;

impl EventRing {
    /// Relays `store`'s change feed until shutdown.
    pub fn relay_documents(self: &Arc<Self>, store: DocumentStore) {
        let feed = store.subscribe();
        self.spawn(relay(self.clone(), store, feed));
    }
}

fn origin_str(o: &Origin) -> &'static str {
    match o {
        Origin::Local => "local",
        Origin::Peer(_) => "peer",
        Origin::External => "external",
    }
}

/// The relay's loop: a batch of changes, their kinds, one event each.
async fn relay(
    hub: Arc<EventRing>,
    store: DocumentStore,
    mut feed: broadcast::Receiver<DocChange>,
) {
    let stopping = hub.stopping();
    tokio::pin!(stopping);
    use broadcast::error::{RecvError, TryRecvError};
    loop {
        let first = tokio::select! {
            got = feed.recv() => got,
            _ = &mut stopping => return,
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
