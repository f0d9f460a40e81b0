//! [`ScheduleStore`]: schedules, their runs and the reminders sent for people's tasks,
//! in `hub.db` (tables `schedules`, `schedule_runs`, `task_reminders`, created by
//! `hubdb`'s migration 10). The database is the truth: the API, `hearth-hub schedules …`
//! and the task watcher write here, whether or not the hub runs, and the running
//! scheduler re-reads it when `PRAGMA data_version` moves.
//!
//! Plain persistence: it checks the shape of what it stores (names, lists, bounds) but
//! never computes a due time (the timing module does) and never runs anything. Every
//! method is blocking SQLite: call it from `spawn_blocking` or the scheduler's own
//! thread, never on an async worker.

use std::{
    path::Path,
    sync::{Mutex, MutexGuard},
};

use hearth_sync::DocId;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::{Deserialize, Serialize};

use crate::hubdb::now_ms;

/// Longest schedule name, in characters.
pub const MAX_NAME: usize = 200;
/// Longest prompt, in characters.
pub const MAX_PROMPT: usize = 20_000;
/// The most runs `catch_up` may start after a gap.
pub const MAX_CATCH_UP: u32 = 100;
/// The longest a scheduled run's approval may wait: a week.
pub const MAX_APPROVAL_WAIT_SECS: u64 = 7 * 86_400;

/// Why a schedule operation failed. Every variant's text is meant for the owner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The database failed.
    #[error("schedule database: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` cannot be used.
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// No such schedule or run.
    #[error("no schedule or run {0:?}")]
    NotFound(String),
    /// A value is not acceptable; the text says which and why.
    #[error("{0}")]
    Invalid(String),
    /// The id is taken.
    #[error("a schedule {0:?} exists already")]
    Exists(String),
    /// The schedule has a run under way (a schedule never runs twice at once).
    #[error("schedule {0:?} is running now: wait for its run to end")]
    Busy(String),
    /// The scheduler is stopping or stopped.
    #[error("the scheduler is not running (the hub is shutting down)")]
    Stopped,
}

/// When a schedule falls due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// Every `spec` (`30min`, `6h`, `1d`, `2w`, `1m`, `1y`) from its first due time.
    Interval,
    /// A 5-field cron expression in the schedule's time zone.
    Cron,
    /// Once, at the RFC 3339 instant `spec`.
    Once,
}

impl ScheduleKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interval => "interval",
            Self::Cron => "cron",
            Self::Once => "once",
        }
    }
}

impl std::str::FromStr for ScheduleKind {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "interval" => Ok(Self::Interval),
            "cron" => Ok(Self::Cron),
            "once" => Ok(Self::Once),
            other => Err(ScheduleError::Invalid(format!(
                "{other:?} is not a schedule kind: use interval, cron or once"
            ))),
        }
    }
}

/// What happens to due times that passed while the hub was down, the machine slept or
/// a run of the same schedule was still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedPolicy {
    /// None of them runs.
    Skip,
    /// One run, now.
    RunOnce,
    /// Up to `catch_up_max` runs, one after another.
    CatchUp,
}

impl MissedPolicy {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::RunOnce => "run_once",
            Self::CatchUp => "catch_up",
        }
    }
}

impl std::str::FromStr for MissedPolicy {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "skip" => Ok(Self::Skip),
            "run_once" => Ok(Self::RunOnce),
            "catch_up" => Ok(Self::CatchUp),
            other => Err(ScheduleError::Invalid(format!(
                "{other:?} is not a missed-run policy: use skip, run_once or catch_up"
            ))),
        }
    }
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Random hex, or `task-<task id>` for a task's agent job.
    pub id: String,
    /// What the owner calls it.
    pub name: String,
    /// The project its runs belong to.
    pub project: DocId,
    /// The agent-job task it follows, if any.
    pub task: Option<DocId>,
    /// Interval, cron or once.
    pub kind: ScheduleKind,
    /// The interval, the cron expression or the instant.
    pub spec: String,
    /// IANA time zone for cron expressions and calendar intervals; empty: the hub's
    /// zone, whatever it is when the time is computed.
    pub tz: String,
    /// What the agent is asked.
    pub prompt: String,
    /// `provider/model` instead of the configured chat model.
    pub model: Option<String>,
    /// Tools its runs may use without asking (never a guarded tool after untrusted text).
    pub auto_approve: Vec<String>,
    /// Missed-run policy.
    pub missed: MissedPolicy,
    /// Bound on `catch_up`.
    pub catch_up_max: u32,
    /// How long a run's approval waits for the owner.
    pub approval_wait_secs: u64,
    /// Paused: never falls due until resumed.
    pub paused: bool,
    /// The instant an interval counts from (its first due time), so due times never
    /// drift and the 31st stays the 31st where it can.
    pub anchor: Option<i64>,
    /// Next due instant (ms); `None` once a one-shot schedule ran.
    pub next_due: Option<i64>,
    /// When its last run started (ms).
    pub last_run_at: Option<i64>,
    /// Created (ms).
    pub created_at: i64,
    /// Last changed (ms).
    pub updated_at: i64,
}

