//! A task's agent job: keeps the `schedules` row of every agent-job task equal to its
//! task, whichever device edited it. An open task with `agent_job` and an `interval` is
//! the schedule `task-<task id>` of kind `interval` (spec = the interval), one with a due
//! but no interval is a `once` at its due; its prompt is the task's name and notes, its
//! project the task's (the hub's `general` for a task without one), times in the hub's
//! zone, missed runs `run_once`, no tool allowed without asking. A changed interval or
//! due re-anchors it; completing, cancelling or deleting the task, or clearing
//! `agent_job`, removes the row (its runs stay).
//!
//! Driven by the document store's change feed (local edits, a node's edits replicated
//! by a peer session, other processes' writes alike), plus a full reconciliation at start
//! and whenever the feed lagged. The decision at start comes from the task listing
//! (`Details::Task`); a task is loaded only to read its notes for the prompt, or when
//! one changed.
//!
//! Never writes a task document (run state stays on the hub, in `hub.db`), never runs
//! anything (the scheduler does) and never touches a schedule that follows no task.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono_tz::Tz;
use hearth_sync::{DocId, DocumentStore, Filter, Kind, Task, TaskStatus};
use tokio::sync::{broadcast, watch};

use super::{
    store::{MAX_NAME, MAX_PROMPT},
    timing::{due_instant, When},
    MissedPolicy, NewSchedule, Schedule, ScheduleError, ScheduleFilter, ScheduleKind,
    SchedulePatch, ScheduleStore,
};
use crate::settings::{RuntimeStore, SettingsError};

/// How long a task job's approval waits for the owner: a day.
pub const TASK_JOB_APPROVAL_WAIT_SECS: u64 = 86_400;
/// Rows a listing page reads at a time.
const PAGE: u32 = 1_000;

/// Why following the tasks failed (logged; the next change or start tries again).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskJobError {
    /// The document store failed.
    #[error("document store: {0}")]
    Store(#[from] hearth_sync::StoreError),
    /// The schedules failed.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The runtime settings (the hub's zone) could not be read.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

/// The schedule id of `task`'s agent job.
pub fn schedule_id(task: DocId) -> String {
    format!("task-{task}")
}

/// Whether a task in this state is an agent job the hub runs.
fn wants_job(
    status: TaskStatus,
    agent_job: bool,
    interval: Option<&str>,
    due: Option<&str>,
) -> bool {
    agent_job
        && matches!(status, TaskStatus::Incomplete | TaskStatus::Recurring)
        && (interval.is_some() || due.is_some())
}

/// What a task's schedule should say; the due times are computed when it is (re)anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    name: String,
    prompt: String,
    project: DocId,
    kind: ScheduleKind,
    spec: String,
    anchor: Option<i64>,
    next_due: Option<i64>,
}

