//! Notifications: what the owner should hear about while away — a scheduled run's
//! result, a run that failed, an approval that waits, a task that fell due. Each one is
//! kept in `hub.db` (`notifications`, so a UI that was closed can list what it missed),
//! published on the hub's numbered event stream (`{type: "notification", …}`, which
//! connected UIs and nodes receive), and handed to every message channel that is
//! configured (Telegram), quietly during quiet hours.
//!
//! One way in: [`Notifier::notify`], for the scheduler, the agent's approvals and
//! whatever comes next. Never decides what is worth notifying (its callers do) and never
//! blocks its caller on a channel: deliveries run in a `JoinSet` this notifier owns and
//! stops at shutdown.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use hearth_sync::DocId;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::task::JoinSet;

use crate::{channels::Channel, events::EventHub, hubdb::now_ms};

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationKind {
    /// A scheduled run finished with an answer.
    RunFinished,
    /// A scheduled run failed (or was cut short).
    RunFailed,
    /// A tool call waits for the owner's approval.
    ApprovalWaiting,
    /// A person's task is due.
    TaskDue,
}

impl NotificationKind {
    /// The stored and published name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RunFinished => "run_finished",
            Self::RunFailed => "run_failed",
            Self::ApprovalWaiting => "approval_waiting",
            Self::TaskDue => "task_due",
        }
    }
}

/// What a notification points at, so a front end can link to it (and Telegram can put
/// approval buttons under it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationRefs {
    /// The schedule a run belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<i64>,
    /// The approval that waits (decided through the approvals API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// The conversation, within the notification's project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// One notification, before it is numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// What it is about.
    pub kind: NotificationKind,
    /// One line.
    pub title: String,
    /// The text (a run's answer, the tool and its arguments…), redacted by the caller.
    pub body: String,
    /// The project it belongs to (scoped devices see only their subtree's).
    pub project: Option<DocId>,
    /// What it points at.
    pub refs: NotificationRefs,
}

/// Why a notification could not be kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// `hub.db` failed.
    #[error("hub database: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` could not be opened.
    #[error(transparent)]
    Open(#[from] crate::hubdb::HubDbError),
    /// The blocking task running the query failed.
    #[error("notification task failed: {0}")]
    Task(String),
    /// The hub is stopping.
    #[error("the hub is shutting down")]
    ShuttingDown,
}

/// The hub's notifier.
pub struct Notifier {
    db: Arc<Mutex<Connection>>,
    events: Arc<EventHub>,
    channels: Mutex<Vec<Arc<dyn Channel>>>,
    deliveries: Mutex<Option<JoinSet<()>>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier keeping its rows in `hub_db` and publishing on `events`.
    pub fn open(hub_db: &Path, events: Arc<EventHub>) -> Result<Self, NotifyError> {
        let conn = crate::hubdb::open(hub_db, crate::hubdb::Durability::Normal)?;
        Ok(Self {
            db: Arc::new(Mutex::new(conn)),
            events,
            channels: Mutex::new(Vec::new()),
            deliveries: Mutex::new(Some(JoinSet::new())),
        })
    }

    /// Adds a channel that receives every notification from now on.
    pub fn add_channel(&self, channel: Arc<dyn Channel>) {
        if let Ok(mut c) = self.channels.lock() {
            c.retain(|old| old.name() != channel.name());
            c.push(channel);
        }
    }

    /// Keeps `n`, publishes it and hands it to every channel; answers its id.
    pub async fn notify(&self, n: Notification) -> Result<i64, NotifyError> {
        let quiet = false;
        let db = self.db.clone();
        let row = n.clone();
        let (id, created_at) = tokio::task::spawn_blocking(move || {
            let conn = match db.lock() {
                Ok(c) => c,
                Err(e) => e.into_inner(),
            };
            let created_at = now_ms();
            conn.execute(
                "INSERT INTO notifications (kind, title, body, project, refs, quiet, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    row.kind.as_str(),
                    row.title,
                    row.body,
                    row.project.map(|p| p.to_string()),
                    serde_json::to_string(&row.refs).unwrap_or_else(|_| "{}".into()),
                    quiet,
                    created_at
                ],
            )?;
            Ok::<_, NotifyError>((conn.last_insert_rowid(), created_at))
        })
        .await
        .map_err(|e| NotifyError::Task(e.to_string()))??;
        self.events.publish(
            json!({
                "type": "notification",
                "id": id,
                "kind": n.kind.as_str(),
                "title": n.title,
                "body": n.body,
                "project": n.project.map(|p| p.to_string()),
                "refs": n.refs,
                "quiet": quiet,
                "created_at": created_at,
            }),
            None,
        );
        let channels: Vec<Arc<dyn Channel>> = match self.channels.lock() {
            Ok(c) => c.clone(),
            Err(_) => Vec::new(),
        };
        if channels.is_empty() {
            return Ok(id);
        }
        let mut deliveries = self
            .deliveries
            .lock()
            .map_err(|_| NotifyError::ShuttingDown)?;
        let Some(set) = deliveries.as_mut() else {
            return Err(NotifyError::ShuttingDown);
        };
        while set.try_join_next().is_some() {}
        let n = Arc::new(n);
        for channel in channels {
            let n = n.clone();
            set.spawn(async move {
                if let Err(e) = channel.deliver(&n, quiet).await {
                    tracing::warn!(channel = channel.name(), error = %e, "notification not delivered");
                }
            });
        }
        Ok(id)
    }

    /// Stops deliveries still under way.
    pub async fn shutdown(&self) {
        let set = self.deliveries.lock().ok().and_then(|mut d| d.take());
        if let Some(mut set) = set {
            set.shutdown().await;
        }
    }
}