/// A schedule to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSchedule {
    /// `None`: a random id.
    pub id: Option<String>,
    /// Name.
    pub name: String,
    /// Project.
    pub project: DocId,
    /// The task it follows.
    pub task: Option<DocId>,
    /// Kind.
    pub kind: ScheduleKind,
    /// Spec.
    pub spec: String,
    /// Time zone.
    pub tz: String,
    /// Prompt.
    pub prompt: String,
    /// Model.
    pub model: Option<String>,
    /// Allowed tools.
    pub auto_approve: Vec<String>,
    /// Missed-run policy.
    pub missed: MissedPolicy,
    /// Bound on `catch_up`.
    pub catch_up_max: u32,
    /// Approval wait, seconds.
    pub approval_wait_secs: u64,
    /// What an interval counts from.
    pub anchor: Option<i64>,
    /// First due instant, computed by the caller.
    pub next_due: Option<i64>,
}

/// A change to a schedule; absent fields stay. A change of `kind`, `spec` or `tz`
/// comes with the `next_due` the caller computed for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulePatch {
    /// Name.
    pub name: Option<String>,
    /// Project.
    pub project: Option<DocId>,
    /// Kind.
    pub kind: Option<ScheduleKind>,
    /// Spec.
    pub spec: Option<String>,
    /// Time zone.
    pub tz: Option<String>,
    /// Prompt.
    pub prompt: Option<String>,
    /// Model (`Some(None)` clears it).
    pub model: Option<Option<String>>,
    /// Allowed tools.
    pub auto_approve: Option<Vec<String>>,
    /// Missed-run policy.
    pub missed: Option<MissedPolicy>,
    /// Bound on `catch_up`.
    pub catch_up_max: Option<u32>,
    /// Approval wait, seconds.
    pub approval_wait_secs: Option<u64>,
    /// Paused.
    pub paused: Option<bool>,
    /// Anchor.
    pub anchor: Option<Option<i64>>,
    /// Next due (`Some(None)`: never again).
    pub next_due: Option<Option<i64>>,
}

/// Which schedules a listing shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleFilter {
    /// Only these projects (`None`: all).
    pub projects: Option<Vec<DocId>>,
    /// Only the schedule following this task.
    pub task: Option<DocId>,
    /// Page size.
    pub limit: u32,
    /// Rows to skip.
    pub offset: u32,
}

/// How a run ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Under way.
    Running,
    /// Finished with an answer.
    Ok,
    /// The agent or its provider failed.
    Failed,
    /// Stopped by the owner or the hub's shutdown.
    Aborted,
    /// Found under way when the hub started: the hub died mid-run.
    Interrupted,
}

impl RunStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Aborted => "aborted",
            Self::Interrupted => "interrupted",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "running" => Self::Running,
            "ok" => Self::Ok,
            "aborted" => Self::Aborted,
            "interrupted" => Self::Interrupted,
            _ => Self::Failed,
        }
    }
}

/// Why a run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunReason {
    /// Its due time came.
    Due,
    /// A due time was missed (`run_once`).
    Missed,
    /// One of the missed due times (`catch_up`).
    CatchUp,
    /// The owner asked for it now.
    Manual,
}

impl RunReason {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Due => "due",
            Self::Missed => "missed",
            Self::CatchUp => "catch_up",
            Self::Manual => "manual",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "missed" => Self::Missed,
            "catch_up" => Self::CatchUp,
            "manual" => Self::Manual,
            _ => Self::Due,
        }
    }
}

