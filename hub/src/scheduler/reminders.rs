//! Reminders for people's tasks: an open task that is not an agent job, whose due
//! instant (the hub's zone; a date-only due is 09:00) passed within the last 24 hours,
//! gets one `TaskDue` notification per due value (`ScheduleStore::claim_reminder`, so a
//! restart or a second look never repeats it, and a recurring task moved on is reminded
//! again at its next due). Older overdue tasks are not reminded: no flood on the first
//! start or after a long downtime.
//!
//! Looks every 30 s and whenever a task changes (a due edited into the past reminds at
//! once), from the task listing alone (the `entities` rows carry due, status, interval
//! and agent_job): never loads a document, never writes one.

use std::{sync::Arc, time::Duration};

use chrono::TimeZone;
use chrono_tz::Tz;
use hearth_sync::{store::Listed, Details, DocId, DocumentStore, Filter, Kind};
use tokio::sync::{broadcast, watch};

use super::{
    tasks::{next_wake, FeedLoop, Wake},
    timing::due_instant,
    ScheduleError, ScheduleStore,
};
use crate::{
    notify::{Notification, NotificationKind, NotificationRefs, Notifier},
    settings::{RuntimeStore, SettingsError},
};

/// How often the reminders look, besides task changes.
pub const REMINDER_PERIOD: Duration = Duration::from_secs(30);
/// How long after its due a task is still reminded.
pub const REMINDER_WINDOW_MS: i64 = 24 * 3_600_000;
const PAGE: u32 = 1_000;

/// Why a look for due tasks failed (logged; the next look tries again).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReminderError {
    /// The document store failed.
    #[error("document store: {0}")]
    Store(#[from] hearth_sync::StoreError),
    /// The reminders table failed.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The runtime settings (the hub's zone) could not be read.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The blocking work failed.
    #[error("reminder task failed: {0}")]
    Task(String),
}

/// An interval in words: "every day", "every 3 weeks", "every 6 hours".
pub fn interval_words(interval: &str) -> String {
    let digits = interval.bytes().take_while(u8::is_ascii_digit).count();
    let (count, unit) = interval.split_at(digits);
    let (one, many) = match unit {
        "min" => ("minute", "minutes"),
        "h" => ("hour", "hours"),
        "d" => ("day", "days"),
        "w" => ("week", "weeks"),
        "m" => ("month", "months"),
        "y" => ("year", "years"),
        _ => return format!("every {interval}"),
    };
    match count {
        "1" => format!("every {one}"),
        n => format!("every {n} {many}"),
    }
}

/// "Due today at 14:30", "Due yesterday" (a date-only due), in the hub's zone, with
/// "· repeats every 3 days" for a recurring task.
fn due_words(due: &str, at: i64, now: i64, tz: Tz, interval: Option<&str>) -> String {
    let local = |t: i64| tz.timestamp_millis_opt(t).single();
    let day = match (local(at), local(now)) {
        (Some(a), Some(n)) if a.date_naive() == n.date_naive() => "today".to_string(),
        (Some(a), Some(n)) if a.date_naive().succ_opt() == Some(n.date_naive()) => {
            "yesterday".to_string()
        }
        (Some(a), _) => a.format("%Y-%m-%d").to_string(),
        (None, _) => due.to_string(),
    };
    let time = match (due.contains('T'), local(at)) {
        (true, Some(a)) => format!(" at {}", a.format("%H:%M")),
        _ => String::new(),
    };
    match interval {
        Some(i) => format!("Due {day}{time} · repeats {}", interval_words(i)),
        None => format!("Due {day}{time}"),
    }
}

/// What looks for due tasks: the blocking half of the reminders loop ([`Reminders::start`]) (and of tests, with
/// a clock of their own).
pub struct Reminders {
    store: DocumentStore,
    schedules: Arc<ScheduleStore>,
    runtime: Arc<RuntimeStore>,
    notifier: Arc<Notifier>,
}

