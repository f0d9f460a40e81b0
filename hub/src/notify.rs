//! Notifications: what the owner should hear about while away — a scheduled run's
//! result, a run that failed, an approval that waits, a task that fell due. Each one is
//! kept in `hub.db` (`notifications`, so a UI that was closed can list what it missed),
//! published on the hub's numbered event stream (`{type: "notification", …}`, which
//! connected UIs and nodes receive), and handed to every message channel that is
//! configured (Telegram), quietly during the owner's quiet hours (the runtime setting
//! `quiet_hours`, in the hub's zone `timezone`; a quiet one is still kept and published,
//! flagged `quiet`, so UIs list it without a toast).
//!
//! Owns: [`Notifier::notify`], the one way in (for the scheduler, the agent's approvals
//! and whatever comes next); the watcher that turns an approval asked for in a scheduled
//! run (a conversation named `schedule-…`) into an `approval_waiting` notification;
//! and [`NotificationStore`], the read side (list, count unread, mark read) for the API,
//! always within an [`Audience`] so that a device scoped to a project never sees another
//! subtree's notification (nor one tied to no project).
//!
//! Never decides what else is worth notifying (its callers do) and never blocks its
//! caller on a channel: deliveries run in a `JoinSet` this notifier owns and stops at
//! shutdown, with the approval watcher.

use std::{
    path::Path,
    sync::{Arc, Mutex, MutexGuard, Weak},
};

use chrono::Timelike;
use hearth_sync::DocId;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::{
    sync::{broadcast, watch},
    task::{JoinHandle, JoinSet},
};

use crate::{
    agent::runner::AgentEvent,
    channels::Channel,
    events::EventHub,
    hubdb::now_ms,
    settings::{RuntimeSettings, RuntimeStore},
};

/// The longest body a notification carries (a run's answer, a call's arguments), in
/// characters; the rest is cut with an ellipsis.
pub const MAX_BODY_CHARS: usize = 2_000;

/// The conversation prefix of scheduled runs (`schedule-<schedule id>-<run id>`).
pub const SCHEDULED_PREFIX: &str = "schedule-";

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

/// Why a notification could not be kept or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// `hub.db` failed.
    #[error("hub database: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` could not be opened.
    #[error(transparent)]
    Open(#[from] crate::hubdb::HubDbError),
    /// The runtime settings (quiet hours) could not be opened.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// The blocking task running the query failed.
    #[error("notification task failed: {0}")]
    Task(String),
    /// The hub is stopping.
    #[error("the hub is shutting down")]
    ShuttingDown,
}

/// Reads the wall clock, in ms since the epoch; tests inject a fixed one.
pub type WallClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Whether a notification made at `at_ms` falls in the quiet hours of `settings` (their
/// times are in the hub's zone, daylight saving included).
pub fn is_quiet(settings: &RuntimeSettings, at_ms: i64) -> bool {
    let Some(quiet) = &settings.quiet_hours else {
        return false;
    };
    let Some(utc) = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at_ms) else {
        return false;
    };
    let local = utc.with_timezone(&settings.tz());
    quiet.contains(local.hour() * 60 + local.minute())
}