/// One run of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Number.
    pub id: i64,
    /// Its schedule's id.
    pub schedule: String,
    /// Its project.
    pub project: DocId,
    /// The conversation it ran in.
    pub conversation: String,
    /// Why it started.
    pub reason: RunReason,
    /// The due time it stands for (ms; the start time for a manual run).
    pub due_at: i64,
    /// Started (ms).
    pub started_at: i64,
    /// Ended (ms).
    pub ended_at: Option<i64>,
    /// Status.
    pub status: RunStatus,
    /// Input tokens of every model call.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// The final answer.
    pub answer: Option<String>,
    /// What went wrong.
    pub error: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    /// Ok, failed or aborted.
    pub status: RunStatus,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// The final answer.
    pub answer: Option<String>,
    /// The error.
    pub error: Option<String>,
}

const SCHEDULE_COLUMNS: &str = "id, name, project, task, kind, spec, tz, prompt, model, \
     auto_approve, missed, catch_up_max, approval_wait_secs, paused, next_due, last_run_at, \
     created_at, updated_at, anchor";

const RUN_COLUMNS: &str = "id, schedule, project, conversation, reason, due_at, started_at, \
     ended_at, status, input_tokens, output_tokens, answer, error";

fn corrupt(what: &str, value: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("stored {what} {value:?} is not valid").into(),
    )
}

fn schedule_row(r: &Row<'_>) -> rusqlite::Result<Schedule> {
    let project: String = r.get(2)?;
    let task: Option<String> = r.get(3)?;
    let kind: String = r.get(4)?;
    let auto: String = r.get(9)?;
    let missed: String = r.get(10)?;
    Ok(Schedule {
        id: r.get(0)?,
        name: r.get(1)?,
        project: project.parse().map_err(|_| corrupt("project", &project))?,
        task: task
            .map(|t| t.parse().map_err(|_| corrupt("task", &t)))
            .transpose()?,
        kind: kind.parse().map_err(|_| corrupt("kind", &kind))?,
        spec: r.get(5)?,
        tz: r.get(6)?,
        prompt: r.get(7)?,
        model: r.get(8)?,
        auto_approve: serde_json::from_str(&auto).map_err(|_| corrupt("auto_approve", &auto))?,
        missed: missed.parse().map_err(|_| corrupt("missed", &missed))?,
        catch_up_max: r.get(11)?,
        approval_wait_secs: r.get::<_, i64>(12)?.max(0) as u64,
        paused: r.get(13)?,
        next_due: r.get(14)?,
        last_run_at: r.get(15)?,
        created_at: r.get(16)?,
        updated_at: r.get(17)?,
        anchor: r.get(18)?,
    })
}

fn run_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    let project: String = r.get(2)?;
    let reason: String = r.get(4)?;
    let status: String = r.get(8)?;
    Ok(Run {
        id: r.get(0)?,
        schedule: r.get(1)?,
        project: project.parse().map_err(|_| corrupt("project", &project))?,
        conversation: r.get(3)?,
        reason: RunReason::parse(&reason),
        due_at: r.get(5)?,
        started_at: r.get(6)?,
        ended_at: r.get(7)?,
        status: RunStatus::parse(&status),
        input_tokens: r.get::<_, i64>(9)?.max(0) as u64,
        output_tokens: r.get::<_, i64>(10)?.max(0) as u64,
        answer: r.get(11)?,
        error: r.get(12)?,
    })
}

/// Checks the fields every schedule must have right, whoever writes it.
fn check(
    name: &str,
    prompt: &str,
    auto_approve: &[String],
    catch_up_max: u32,
    approval_wait_secs: u64,
) -> Result<(), ScheduleError> {
    let n = name.trim().chars().count();
    if n == 0 || n > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ScheduleError::Invalid(format!(
            "a schedule's name is 1-{MAX_NAME} characters, no control characters"
        )));
    }
    if prompt.trim().is_empty() || prompt.chars().count() > MAX_PROMPT {
        return Err(ScheduleError::Invalid(format!(
            "a schedule's prompt is 1-{MAX_PROMPT} characters"
        )));
    }
    if auto_approve.len() > 100 || auto_approve.iter().any(|t| t.is_empty() || t.len() > 128) {
        return Err(ScheduleError::Invalid(
            "auto_approve lists at most 100 tool names".into(),
        ));
    }
    if catch_up_max == 0 || catch_up_max > MAX_CATCH_UP {
        return Err(ScheduleError::Invalid(format!(
            "catch_up_max is 1 to {MAX_CATCH_UP}"
        )));
    }
    if approval_wait_secs == 0 || approval_wait_secs > MAX_APPROVAL_WAIT_SECS {
        return Err(ScheduleError::Invalid(format!(
            "approval_wait_secs is 1 to {MAX_APPROVAL_WAIT_SECS} (a week)"
        )));
    }
    Ok(())
}