impl Reminders {
    /// Reminders of `store`'s tasks, recorded in `schedules`, sent through `notifier`.
    pub fn new(
        store: DocumentStore,
        schedules: Arc<ScheduleStore>,
        runtime: Arc<RuntimeStore>,
        notifier: Arc<Notifier>,
    ) -> Self {
        Self {
            store,
            schedules,
            runtime,
            notifier,
        }
    }

    /// The reminders due at `now`, each claimed (so it is sent once). Blocking.
    fn claim_due_blocking(&self, now: i64) -> Result<Vec<Notification>, ReminderError> {
        let tz = self.runtime.load()?.tz();
        let mut out = Vec::new();
        for status in ["incomplete", "recurring"] {
            for offset in (0..).step_by(PAGE as usize) {
                let page = self.store.list_blocking(&Filter {
                    status: Some(status.into()),
                    limit: PAGE,
                    offset,
                    ..Filter::new(Kind::Task)
                })?;
                for task in &page.data {
                    if let Some(n) = self.claim(task, tz, now)? {
                        out.push(n);
                    }
                }
                if page.data.len() < PAGE as usize {
                    break;
                }
            }
        }
        Ok(out)
    }

    fn claim(
        &self,
        task: &Listed,
        tz: Tz,
        now: i64,
    ) -> Result<Option<Notification>, ReminderError> {
        let Details::Task {
            interval,
            agent_job: false,
        } = &task.details
        else {
            return Ok(None);
        };
        let Some(due) = task.due.as_deref() else {
            return Ok(None);
        };
        let Some(at) = due_instant(due, tz) else {
            return Ok(None);
        };
        if at > now || at <= now - REMINDER_WINDOW_MS {
            return Ok(None);
        }
        if !self.schedules.claim_reminder(task.id, due, now)? {
            return Ok(None);
        }
        let interval = interval
            .as_deref()
            .filter(|_| task.status.as_deref() == Some("recurring"));
        Ok(Some(Notification {
            kind: NotificationKind::TaskDue,
            title: format!("Due: {}", task.title),
            body: due_words(due, at, now, tz, interval),
            project: task.project,
            refs: NotificationRefs {
                task: Some(task.id.to_string()),
                ..NotificationRefs::default()
            },
        }))
    }

    /// Sends every reminder due at `now`; answers how many were sent.
    pub async fn look(self: &Arc<Self>, now: i64) -> Result<usize, ReminderError> {
        let me = self.clone();
        let due = tokio::task::spawn_blocking(move || me.claim_due_blocking(now))
            .await
            .map_err(|e| ReminderError::Task(e.to_string()))??;
        let mut sent = 0;
        for n in due {
            let task = n.refs.task.clone().unwrap_or_default();
            match self.notifier.notify(n).await {
                Ok(_) => sent += 1,
                // Claimed already: this due value is not reminded again.
                Err(e) => tracing::warn!(%task, error = %e, "a task's reminder was lost"),
            }
        }
        Ok(sent)
    }

    /// Whether any of `changed` is a task (blocking; no document loaded).
    fn any_task_blocking(&self, changed: &[DocId]) -> Result<bool, ReminderError> {
        Ok(self
            .store
            .kinds_blocking(changed)?
            .iter()
            .any(|(_, kind, _)| *kind == Kind::Task))
    }
}

impl Reminders {
    /// Looks now, then every [`REMINDER_PERIOD`] and whenever a task changes.
    pub fn start(self) -> FeedLoop {
        let feed = self.store.subscribe();
        FeedLoop::spawn("task reminders", |stopped| {
            remind(Arc::new(self), feed, stopped)
        })
    }
}