/// `text` cut to [`MAX_BODY_CHARS`] characters.
pub fn cut_body(text: &str) -> String {
    match text.char_indices().nth(MAX_BODY_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The notification for an agent event, if it is one: an approval asked for in a
/// scheduled run waits for the owner, who is probably not watching that conversation.
/// (Interactive conversations show their own approvals; a Telegram chat puts them under
/// its messages.)
pub fn approval_notification(ev: &AgentEvent) -> Option<Notification> {
    let AgentEvent::ApprovalRequested {
        id,
        project,
        channel,
        name,
        args,
    } = ev
    else {
        return None;
    };
    let rest = channel.strip_prefix(SCHEDULED_PREFIX)?;
    // `<schedule id>-<run id>`: a schedule id may hold dashes (`task-…`), a run id not.
    let (schedule, run) = match rest.rsplit_once('-') {
        Some((s, r)) if !s.is_empty() => match r.parse::<i64>() {
            Ok(run) => (Some(s.to_string()), Some(run)),
            Err(_) => (None, None),
        },
        _ => (None, None),
    };
    let body = serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string());
    Some(Notification {
        kind: NotificationKind::ApprovalWaiting,
        title: format!("Approval needed: {name}"),
        body: cut_body(&body),
        project: Some(*project),
        refs: NotificationRefs {
            schedule,
            run,
            approval: Some(id.clone()),
            conversation: Some(channel.clone()),
            task: None,
        },
    })
}

/// The hub's notifier.
pub struct Notifier {
    store: NotificationStore,
    runtime: Arc<RuntimeStore>,
    events: Arc<EventHub>,
    clock: WallClock,
    channels: Mutex<Vec<Arc<dyn Channel>>>,
    deliveries: Mutex<Option<JoinSet<()>>>,
    watcher: Mutex<Option<(watch::Sender<bool>, JoinHandle<()>)>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier keeping its rows in `hub_db`, reading quiet hours from its runtime
    /// settings, and publishing on `events`.
    pub fn open(hub_db: &Path, events: Arc<EventHub>) -> Result<Self, NotifyError> {
        Ok(Self {
            store: NotificationStore::open(hub_db)?,
            runtime: Arc::new(RuntimeStore::open(hub_db)?),
            events,
            clock: Arc::new(now_ms),
            channels: Mutex::new(Vec::new()),
            deliveries: Mutex::new(Some(JoinSet::new())),
            watcher: Mutex::new(None),
        })
    }

    /// The same notifier reading the time from `clock` (tests).
    pub fn with_clock(mut self, clock: WallClock) -> Self {
        self.clock = clock;
        self
    }

    /// The stored notifications, for the API.
    pub fn store(&self) -> &NotificationStore {
        &self.store
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
        let store = self.store.clone();
        let runtime = self.runtime.clone();
        let created_at = (self.clock)();
        let row = n.clone();
        let (id, quiet) = tokio::task::spawn_blocking(move || {
            // Read at each notification: a change of quiet hours applies at once.
            let quiet = match runtime.load() {
                Ok(s) => is_quiet(&s, created_at),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read quiet hours; notifying aloud");
                    false
                }
            };
            Ok::<_, NotifyError>((store.insert(&row, quiet, created_at)?, quiet))
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

    /// Marks `which` of `audience`'s notifications read now; answers how many changed
    /// and how many of the audience's stay unread. When some changed, publishes
    /// `{type: "notifications_read", marked}` so that other open UIs recount (it names
    /// no notification and no project: full-scope readers only, as any event tied to
    /// no project).
    pub async fn mark_read(
        &self,
        audience: Audience,
        which: MarkRead,
    ) -> Result<(u64, u64), NotifyError> {
        let store = self.store.clone();
        let at = (self.clock)();
        let (marked, unread) = tokio::task::spawn_blocking(move || {
            let marked = store.mark_read(&audience, &which, at)?;
            Ok::<_, NotifyError>((marked, store.unread(&audience)?))
        })
        .await
        .map_err(|e| NotifyError::Task(e.to_string()))??;
        if marked > 0 {
            self.events.publish(
                json!({ "type": "notifications_read", "marked": marked }),
                None,
            );
        }
        Ok((marked, unread))
    }

    /// Follows the agent's events (`Agent::subscribe`) until shutdown, notifying each
    /// approval a scheduled run waits for ([`approval_notification`]).
    pub fn follow_agent(self: &Arc<Self>, mut events: broadcast::Receiver<AgentEvent>) {
        let (stop, mut stopped) = watch::channel(false);
        let me: Weak<Self> = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    _ = stopped.changed() => return,
                    ev = events.recv() => ev,
                };
                match ev {
                    Ok(ev) => {
                        let Some(n) = approval_notification(&ev) else {
                            continue;
                        };
                        let Some(me) = me.upgrade() else { return };
                        if let Err(e) = me.notify(n).await {
                            tracing::warn!(error = %e, "cannot notify a waiting approval");
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "the notifier fell behind the agent's events");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        let old = self
            .watcher
            .lock()
            .ok()
            .and_then(|mut w| w.replace((stop, task)));
        if let Some((stop, task)) = old {
            let _ = stop.send(true);
            task.abort();
        }
    }

    /// Stops the approval watcher and the deliveries still under way.
    pub async fn shutdown(&self) {
        let watcher = self.watcher.lock().ok().and_then(|mut w| w.take());
        if let Some((stop, task)) = watcher {
            let _ = stop.send(true);
            let _ = task.await;
        }
        let set = self.deliveries.lock().ok().and_then(|mut d| d.take());
        if let Some(mut set) = set {
            set.shutdown().await;
        }
    }
}

/// Whose notifications a reader sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// Every notification (the owner, a full-scope device).
    Everyone,
    /// Those of these projects only (a scoped device's subtree): never one tied to no
    /// project.
    Projects(Vec<DocId>),
}

impl Audience {
    /// The `json_each` array of the projects, or NULL for everyone.
    fn sql(&self) -> Option<String> {
        match self {
            Audience::Everyone => None,
            Audience::Projects(p) => Some(
                serde_json::to_string(&p.iter().map(ToString::to_string).collect::<Vec<_>>())
                    .unwrap_or_else(|_| "[]".into()),
            ),
        }
    }
}

/// Which notifications to mark read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkRead {
    /// These ids (those outside the audience, or already read, are left as they are).
    Ids(Vec<i64>),
    /// Every unread one of the audience.
    All,
}

/// A kept notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredNotification {
    /// Its number (the order they were made in).
    pub id: i64,
    /// `run_finished`, `run_failed`, `approval_waiting`, `task_due`.
    pub kind: String,
    /// One line.
    pub title: String,
    /// The text.
    pub body: String,
    /// Its project's id.
    pub project: Option<String>,
    /// What it points at.
    pub refs: NotificationRefs,
    /// Made during quiet hours.
    pub quiet: bool,
    /// When it was made (ms).
    pub created_at: i64,
    /// When it was marked read (ms).
    pub read_at: Option<i64>,
}

/// One page of notifications, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationList {
    /// The page.
    pub rows: Vec<StoredNotification>,
    /// How many the whole listing has.
    pub total: u64,
    /// How many of the audience's are unread (whatever the listing's filter).
    pub unread: u64,
}