/// A random schedule id: 64 bits, hex.
fn random_id() -> Result<String, ScheduleError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| ScheduleError::Invalid(format!("no randomness: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The schedules in `hub.db`.
#[derive(Debug)]
pub struct ScheduleStore {
    conn: Mutex<Connection>,
}

impl ScheduleStore {
    /// Opens them in `hub_db`.
    pub fn open(hub_db: &Path) -> Result<Self, ScheduleError> {
        Ok(Self {
            conn: Mutex::new(crate::hubdb::open(hub_db, crate::hubdb::Durability::Full)?),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `PRAGMA data_version`: moves when another connection (the CLI, the API's own
    /// store) committed, so the scheduler knows to read again.
    pub fn data_version(&self) -> Result<i64, ScheduleError> {
        Ok(self
            .lock()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// Creates a schedule.
    pub fn create(&self, new: NewSchedule) -> Result<Schedule, ScheduleError> {
        check(
            &new.name,
            &new.prompt,
            &new.auto_approve,
            new.catch_up_max,
            new.approval_wait_secs,
        )?;
        let id = match new.id {
            Some(id) => id,
            None => random_id()?,
        };
        let now = now_ms();
        let auto = serde_json::to_string(&new.auto_approve)
            .map_err(|e| ScheduleError::Invalid(e.to_string()))?;
        let inserted = self.lock().execute(
            "INSERT INTO schedules (id, name, project, task, kind, spec, tz, prompt, model,
                auto_approve, missed, catch_up_max, approval_wait_secs, paused, next_due,
                last_run_at, created_at, updated_at, anchor)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, ?14, NULL, ?15, ?15, ?16)
             ON CONFLICT DO NOTHING",
            params![
                id,
                new.name.trim(),
                new.project.to_string(),
                new.task.map(|t| t.to_string()),
                new.kind.as_str(),
                new.spec,
                new.tz,
                new.prompt,
                new.model,
                auto,
                new.missed.as_str(),
                new.catch_up_max,
                new.approval_wait_secs as i64,
                new.next_due,
                now,
                new.anchor
            ],
        )?;
        if inserted == 0 {
            return Err(ScheduleError::Exists(id));
        }
        self.get(&id)?.ok_or(ScheduleError::NotFound(id))
    }

    /// The schedule `id`.
    pub fn get(&self, id: &str) -> Result<Option<Schedule>, ScheduleError> {
        Ok(self
            .lock()
            .query_row(
                &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?1"),
                [id],
                schedule_row,
            )
            .optional()?)
    }

    /// The schedule following `task`.
    pub fn by_task(&self, task: DocId) -> Result<Option<Schedule>, ScheduleError> {
        Ok(self
            .lock()
            .query_row(
                &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE task = ?1"),
                [task.to_string()],
                schedule_row,
            )
            .optional()?)
    }

    /// A page of schedules (by name, then id) and how many match in all.
    pub fn list(&self, filter: &ScheduleFilter) -> Result<(Vec<Schedule>, u64), ScheduleError> {
        let mut clauses: Vec<String> = Vec::new();
        let mut args: Vec<String> = Vec::new();
        if let Some(projects) = &filter.projects {
            if projects.is_empty() {
                return Ok((Vec::new(), 0));
            }
            let marks: Vec<String> = projects
                .iter()
                .map(|p| {
                    args.push(p.to_string());
                    format!("?{}", args.len())
                })
                .collect();
            clauses.push(format!("project IN ({})", marks.join(", ")));
        }
        if let Some(task) = filter.task {
            args.push(task.to_string());
            clauses.push(format!("task = ?{}", args.len()));
        }
        let wher = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        let conn = self.lock();
        let total: i64 = conn.query_row(
            &format!("SELECT COUNT(*) FROM schedules {wher}"),
            rusqlite::params_from_iter(args.iter()),
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules {wher}
             ORDER BY name COLLATE NOCASE, id LIMIT {} OFFSET {}",
            filter.limit, filter.offset
        ))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), schedule_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rows, total.max(0) as u64))
    }

    /// Every schedule that is not paused and has a due time, soonest first: what the
    /// scheduler keeps in memory.
    pub fn active(&self) -> Result<Vec<Schedule>, ScheduleError> {
        let conn = self.lock();
        let mut stmt = conn.prepare(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules
             WHERE paused = 0 AND next_due IS NOT NULL ORDER BY next_due, id"
        ))?;
        let rows = stmt
            .query_map([], schedule_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Applies `patch` (checked as a whole) and answers the schedule as it is now.
    pub fn update(&self, id: &str, patch: SchedulePatch) -> Result<Schedule, ScheduleError> {
        let mut s = self
            .get(id)?
            .ok_or_else(|| ScheduleError::NotFound(id.into()))?;
        if let Some(v) = patch.name {
            s.name = v.trim().to_string();
        }
        if let Some(v) = patch.project {
            s.project = v;
        }
        if let Some(v) = patch.kind {
            s.kind = v;
        }
        if let Some(v) = patch.spec {
            s.spec = v;
        }
        if let Some(v) = patch.tz {
            s.tz = v;
        }
        if let Some(v) = patch.prompt {
            s.prompt = v;
        }
        if let Some(v) = patch.model {
            s.model = v;
        }
        if let Some(v) = patch.auto_approve {
            s.auto_approve = v;
        }
        if let Some(v) = patch.missed {
            s.missed = v;
        }
        if let Some(v) = patch.catch_up_max {
            s.catch_up_max = v;
        }
        if let Some(v) = patch.approval_wait_secs {
            s.approval_wait_secs = v;
        }
        if let Some(v) = patch.paused {
            s.paused = v;
        }
        if let Some(v) = patch.anchor {
            s.anchor = v;
        }
        if let Some(v) = patch.next_due {
            s.next_due = v;
        }
        check(
            &s.name,
            &s.prompt,
            &s.auto_approve,
            s.catch_up_max,
            s.approval_wait_secs,
        )?;
        let auto = serde_json::to_string(&s.auto_approve)
            .map_err(|e| ScheduleError::Invalid(e.to_string()))?;
        let changed = self.lock().execute(
            "UPDATE schedules SET name = ?2, project = ?3, kind = ?4, spec = ?5, tz = ?6,
                prompt = ?7, model = ?8, auto_approve = ?9, missed = ?10, catch_up_max = ?11,
                approval_wait_secs = ?12, paused = ?13, next_due = ?14, updated_at = ?15,
                anchor = ?16
             WHERE id = ?1",
            params![
                id,
                s.name,
                s.project.to_string(),
                s.kind.as_str(),
                s.spec,
                s.tz,
                s.prompt,
                s.model,
                auto,
                s.missed.as_str(),
                s.catch_up_max,
                s.approval_wait_secs as i64,
                s.paused,
                s.next_due,
                now_ms(),
                s.anchor
            ],
        )?;
        if changed == 0 {
            return Err(ScheduleError::NotFound(id.into()));
        }
        self.get(id)?
            .ok_or_else(|| ScheduleError::NotFound(id.into()))
    }

    /// Sets when `id` next falls due (`None`: never again); false if it is gone.
    pub fn set_next_due(&self, id: &str, next_due: Option<i64>) -> Result<bool, ScheduleError> {
        Ok(self.lock().execute(
            "UPDATE schedules SET next_due = ?2 WHERE id = ?1",
            params![id, next_due],
        )? > 0)
    }

    /// Stores many due times in one transaction (one disk sync for a thousand). Each
    /// carries the `updated_at` its caller computed it from: a schedule changed since
    /// (the owner edited it meanwhile) keeps the owner's change, and the caller reads
    /// it again. Answers how many were stored.
    pub fn set_next_dues(
        &self,
        updates: &[(String, i64, Option<i64>)],
    ) -> Result<usize, ScheduleError> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let mut stored = 0;
        {
            let mut stmt =
                tx.prepare("UPDATE schedules SET next_due = ?3 WHERE id = ?1 AND updated_at = ?2")?;
            for (id, seen, next_due) in updates {
                stored += stmt.execute(params![id, seen, next_due])?;
            }
        }
        tx.commit()?;
        Ok(stored)
    }

    /// Deletes the schedule (its runs stay, for the record); false if there was none.
    pub fn delete(&self, id: &str) -> Result<bool, ScheduleError> {
        Ok(self
            .lock()
            .execute("DELETE FROM schedules WHERE id = ?1", [id])?
            > 0)
    }

    /// Records that a run of `schedule` started, and answers it (status `running`).
    pub fn start_run(
        &self,
        schedule: &Schedule,
        reason: RunReason,
        due_at: i64,
        started_at: i64,
    ) -> Result<Run, ScheduleError> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO schedule_runs (schedule, project, conversation, reason, due_at,
                started_at, status)
             VALUES (?1, ?2, '', ?3, ?4, ?5, 'running')",
            params![
                schedule.id,
                schedule.project.to_string(),
                reason.as_str(),
                due_at,
                started_at
            ],
        )?;
        let id = tx.last_insert_rowid();
        let conversation = format!("schedule-{}-{id}", schedule.id);
        tx.execute(
            "UPDATE schedule_runs SET conversation = ?2 WHERE id = ?1",
            params![id, conversation],
        )?;
        tx.execute(
            "UPDATE schedules SET last_run_at = ?2 WHERE id = ?1",
            params![schedule.id, started_at],
        )?;
        let run = tx.query_row(
            &format!("SELECT {RUN_COLUMNS} FROM schedule_runs WHERE id = ?1"),
            [id],
            run_row,
        )?;
        tx.commit()?;
        Ok(run)
    }

    /// Records how run `id` ended.
    pub fn finish_run(&self, id: i64, end: &RunEnd, ended_at: i64) -> Result<(), ScheduleError> {
        let changed = self.lock().execute(
            "UPDATE schedule_runs SET ended_at = ?2, status = ?3, input_tokens = ?4,
                output_tokens = ?5, answer = ?6, error = ?7
             WHERE id = ?1",
            params![
                id,
                ended_at,
                end.status.as_str(),
                end.input_tokens as i64,
                end.output_tokens as i64,
                end.answer,
                end.error
            ],
        )?;
        if changed == 0 {
            return Err(ScheduleError::NotFound(id.to_string()));
        }
        Ok(())
    }

    /// Marks every run still `running` as `interrupted` (the hub died under it);
    /// answers how many. Called once at start-up, before any run starts.
    pub fn interrupt_running(&self, now: i64) -> Result<usize, ScheduleError> {
        Ok(self.lock().execute(
            "UPDATE schedule_runs SET status = 'interrupted', ended_at = ?1,
                error = 'the hub stopped while this run was under way'
             WHERE status = 'running'",
            [now],
        )?)
    }

    /// Run `id`.
    pub fn run(&self, id: i64) -> Result<Option<Run>, ScheduleError> {
        Ok(self
            .lock()
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM schedule_runs WHERE id = ?1"),
                [id],
                run_row,
            )
            .optional()?)
    }

    /// A page of `schedule`'s runs, newest first, and how many there are.
    pub fn runs(
        &self,
        schedule: &str,
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<Run>, u64), ScheduleError> {
        let conn = self.lock();
        let total: i64 = conn.query_row(
            "SELECT COUNT(*) FROM schedule_runs WHERE schedule = ?1",
            [schedule],
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule = ?1
             ORDER BY id DESC LIMIT ?2 OFFSET ?3"
        ))?;
        let rows = stmt
            .query_map(params![schedule, limit, offset], run_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rows, total.max(0) as u64))
    }

    /// Whether a reminder for `task` falling due at `due` (its stored due value) was
    /// sent; records it if not, so each due value reminds once.
    pub fn claim_reminder(&self, task: DocId, due: &str, now: i64) -> Result<bool, ScheduleError> {
        Ok(self.lock().execute(
            "INSERT INTO task_reminders (task, due, reminded_at) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![task.to_string(), due, now],
        )? > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(project: DocId, name: &str) -> NewSchedule {
        NewSchedule {
            id: None,
            name: name.into(),
            project,
            task: None,
            kind: ScheduleKind::Cron,
            spec: "0 9 * * *".into(),
            tz: "Europe/Paris".into(),
            prompt: "Morning briefing".into(),
            model: None,
            auto_approve: vec!["notes_search".into()],
            missed: MissedPolicy::RunOnce,
            catch_up_max: 3,
            approval_wait_secs: 86_400,
            anchor: None,
            next_due: Some(1_000),
        }
    }

    #[test]
    fn schedules_and_runs_round_trip_and_an_interrupted_run_is_marked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ScheduleStore::open(&dir.path().join("hub.db")).expect("open");
        let (p1, p2) = (DocId::random(), DocId::random());
        let a = store.create(new(p1, "briefing")).expect("create");
        assert_eq!(a.auto_approve, vec!["notes_search".to_string()]);
        assert!(!a.paused && a.next_due == Some(1_000));
        store.create(new(p2, "review")).expect("second");
        let only = ScheduleFilter {
            projects: Some(vec![p2]),
            limit: 50,
            ..Default::default()
        };
        let (rows, total) = store.list(&only).expect("list");
        assert_eq!((rows.len(), total, rows[0].name.as_str()), (1, 1, "review"));
        let bad = store.create(NewSchedule {
            prompt: " ".into(),
            ..new(p1, "empty")
        });
        assert!(matches!(bad, Err(ScheduleError::Invalid(_))));
        let paused = store
            .update(
                &a.id,
                SchedulePatch {
                    paused: Some(true),
                    ..Default::default()
                },
            )
            .expect("pause");
        assert!(paused.paused);
        assert_eq!(store.active().expect("active").len(), 1);

        let run = store
            .start_run(&a, RunReason::Due, 1_000, 1_050)
            .expect("start");
        assert_eq!(run.conversation, format!("schedule-{}-{}", a.id, run.id));
        assert_eq!(
            store.get(&a.id).expect("get").map(|s| s.last_run_at),
            Some(Some(1_050))
        );
        assert_eq!(store.interrupt_running(2_000).expect("interrupt"), 1);
        let (runs, n) = store.runs(&a.id, 10, 0).expect("runs");
        assert_eq!((n, runs[0].status), (1, RunStatus::Interrupted));
        let second = store
            .start_run(&a, RunReason::Manual, 3_000, 3_000)
            .expect("start");
        store
            .finish_run(
                second.id,
                &RunEnd {
                    status: RunStatus::Ok,
                    input_tokens: 120,
                    output_tokens: 30,
                    answer: Some("All quiet.".into()),
                    error: None,
                },
                3_500,
            )
            .expect("finish");
        let done = store.run(second.id).expect("run").expect("exists");
        assert_eq!(
            (done.status, done.output_tokens, done.ended_at),
            (RunStatus::Ok, 30, Some(3_500))
        );
        assert!(store.delete(&a.id).expect("delete"));
        assert_eq!(store.runs(&a.id, 10, 0).expect("runs kept").1, 2);
        let t = DocId::random();
        assert!(store.claim_reminder(t, "2026-11-23", 1).expect("first"));
        // The scheduler's due time, computed from a schedule the owner changed since,
        // does not overwrite the owner's change.
        let b = store.create(new(p1, "weekly")).expect("create");
        std::thread::sleep(std::time::Duration::from_millis(3));
        let edited = store
            .update(
                &b.id,
                SchedulePatch {
                    next_due: Some(Some(9_000)),
                    ..Default::default()
                },
            )
            .expect("owner's edit");
        let stored = store
            .set_next_dues(&[
                (b.id.clone(), b.updated_at, Some(5_000)),
                ("gone".into(), 0, Some(1)),
            ])
            .expect("stale");
        assert_eq!(stored, 0);
        assert_eq!(
            store.get(&b.id).expect("get").and_then(|s| s.next_due),
            Some(9_000)
        );
        let stored = store
            .set_next_dues(&[(b.id.clone(), edited.updated_at, Some(12_000))])
            .expect("fresh");
        assert_eq!(stored, 1);
        assert!(!store.claim_reminder(t, "2026-11-23", 2).expect("once"));
    }
}