async fn remind(
    reminders: Arc<Reminders>,
    mut feed: broadcast::Receiver<hearth_sync::DocChange>,
    mut stop: watch::Receiver<bool>,
) {
    let mut wake = Wake::Tick;
    loop {
        let look = match wake {
            Wake::Stop => return,
            Wake::Tick | Wake::Lagged => true,
            Wake::Changed(ids) => {
                let r = reminders.clone();
                match tokio::task::spawn_blocking(move || r.any_task_blocking(&ids)).await {
                    Ok(Ok(any)) => any,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "cannot tell what changed");
                        false
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the reminders' lookup panicked");
                        false
                    }
                }
            }
        };
        if look {
            match reminders.look(crate::hubdb::now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(reminders = n, "tasks fell due"),
                Err(e) => tracing::warn!(error = %e, "cannot look for due tasks"),
            }
        }
        wake = next_wake(&mut feed, &mut stop, REMINDER_PERIOD).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_sync::{Task, TaskPatch, TaskStatus};
    use hearth_ui::events::Next;

    const H: i64 = 3_600_000;
    /// 2026-03-02 08:00 in Paris (07:00 UTC).
    const NOW: i64 = 1_772_434_800_000;

    #[tokio::test]
    async fn a_due_task_reminds_once_and_old_or_agent_ones_never() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let hub_db = dir.path().join("hub.db");
        let runtime = Arc::new(RuntimeStore::open(&hub_db).expect("runtime"));
        runtime
            .update(crate::settings::RuntimePatch {
                timezone: Some("Europe/Paris".into()),
                ..Default::default()
            })
            .expect("zone");
        let events = Arc::new(crate::events::EventHub::new());
        let notifier = Arc::new(Notifier::open(&hub_db, events.clone()).expect("notifier"));
        let reminders = Arc::new(Reminders::new(
            store.clone(),
            Arc::new(ScheduleStore::open(&hub_db).expect("schedules")),
            runtime,
            notifier,
        ));
        let task = |name: &str, due: &str, interval: Option<&str>, agent_job: bool| {
            store
                .create_blocking(Task {
                    name: name.into(),
                    due: Some(due.into()),
                    status: if interval.is_some() {
                        TaskStatus::Recurring
                    } else {
                        TaskStatus::Incomplete
                    },
                    interval: interval.map(Into::into),
                    agent_job,
                    ..Task::default()
                })
                .expect("task")
                .id
        };
        let plants = task("water the plants", "2026-03-02T07:30", Some("3d"), false);
        task("call mum", "2026-03-02T10:00", None, false); // not yet
        task("old chore", "2026-02-27", None, false); // days ago: never
        task("briefing", "2026-03-02T07:00", Some("1d"), true); // the scheduler's
        let bills = task("pay bills", "2026-03-01", None, false); // 23 h ago: 09:00 yesterday

        let mut sub = events.subscribe(Some(0));
        assert_eq!(reminders.look(NOW).await.expect("look"), 2);
        let mut got = Vec::new();
        while let Some(Next::Event(ev)) = sub.try_next() {
            let v: serde_json::Value = serde_json::from_str(&ev.json).expect("json");
            got.push((
                v["title"].as_str().unwrap_or_default().to_string(),
                v["body"].as_str().unwrap_or_default().to_string(),
                v["refs"]["task"].as_str().unwrap_or_default().to_string(),
                v["kind"].as_str().unwrap_or_default().to_string(),
            ));
        }
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    "Due: pay bills".to_string(),
                    "Due yesterday".to_string(),
                    bills.to_string(),
                    "task_due".to_string()
                ),
                (
                    "Due: water the plants".to_string(),
                    "Due today at 07:30 · repeats every 3 days".to_string(),
                    plants.to_string(),
                    "task_due".to_string()
                ),
            ]
        );
        // A second look, and a restart's, send nothing; later, the next one falls due.
        assert_eq!(reminders.look(NOW + 60_000).await.expect("again"), 0);
        assert_eq!(reminders.look(NOW + 2 * H).await.expect("10:00"), 1);
        // Done this time: the plants' next due reminds again when it comes.
        store
            .update_blocking(
                plants,
                TaskPatch {
                    due: Some(Some("2026-03-05T07:30".into())),
                    ..TaskPatch::default()
                },
            )
            .expect("moved on");
        assert_eq!(reminders.look(NOW + 72 * H).await.expect("3 days on"), 1);
        assert_eq!(interval_words("6h"), "every 6 hours");
        assert_eq!(interval_words("1m"), "every month");
    }
}