/// The `notifications` table (reads, marks, and the notifier's inserts).
#[derive(Debug, Clone)]
pub struct NotificationStore {
    db: Arc<Mutex<Connection>>,
}

// `?1` is the audience: NULL (everyone) or a JSON array of project ids.
const AUDIENCE: &str = "(?1 IS NULL OR project IN (SELECT value FROM json_each(?1)))";

impl NotificationStore {
    /// Opens the table in `hub_db`.
    pub fn open(hub_db: &Path) -> Result<Self, NotifyError> {
        let conn = crate::hubdb::open(hub_db, crate::hubdb::Durability::Normal)?;
        Ok(Self {
            db: Arc::new(Mutex::new(conn)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, n: &Notification, quiet: bool, at: i64) -> Result<i64, NotifyError> {
        let conn = self.lock();
        conn.execute(
            "INSERT INTO notifications (kind, title, body, project, refs, quiet, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                n.kind.as_str(),
                n.title,
                n.body,
                n.project.map(|p| p.to_string()),
                serde_json::to_string(&n.refs).unwrap_or_else(|_| "{}".into()),
                quiet,
                at
            ],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// A page of `audience`'s notifications, newest first; `unread_only` leaves out the
    /// read ones. Blocking.
    pub fn list(
        &self,
        audience: &Audience,
        unread_only: bool,
        limit: u32,
        offset: u32,
    ) -> Result<NotificationList, NotifyError> {
        let who = audience.sql();
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id, kind, title, body, project, refs, quiet, created_at, read_at
             FROM notifications WHERE {AUDIENCE} AND (?2 = 0 OR read_at IS NULL)
             ORDER BY id DESC LIMIT ?3 OFFSET ?4"
        ))?;
        let rows = stmt
            .query_map(params![who, unread_only, limit, offset], |r| {
                let refs: String = r.get(5)?;
                Ok(StoredNotification {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    title: r.get(2)?,
                    body: r.get(3)?,
                    project: r.get(4)?,
                    // Written by this module from the struct: a row it cannot read
                    // back still lists, pointing nowhere.
                    refs: serde_json::from_str(&refs).unwrap_or_default(),
                    quiet: r.get(6)?,
                    created_at: r.get(7)?,
                    read_at: r.get(8)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let total: i64 = conn.query_row(
            &format!(
                "SELECT COUNT(*) FROM notifications WHERE {AUDIENCE} AND (?2 = 0 OR read_at IS NULL)"
            ),
            params![who, unread_only],
            |r| r.get(0),
        )?;
        let unread = Self::count_unread(&conn, who.as_deref())?;
        Ok(NotificationList {
            rows,
            total: total.max(0) as u64,
            unread,
        })
    }

    fn count_unread(conn: &Connection, who: Option<&str>) -> Result<u64, NotifyError> {
        let n: i64 = conn.query_row(
            &format!("SELECT COUNT(*) FROM notifications WHERE {AUDIENCE} AND read_at IS NULL"),
            params![who],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }

    /// How many of `audience`'s notifications are unread. Blocking.
    pub fn unread(&self, audience: &Audience) -> Result<u64, NotifyError> {
        Self::count_unread(&self.lock(), audience.sql().as_deref())
    }

    /// Marks `which` of `audience`'s notifications read at `at`; answers how many
    /// changed (ids outside the audience change nothing). Blocking.
    pub fn mark_read(
        &self,
        audience: &Audience,
        which: &MarkRead,
        at: i64,
    ) -> Result<u64, NotifyError> {
        let ids = match which {
            MarkRead::All => None,
            MarkRead::Ids(ids) => Some(serde_json::to_string(ids).unwrap_or_else(|_| "[]".into())),
        };
        let changed = self.lock().execute(
            &format!(
                "UPDATE notifications SET read_at = ?3
                 WHERE read_at IS NULL AND {AUDIENCE}
                   AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))"
            ),
            params![audience.sql(), ids, at],
        )?;
        Ok(changed as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        channels::ChannelError,
        events::Next,
        settings::{QuietHours, RuntimePatch},
    };
    use futures_util::future::BoxFuture;

    /// 2026-01-15 22:30 UTC: 23:30 in Paris (winter, UTC+1).
    const PARIS_2330: i64 = 1_768_516_200_000;
    /// 2026-01-15 11:00 UTC: noon in Paris.
    const PARIS_NOON: i64 = 1_768_474_800_000;

    /// Records what each delivery was told.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, bool)>>);

    impl Channel for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn deliver<'a>(
            &'a self,
            n: &'a Notification,
            quiet: bool,
        ) -> BoxFuture<'a, Result<(), ChannelError>> {
            Box::pin(async move {
                if let Ok(mut seen) = self.0.lock() {
                    seen.push((n.title.clone(), quiet));
                }
                Ok(())
            })
        }
    }

    fn paris_nights(hub_db: &Path) {
        RuntimeStore::open(hub_db)
            .expect("runtime")
            .update(RuntimePatch {
                timezone: Some("Europe/Paris".into()),
                quiet_hours: Some(Some(QuietHours {
                    start: "22:00".into(),
                    end: "07:00".into(),
                })),
                ..RuntimePatch::default()
            })
            .expect("settings");
    }

    fn note(title: &str, project: Option<DocId>) -> Notification {
        Notification {
            kind: NotificationKind::RunFinished,
            title: title.into(),
            body: "done".into(),
            project,
            refs: NotificationRefs {
                run: Some(3),
                ..NotificationRefs::default()
            },
        }
    }

    #[test]
    fn quiet_hours_are_read_in_the_hubs_zone() {
        let mut s = RuntimeSettings {
            timezone: "Europe/Paris".into(),
            quiet_hours: Some(QuietHours {
                start: "22:00".into(),
                end: "07:00".into(),
            }),
            ..RuntimeSettings::default()
        };
        assert!(is_quiet(&s, PARIS_2330), "23:30 in Paris is quiet");
        assert!(!is_quiet(&s, PARIS_NOON), "noon is not");
        // The same instant is 22:30 in London: quiet there too; 17:30 in New York: not.
        s.timezone = "America/New_York".into();
        assert!(!is_quiet(&s, PARIS_2330));
        // Summer time: 2026-07-15 05:30 UTC is 07:30 in Paris (UTC+2), past the end.
        s.timezone = "Europe/Paris".into();
        assert!(!is_quiet(&s, 1_784_093_400_000));
        // 04:30 UTC is 06:30 in Paris: still quiet.
        assert!(is_quiet(&s, 1_784_089_800_000));
        s.quiet_hours = None;
        assert!(!is_quiet(&s, PARIS_2330), "no quiet hours, never quiet");
    }

    #[tokio::test]
    async fn a_notification_in_quiet_hours_is_kept_published_and_delivered_quietly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hub_db = dir.path().join("hub.db");
        paris_nights(&hub_db);
        let events = Arc::new(EventHub::new());
        let now = Arc::new(std::sync::atomic::AtomicI64::new(PARIS_2330));
        let clock = now.clone();
        let notifier = Notifier::open(&hub_db, events.clone())
            .expect("notifier")
            .with_clock(Arc::new(move || {
                clock.load(std::sync::atomic::Ordering::SeqCst)
            }));
        let recorder = Arc::new(Recorder::default());
        notifier.add_channel(recorder.clone());
        let mut sub = events.subscribe(None);

        let night = notifier
            .notify(note("at night", None))
            .await
            .expect("night");
        now.store(PARIS_NOON, std::sync::atomic::Ordering::SeqCst);
        let day = notifier.notify(note("at noon", None)).await.expect("noon");
        assert!(day > night);

        for (title, quiet, at) in [
            ("at night", true, PARIS_2330),
            ("at noon", false, PARIS_NOON),
        ] {
            let Some(Next::Event(ev)) = sub.try_next() else {
                panic!("no event for {title}")
            };
            let v: serde_json::Value = serde_json::from_str(&ev.json).expect("json");
            assert_eq!(
                (
                    v["type"].as_str(),
                    v["title"].as_str(),
                    v["quiet"].as_bool()
                ),
                (Some("notification"), Some(title), Some(quiet)),
                "{v}"
            );
            assert_eq!(v["created_at"].as_i64(), Some(at));
            assert_eq!(v["refs"]["run"].as_i64(), Some(3));
        }
        let mut delivered = Vec::new();
        for _ in 0..200 {
            delivered = recorder.0.lock().expect("lock").clone();
            if delivered.len() == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        notifier.shutdown().await;
        assert_eq!(
            delivered,
            vec![
                ("at night".to_string(), true),
                ("at noon".to_string(), false)
            ]
        );
        let list = notifier
            .store()
            .list(&Audience::Everyone, false, 10, 0)
            .expect("list");
        let kept: Vec<(&str, bool)> = list
            .rows
            .iter()
            .map(|r| (r.title.as_str(), r.quiet))
            .collect();
        assert_eq!(
            kept,
            [("at noon", false), ("at night", true)],
            "newest first"
        );
        assert!(matches!(
            notifier.notify(note("late", None)).await,
            Err(NotifyError::ShuttingDown)
        ));
    }

    #[tokio::test]
    async fn the_read_side_filters_pages_counts_and_marks_within_an_audience() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hub_db = dir.path().join("hub.db");
        let notifier = Notifier::open(&hub_db, Arc::new(EventHub::new())).expect("notifier");
        let (work, home) = (DocId::random(), DocId::random());
        let mut ids = Vec::new();
        for (title, project) in [
            ("w1", Some(work)),
            ("h1", Some(home)),
            ("none", None),
            ("w2", Some(work)),
        ] {
            ids.push(notifier.notify(note(title, project)).await.expect("notify"));
        }
        let store = notifier.store();
        let everyone = Audience::Everyone;
        let scoped = Audience::Projects(vec![work]);
        let titles = |l: &NotificationList| -> Vec<String> {
            l.rows.iter().map(|r| r.title.clone()).collect()
        };

        let all = store.list(&everyone, false, 2, 0).expect("page");
        assert_eq!(
            (titles(&all), all.total, all.unread),
            (vec!["w2".into(), "none".into()], 4, 4)
        );
        let next = store.list(&everyone, false, 2, 2).expect("page 2");
        assert_eq!(titles(&next), ["h1", "w1"]);
        let mine = store.list(&scoped, false, 10, 0).expect("scoped");
        assert_eq!(
            (titles(&mine), mine.total, mine.unread),
            (vec!["w2".into(), "w1".into()], 2, 2)
        );
        assert_eq!(mine.rows[0].project, Some(work.to_string()));

        // A scoped reader marks nothing outside its projects, even by id.
        let marked = store
            .mark_read(&scoped, &MarkRead::Ids(vec![ids[0], ids[1], ids[2]]), 5)
            .expect("mark");
        assert_eq!(marked, 1, "only w1 is the scoped reader's");
        assert_eq!(store.unread(&everyone).expect("count"), 3);
        assert_eq!(store.unread(&scoped).expect("count"), 1);
        let unread = store.list(&everyone, true, 10, 0).expect("unread");
        assert_eq!(
            (titles(&unread), unread.total),
            (vec!["w2".into(), "none".into(), "h1".into()], 3)
        );
        let read = store.list(&everyone, false, 10, 0).expect("all");
        assert_eq!(read.rows.last().map(|r| r.read_at), Some(Some(5)));

        assert_eq!(store.mark_read(&scoped, &MarkRead::All, 6).expect("all"), 1);
        assert_eq!(
            store.mark_read(&everyone, &MarkRead::All, 7).expect("all"),
            2
        );
        assert_eq!(store.unread(&everyone).expect("count"), 0);
        assert_eq!(
            store
                .mark_read(&everyone, &MarkRead::All, 8)
                .expect("again"),
            0
        );
        notifier.shutdown().await;
    }

    #[test]
    fn an_approval_in_a_scheduled_run_is_a_notification_and_others_are_not() {
        let project = DocId::random();
        let ask = |channel: &str| AgentEvent::ApprovalRequested {
            id: "ap1".into(),
            project,
            channel: channel.into(),
            name: "notes_create".into(),
            args: json!({ "title": "Groceries" }),
        };
        let n = approval_notification(&ask("schedule-task-abc-12")).expect("notification");
        assert_eq!(n.kind, NotificationKind::ApprovalWaiting);
        assert_eq!(n.title, "Approval needed: notes_create");
        assert!(n.body.contains("\"Groceries\""), "{}", n.body);
        assert_eq!(n.project, Some(project));
        assert_eq!(
            n.refs,
            NotificationRefs {
                schedule: Some("task-abc".into()),
                run: Some(12),
                approval: Some("ap1".into()),
                conversation: Some("schedule-task-abc-12".into()),
                task: None,
            }
        );
        let odd = approval_notification(&ask("schedule-x")).expect("still a scheduled name");
        assert_eq!((odd.refs.schedule, odd.refs.run), (None, None));
        assert!(approval_notification(&ask("web")).is_none());
        assert!(approval_notification(&ask("telegram-5-1")).is_none());
        let other = AgentEvent::Started {
            project,
            channel: "schedule-a-1".into(),
            message: "hi".into(),
        };
        assert!(approval_notification(&other).is_none());
        let long = "é".repeat(MAX_BODY_CHARS + 5);
        assert_eq!(cut_body(&long).chars().count(), MAX_BODY_CHARS + 1);
    }

    #[tokio::test]
    async fn the_watcher_notifies_waiting_approvals_until_shutdown() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hub_db = dir.path().join("hub.db");
        let events = Arc::new(EventHub::new());
        let notifier = Arc::new(Notifier::open(&hub_db, events.clone()).expect("notifier"));
        let (tx, rx) = broadcast::channel(16);
        notifier.follow_agent(rx);
        let project = DocId::random();
        for channel in ["web", "schedule-daily-4"] {
            tx.send(AgentEvent::ApprovalRequested {
                id: format!("ap-{channel}"),
                project,
                channel: channel.into(),
                name: "shell".into(),
                args: json!({ "cmd": "ls" }),
            })
            .expect("send");
        }
        let mut listed = Vec::new();
        for _ in 0..200 {
            listed = notifier
                .store()
                .list(&Audience::Everyone, false, 10, 0)
                .expect("list")
                .rows;
            if !listed.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(
            listed[0].refs.approval.as_deref(),
            Some("ap-schedule-daily-4")
        );
        assert_eq!(listed[0].kind, "approval_waiting");
        tokio::time::timeout(std::time::Duration::from_secs(5), notifier.shutdown())
            .await
            .expect("the watcher stops");
        assert_eq!(
            tx.receiver_count(),
            0,
            "the watcher let go of the agent's events"
        );
    }
}