/// Cuts `s` to `max` characters.
fn cut(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// The schedule `task` asks for at `now` in the hub's zone `tz`, or `None` when it asks
/// for none (or its interval or due cannot be read: validated tasks always can).
fn wanted(task: &Task, general: DocId, tz: Tz, now: i64) -> Option<Wanted> {
    if !wants_job(
        task.status,
        task.agent_job,
        task.interval.as_deref(),
        task.due.as_deref(),
    ) {
        return None;
    }
    let name: String = task
        .name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let notes = task.notes.trim();
    let prompt = if notes.is_empty() {
        task.name.trim().to_string()
    } else {
        format!("{}\n\n{notes}", task.name.trim())
    };
    let due = task.due.as_deref().and_then(|d| due_instant(d, tz));
    let (kind, spec, anchor, next_due) = match &task.interval {
        Some(interval) => {
            let when = When::parse(ScheduleKind::Interval, interval).ok()?;
            // Counted from the task's due (its runs keep the due's time of day); without
            // one, from now: the first run one interval from now. A due in the past
            // gives the first of its due times after now.
            let anchor = match due {
                Some(d) => d,
                None => when.next_after(tz, now, now)?,
            };
            let next = when.next_after(tz, anchor, now);
            (ScheduleKind::Interval, interval.clone(), Some(anchor), next)
        }
        None => {
            // Once at its due; a due already past runs once, as a missed run.
            let at = due?;
            let spec = chrono::DateTime::from_timestamp_millis(at)?.to_rfc3339();
            (ScheduleKind::Once, spec, None, Some(at))
        }
    };
    Some(Wanted {
        name: cut(name.trim(), MAX_NAME),
        prompt: cut(&prompt, MAX_PROMPT),
        project: task.project.unwrap_or(general),
        kind,
        spec,
        anchor,
        next_due,
    })
}

/// What keeps task schedules equal to their tasks: the blocking half, driven by
/// the follower loop ([`TaskFollower::start`]) (and by tests with a clock of their own).
pub struct TaskFollower {
    store: DocumentStore,
    schedules: Arc<ScheduleStore>,
    runtime: Arc<RuntimeStore>,
    general: DocId,
    /// Told after each change, so a new due time counts at once rather than at the
    /// scheduler's next poll.
    scheduler: Option<Arc<super::Scheduler>>,
    /// The due each followed task had when last seen: a due cleared or changed
    /// re-anchors its schedule. Empty after a restart, when a due-based anchor is
    /// checked against the due itself instead.
    seen_due: Mutex<HashMap<DocId, Option<String>>>,
}

impl TaskFollower {
    /// A follower of `store`'s tasks writing `schedules`; `general` owns the jobs of
    /// tasks without a project.
    pub fn new(
        store: DocumentStore,
        schedules: Arc<ScheduleStore>,
        runtime: Arc<RuntimeStore>,
        general: DocId,
    ) -> Self {
        Self {
            store,
            schedules,
            runtime,
            general,
            scheduler: None,
            seen_due: Mutex::new(HashMap::new()),
        }
    }

    /// Nudges `scheduler` after each change it writes.
    pub fn nudging(mut self, scheduler: Arc<super::Scheduler>) -> Self {
        self.scheduler = Some(scheduler);
        self
    }

    fn hub_zone(&self) -> Result<Tz, TaskJobError> {
        Ok(self.runtime.load()?.tz())
    }

    /// Makes every task schedule match its task: creates, updates and removes rows.
    /// Answers how many task schedules there are now. Blocking.
    pub fn reconcile_all_blocking(&self, now: i64) -> Result<usize, TaskJobError> {
        let tz = self.hub_zone()?;
        let mut jobs: Vec<DocId> = Vec::new();
        for offset in (0..).step_by(PAGE as usize) {
            let page = self.store.list_blocking(&Filter {
                limit: PAGE,
                offset,
                ..Filter::new(Kind::Task)
            })?;
            for l in &page.data {
                let hearth_sync::Details::Task {
                    interval,
                    agent_job,
                } = &l.details
                else {
                    continue;
                };
                let status = l
                    .status
                    .as_deref()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_default();
                if wants_job(status, *agent_job, interval.as_deref(), l.due.as_deref()) {
                    jobs.push(l.id);
                }
            }
            if page.data.len() < PAGE as usize {
                break;
            }
        }
        let mut kept = HashSet::new();
        for id in jobs {
            if self.follow_task_blocking(id, tz, now)? {
                kept.insert(schedule_id(id));
            }
        }
        // Rows following a task that no longer asks for one (changed while the hub
        // was down, or its document is gone).
        let mut stale = Vec::new();
        for offset in (0..).step_by(PAGE as usize) {
            let (rows, _) = self.schedules.list(&ScheduleFilter {
                limit: PAGE,
                offset,
                ..ScheduleFilter::default()
            })?;
            let n = rows.len();
            stale.extend(
                rows.into_iter()
                    .filter(|s| s.task.is_some() && !kept.contains(&s.id))
                    .map(|s| s.id),
            );
            if n < PAGE as usize {
                break;
            }
        }
        for id in stale {
            self.schedules.delete(&id)?;
            tracing::info!(schedule = %id, "a task's agent job ended");
        }
        Ok(kept.len())
    }

    /// Follows the documents in `changed` that are tasks. Blocking.
    pub fn follow_changes_blocking(&self, changed: &[DocId], now: i64) -> Result<(), TaskJobError> {
        let tasks: Vec<(DocId, bool)> = self
            .store
            .kinds_blocking(changed)?
            .into_iter()
            .filter(|(_, kind, _)| *kind == Kind::Task)
            .map(|(id, _, deleted)| (id, deleted))
            .collect();
        if tasks.is_empty() {
            return Ok(());
        }
        let tz = self.hub_zone()?;
        for (id, deleted) in tasks {
            if deleted {
                self.remove(id)?;
            } else {
                self.follow_task_blocking(id, tz, now)?;
            }
        }
        Ok(())
    }

    fn remove(&self, task: DocId) -> Result<(), TaskJobError> {
        self.lock_seen().remove(&task);
        if self.schedules.delete(&schedule_id(task))? {
            tracing::info!(%task, "a task's agent job ended");
        }
        Ok(())
    }

    fn lock_seen(&self) -> std::sync::MutexGuard<'_, HashMap<DocId, Option<String>>> {
        self.seen_due.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `task`'s schedule what the task asks for; answers whether it has one.
    fn follow_task_blocking(&self, task: DocId, tz: Tz, now: i64) -> Result<bool, TaskJobError> {
        let rec = self.store.get_blocking::<Task>(task)?;
        let Some(want) = (!rec.deleted)
            .then(|| wanted(&rec.value, self.general, tz, now))
            .flatten()
        else {
            self.remove(task)?;
            return Ok(false);
        };
        let id = schedule_id(task);
        let due_before = self.lock_seen().insert(task, rec.value.due.clone());
        match self.schedules.get(&id)? {
            None => {
                self.schedules.create(NewSchedule {
                    id: Some(id.clone()),
                    name: want.name,
                    project: want.project,
                    task: Some(task),
                    kind: want.kind,
                    spec: want.spec,
                    tz: String::new(),
                    prompt: want.prompt,
                    model: None,
                    auto_approve: Vec::new(),
                    missed: MissedPolicy::RunOnce,
                    catch_up_max: 3,
                    approval_wait_secs: TASK_JOB_APPROVAL_WAIT_SECS,
                    anchor: want.anchor,
                    next_due: want.next_due,
                })?;
                tracing::info!(schedule = %id, "a task became an agent job");
            }
            Some(row) => {
                let due_moved = match due_before {
                    Some(before) => before != rec.value.due,
                    // First sight since start: a due-based anchor shows its due.
                    None => {
                        want.kind == ScheduleKind::Interval
                            && rec.value.due.is_some()
                            && row.anchor != want.anchor
                    }
                };
                if let Some(patch) = patch_for(&row, &want, due_moved) {
                    self.schedules.update(&id, patch)?;
                    tracing::debug!(schedule = %id, "a task's agent job follows its task");
                }
            }
        }
        Ok(true)
    }
}

/// The change that makes `row` say what `want` says, or `None` when it does. A new
/// kind or spec, or a moved due, re-anchors it (its due times computed afresh);
/// otherwise its due times stay, whatever ran since.
fn patch_for(row: &Schedule, want: &Wanted, due_moved: bool) -> Option<SchedulePatch> {
    let mut patch = SchedulePatch::default();
    let mut any = false;
    if row.name != want.name {
        patch.name = Some(want.name.clone());
        any = true;
    }
    if row.prompt != want.prompt {
        patch.prompt = Some(want.prompt.clone());
        any = true;
    }
    if row.project != want.project {
        patch.project = Some(want.project);
        any = true;
    }
    if row.kind != want.kind || row.spec != want.spec || due_moved {
        patch.kind = Some(want.kind);
        patch.spec = Some(want.spec.clone());
        patch.anchor = Some(want.anchor);
        patch.next_due = Some(want.next_due);
        any = true;
    }
    any.then_some(patch)
}

/// What wakes a follower's loop.
pub(super) enum Wake {
    /// Documents changed.
    Changed(Vec<DocId>),
    /// The feed lost changes: look at everything.
    Lagged,
    /// The period passed with no change.
    Tick,
    /// The hub stops.
    Stop,
}

/// Waits up to `period` for the next batch of changes on `feed` (drained, at most 512).
pub(super) async fn next_wake(
    feed: &mut broadcast::Receiver<hearth_sync::DocChange>,
    stop: &mut watch::Receiver<bool>,
    period: Duration,
) -> Wake {
    use broadcast::error::{RecvError, TryRecvError};
    let first = tokio::select! {
        got = feed.recv() => got,
        _ = stop.changed() => return Wake::Stop,
        _ = tokio::time::sleep(period) => return Wake::Tick,
    };
    let mut ids = match first {
        Ok(c) => vec![c.id],
        Err(RecvError::Lagged(_)) => return Wake::Lagged,
        Err(RecvError::Closed) => return Wake::Stop,
    };
    while ids.len() < 512 {
        match feed.try_recv() {
            Ok(c) => ids.push(c.id),
            Err(TryRecvError::Lagged(_)) => return Wake::Lagged,
            Err(_) => break,
        }
    }
    Wake::Changed(ids)
}

/// A loop on the hub's runtime that follows the store's change feed (the task job
/// follower, the reminders), stopped by [`Self::shutdown`].
pub struct FeedLoop {
    what: &'static str,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl FeedLoop {
    /// Spawns `run` with the receiver of its stop signal.
    pub(super) fn spawn<F>(what: &'static str, run: impl FnOnce(watch::Receiver<bool>) -> F) -> Self
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(stopped));
        Self { what, stop, task }
    }

    /// Stops the loop and waits for it to end.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, what = self.what, "a scheduler loop ended badly");
        }
    }
}

impl TaskFollower {
    /// Subscribes to the store's feed (before anything is read, so no change slips
    /// between), reconciles everything, then follows each change.
    pub fn start(self) -> FeedLoop {
        let feed = self.store.subscribe();
        FeedLoop::spawn("task job follower", |stopped| {
            follow(Arc::new(self), feed, stopped)
        })
    }
}

async fn follow(
    follower: Arc<TaskFollower>,
    mut feed: broadcast::Receiver<hearth_sync::DocChange>,
    mut stop: watch::Receiver<bool>,
) {
    let mut wake = Wake::Lagged;
    loop {
        let f = follower.clone();
        let now = crate::hubdb::now_ms();
        let done = match wake {
            Wake::Changed(ids) => {
                tokio::task::spawn_blocking(move || f.follow_changes_blocking(&ids, now)).await
            }
            Wake::Lagged => {
                tokio::task::spawn_blocking(move || {
                    f.reconcile_all_blocking(now).map(|n| {
                        tracing::debug!(jobs = n, "task agent jobs reconciled");
                    })
                })
                .await
            }
            Wake::Tick => Ok(Ok(())),
            Wake::Stop => return,
        };
        if let Some(s) = &follower.scheduler {
            s.nudge();
        }
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot follow a task's agent job"),
            Err(e) => tracing::warn!(error = %e, "the task job follower's work panicked"),
        }
        // No period of its own: it follows changes only.
        wake = next_wake(&mut feed, &mut stop, Duration::from_secs(3_600)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_sync::TaskPatch;

    const H: i64 = 3_600_000;
    const D: i64 = 24 * H;

    struct World {
        _dir: tempfile::TempDir,
        store: DocumentStore,
        schedules: Arc<ScheduleStore>,
        follower: TaskFollower,
        project: DocId,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DocumentStore::open(dir.path().join("hearth.db")).expect("store");
        let hub_db = dir.path().join("hub.db");
        let schedules = Arc::new(ScheduleStore::open(&hub_db).expect("schedules"));
        let runtime = Arc::new(RuntimeStore::open(&hub_db).expect("runtime"));
        runtime
            .update(crate::settings::RuntimePatch {
                timezone: Some("Europe/Paris".into()),
                ..Default::default()
            })
            .expect("zone");
        let project = store
            .create_blocking(hearth_sync::Project {
                name: "home".into(),
                ..Default::default()
            })
            .expect("project")
            .id;
        let follower = TaskFollower::new(store.clone(), schedules.clone(), runtime, project);
        World {
            _dir: dir,
            store,
            schedules,
            follower,
            project,
        }
    }

    /// 2026-03-02 08:00 in Paris (07:00 UTC).
    const NOW: i64 = 1_772_434_800_000;

    fn job(w: &World, id: DocId) -> Option<Schedule> {
        w.schedules.get(&schedule_id(id)).expect("get")
    }

    #[test]
    fn a_task_job_follows_its_task_and_ends_with_it() {
        let w = world();
        let task = w
            .store
            .create_blocking(Task {
                name: "Morning briefing".into(),
                notes: "Weather and calendar.".into(),
                due: Some("2026-03-02T09:30".into()),
                interval: Some("1d".into()),
                status: TaskStatus::Recurring,
                agent_job: true,
                ..Task::default()
            })
            .expect("task")
            .id;
        let plain = w
            .store
            .create_blocking(Task {
                name: "water plants".into(),
                interval: Some("3d".into()),
                status: TaskStatus::Recurring,
                ..Task::default()
            })
            .expect("plain")
            .id;
        assert_eq!(w.follower.reconcile_all_blocking(NOW).expect("start"), 1);
        let s = job(&w, task).expect("scheduled");
        // 09:30 Paris = 08:30 UTC, the due itself (in the future).
        assert_eq!(
            (s.kind, s.spec.as_str(), s.next_due, s.anchor),
            (
                ScheduleKind::Interval,
                "1d",
                Some(NOW + 90 * 60_000),
                Some(NOW + 90 * 60_000)
            )
        );
        assert_eq!(s.prompt, "Morning briefing\n\nWeather and calendar.");
        assert_eq!(
            (s.project, s.task, s.missed),
            (w.project, Some(task), MissedPolicy::RunOnce)
        );
        assert!(s.auto_approve.is_empty());
        assert!(job(&w, plain).is_none());

        // A run happened: its due times stay when only the notes change.
        w.schedules
            .set_next_due(&s.id, Some(NOW + 90 * 60_000 + D))
            .expect("ran");
        w.store
            .update_blocking(
                task,
                TaskPatch {
                    notes: Some(hearth_sync::TextEdit::Replace("Weather only.".into())),
                    ..TaskPatch::default()
                },
            )
            .expect("notes");
        w.follower
            .follow_changes_blocking(&[task, plain], NOW + H)
            .expect("follow");
        let s = job(&w, task).expect("still");
        assert_eq!(s.prompt, "Morning briefing\n\nWeather only.");
        assert_eq!(s.next_due, Some(NOW + 90 * 60_000 + D));

        // A new interval re-anchors at the due, whose next time after now comes.
        w.store
            .update_blocking(
                task,
                TaskPatch {
                    interval: Some(Some("2d".into())),
                    ..TaskPatch::default()
                },
            )
            .expect("interval");
        w.follower
            .follow_changes_blocking(&[task], NOW + 3 * H)
            .expect("follow");
        let s = job(&w, task).expect("still");
        assert_eq!(
            (s.spec.as_str(), s.next_due),
            ("2d", Some(NOW + 90 * 60_000 + 2 * D))
        );

        // A due moved re-anchors too; then no due at all: one interval from now.
        w.store
            .update_blocking(
                task,
                TaskPatch {
                    due: Some(Some("2026-03-10".into())),
                    ..TaskPatch::default()
                },
            )
            .expect("due");
        w.follower
            .follow_changes_blocking(&[task], NOW)
            .expect("follow");
        // 2026-03-10 09:00 Paris = 08:00 UTC.
        assert_eq!(job(&w, task).expect("job").next_due, Some(NOW + 8 * D + H));
        w.store
            .update_blocking(
                task,
                TaskPatch {
                    due: Some(None),
                    ..TaskPatch::default()
                },
            )
            .expect("no due");
        w.follower
            .follow_changes_blocking(&[task], NOW)
            .expect("follow");
        assert_eq!(job(&w, task).expect("job").next_due, Some(NOW + 2 * D));

        // Done: the job ends, its runs stay.
        let run = w
            .schedules
            .start_run(
                &job(&w, task).expect("job"),
                super::super::RunReason::Manual,
                NOW,
                NOW,
            )
            .expect("run");
        w.store
            .update_blocking(
                task,
                TaskPatch {
                    status: Some(TaskStatus::Complete),
                    ..TaskPatch::default()
                },
            )
            .expect("complete");
        w.follower
            .follow_changes_blocking(&[task], NOW)
            .expect("follow");
        assert!(job(&w, task).is_none());
        assert!(w.schedules.run(run.id).expect("run").is_some());
    }

    #[test]
    fn a_due_without_interval_runs_once_and_start_up_removes_stale_jobs() {
        let w = world();
        let once = w
            .store
            .create_blocking(Task {
                name: "Draft the report".into(),
                due: Some("2026-03-03T10:00".into()),
                agent_job: true,
                ..Task::default()
            })
            .expect("task")
            .id;
        w.follower
            .follow_changes_blocking(&[once], NOW)
            .expect("follow");
        let s = job(&w, once).expect("once");
        // 10:00 Paris = 09:00 UTC the next day.
        assert_eq!(
            (s.kind, s.spec.as_str(), s.next_due),
            (
                ScheduleKind::Once,
                "2026-03-03T09:00:00+00:00",
                Some(NOW + D + 2 * H)
            )
        );
        // Changed while the hub was down: agent_job cleared, and a task deleted.
        w.store
            .update_blocking(
                once,
                TaskPatch {
                    agent_job: Some(false),
                    ..TaskPatch::default()
                },
            )
            .expect("clear");
        let gone = w
            .store
            .create_blocking(Task {
                name: "gone".into(),
                interval: Some("6h".into()),
                status: TaskStatus::Recurring,
                agent_job: true,
                ..Task::default()
            })
            .expect("gone")
            .id;
        w.follower
            .follow_changes_blocking(&[gone], NOW)
            .expect("follow");
        assert_eq!(job(&w, gone).expect("6h").next_due, Some(NOW + 6 * H));
        w.store.delete_blocking(Kind::Task, gone).expect("delete");
        let restarted = TaskFollower::new(
            w.store.clone(),
            w.schedules.clone(),
            Arc::new(RuntimeStore::open(&w._dir.path().join("hub.db")).expect("runtime")),
            w.project,
        );
        assert_eq!(restarted.reconcile_all_blocking(NOW).expect("start"), 0);
        assert!(job(&w, once).is_none() && job(&w, gone).is_none());
    }
}
