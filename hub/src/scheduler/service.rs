//! [`Scheduler`]: the hub's long-lived task that starts schedules' runs when they fall
//! due. It owns its state: the active schedules (read from [`ScheduleStore::active`],
//! read again whenever `hub.db`'s `data_version` moves or [`Scheduler::nudge`] is
//! called), the runs it queued and the runs under way. Each run goes through
//! [`Agent::invoke_with`] with the scheduled trigger in a fresh conversation, is recorded
//! in `schedule_runs` and ends in a notification.
//!
//! Time: due times are wall-clock instants read from an injected [`WallClock`]; the
//! task sleeps on tokio time for at most the poll interval (1 s, never more than 30 s)
//! and reads the wall clock again on every wake, because a runtime's timers stand still
//! while the machine sleeps. What to do about a due time is [`timing::plan`]'s answer.
//!
//! Never two runs of one schedule at once; at most `max_concurrent_runs` runs hub-wide,
//! queued in due order. Never writes a task document or any replicated state: runs are
//! rows of `hub.db`. Every run task lives in this scheduler's `JoinSet` and is stopped
//! (through the agent) and joined by [`Scheduler::shutdown`].

use std::{
    collections::{HashMap, VecDeque},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono_tz::Tz;
use tokio::{
    sync::{mpsc, oneshot, watch, Notify},
    task::{JoinHandle, JoinSet},
};

use super::{
    store::{
        Run, RunEnd, RunReason, RunStatus, Schedule, ScheduleError, SchedulePatch, ScheduleStore,
    },
    timing::{self, PlannedRun, When},
};
use crate::{
    agent::{
        provider::ModelRef,
        runner::{Agent, ModelChoice, RunOptions, Trigger},
    },
    chat::ProviderUrls,
    notify::{Notification, NotificationKind, NotificationRefs, Notifier},
    secrets::SecretStore,
    settings::RuntimeStore,
};

/// The longest a notification's body is, in characters.
pub const NOTIFICATION_BODY_MAX: usize = 2_000;
/// The longest the scheduler ever sleeps without reading the wall clock again.
pub const MAX_SLEEP: Duration = Duration::from_secs(30);

/// Where "now" comes from: the system clock in production, a clock the test moves in
/// tests. Milliseconds since the epoch, UTC.
pub trait WallClock: Send + Sync + 'static {
    /// Now.
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now_ms(&self) -> i64 {
        crate::hubdb::now_ms()
    }
}

/// What the scheduler works with.
pub struct SchedulerDeps {
    /// Schedules and runs.
    pub store: Arc<ScheduleStore>,
    /// Runtime settings: the hub's time zone.
    pub runtime: Arc<RuntimeStore>,
    /// The agent that runs them.
    pub agent: Arc<Agent>,
    /// Provider keys, for a schedule's own model.
    pub secrets: Arc<SecretStore>,
    /// Where providers live.
    pub urls: ProviderUrls,
    /// Where results go.
    pub notifier: Arc<Notifier>,
    /// Project directories (`<dir>/<project id>`), created before a run if missing.
    pub projects_dir: Option<PathBuf>,
    /// Now.
    pub clock: Arc<dyn WallClock>,
}

/// How the scheduler behaves.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Runs under way at once, hub-wide (manual runs count too).
    pub max_concurrent_runs: usize,
    /// How often the wall clock and `hub.db` are read again when nothing is due sooner
    /// (capped at [`MAX_SLEEP`]).
    pub poll: Duration,
    /// How long shutdown waits for stopped runs to end before cutting them off.
    pub shutdown_grace: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            max_concurrent_runs: 4,
            poll: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

enum Command {
    RunNow {
        id: String,
        reply: oneshot::Sender<Result<Run, ScheduleError>>,
    },
}

/// The running scheduler's handle.
pub struct Scheduler {
    store: Arc<ScheduleStore>,
    running: Arc<Mutex<HashMap<String, i64>>>,
    wake: Arc<Notify>,
    commands: mpsc::Sender<Command>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Starts the scheduler's task. Runs found `running` in `hub.db` (the hub died under
    /// them) are marked `interrupted` before anything else happens.
    pub fn start(deps: SchedulerDeps, config: SchedulerConfig) -> Arc<Scheduler> {
        let (commands, command_rx) = mpsc::channel(64);
        let (stop, stop_rx) = watch::channel(false);
        let running: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
        let wake = Arc::new(Notify::new());
        let store = deps.store.clone();
        let driver = Driver {
            ctx: Arc::new(RunContext {
                store: deps.store,
                agent: deps.agent,
                secrets: deps.secrets,
                urls: deps.urls,
                notifier: deps.notifier,
                projects_dir: deps.projects_dir,
                clock: deps.clock.clone(),
            }),
            runtime: deps.runtime,
            clock: deps.clock,
            config,
            entries: HashMap::new(),
            queues: HashMap::new(),
            runs: JoinSet::new(),
            tasks: HashMap::new(),
            running: running.clone(),
            data_version: None,
            reload: true,
            hub_tz: Tz::UTC,
            zone_checked: None,
            stop: stop_rx,
        };
        let task = tokio::spawn(driver.run(command_rx, wake.clone()));
        Arc::new(Scheduler {
            store,
            running,
            wake,
            commands,
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// The store the scheduler reads (the API writes through it, then calls
    /// [`Scheduler::nudge`]).
    pub fn store(&self) -> &Arc<ScheduleStore> {
        &self.store
    }

    /// Starts a manual run of schedule `id` now (paused or not) and answers its record;
    /// refused while that schedule has a run under way.
    pub async fn run_now(&self, id: &str) -> Result<Run, ScheduleError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::RunNow {
                id: id.to_string(),
                reply,
            })
            .await
            .map_err(|_| ScheduleError::Stopped)?;
        answer.await.map_err(|_| ScheduleError::Stopped)?
    }

    /// Whether schedule `id` has a run under way.
    pub fn is_running(&self, id: &str) -> bool {
        self.running
            .lock()
            .map(|r| r.contains_key(id))
            .unwrap_or(false)
    }

    /// Reads the schedules again now (after a write through [`Scheduler::store`], whose
    /// own connection does not move `data_version`).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Stops the scheduler: no new run starts; runs under way are stopped through the
    /// agent (recorded as `aborted`, not notified), given the grace period, then cut
    /// off; every task is joined.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "the scheduler's task failed");
            }
        }
    }
}

/// What a run task needs.
struct RunContext {
    store: Arc<ScheduleStore>,
    agent: Arc<Agent>,
    secrets: Arc<SecretStore>,
    urls: ProviderUrls,
    notifier: Arc<Notifier>,
    projects_dir: Option<PathBuf>,
    clock: Arc<dyn WallClock>,
}

/// A schedule as the scheduler holds it: parsed once per read.
struct Entry {
    schedule: Schedule,
    when: When,
}

/// The scheduler's task and all its state.
struct Driver {
    ctx: Arc<RunContext>,
    runtime: Arc<RuntimeStore>,
    clock: Arc<dyn WallClock>,
    config: SchedulerConfig,
    entries: HashMap<String, Entry>,
    /// Planned runs not started yet, per schedule, oldest first.
    queues: HashMap<String, VecDeque<PlannedRun>>,
    runs: JoinSet<()>,
    /// Which schedule each run task is for.
    /// Each run's task: its schedule and run.
    tasks: HashMap<tokio::task::Id, (String, i64)>,
    /// Schedules with a run under way (shared with the handle's `is_running`).
    running: Arc<Mutex<HashMap<String, i64>>>,
    data_version: Option<i64>,
    reload: bool,
    hub_tz: Tz,
    /// The hub zone the empty-zone schedules' future due times were last checked in.
    zone_checked: Option<Tz>,
    stop: watch::Receiver<bool>,
}

/// Runs blocking store work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ScheduleError> + Send + 'static,
) -> Result<T, ScheduleError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ScheduleError::Invalid(format!("scheduler task failed: {e}")))?
}

impl Driver {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>, wake: Arc<Notify>) {
        let store = self.ctx.store.clone();
        let now = self.clock.now_ms();
        match blocking(move || store.interrupt_running(now)).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                runs = n,
                "scheduled runs the hub died under are marked interrupted"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot mark interrupted runs"),
        }
        let mut stop = self.stop.clone();
        loop {
            if *stop.borrow() {
                break;
            }
            self.refresh().await;
            let now = self.clock.now_ms();
            self.plan_due(now).await;
            self.dispatch().await;
            let sleep = self.sleep_for(self.clock.now_ms());
            tokio::select! {
                changed = stop.changed() => if changed.is_err() {
                    // The handle is gone without a shutdown: stop as if asked.
                    break;
                },
                _ = wake.notified() => self.reload = true,
                Some(cmd) = commands.recv() => self.command(cmd).await,
                Some(ended) = self.runs.join_next_with_id(), if !self.runs.is_empty() => self.ended(ended),
                _ = tokio::time::sleep(sleep) => {}
            }
        }
        commands.close();
        while let Ok(Command::RunNow { reply, .. }) = commands.try_recv() {
            let _ = reply.send(Err(ScheduleError::Stopped));
        }
        self.stop_runs().await;
    }

    /// Reads the schedules and the hub's zone again if `hub.db` changed or a nudge
    /// asked for it.
    async fn refresh(&mut self) {
        let store = self.ctx.store.clone();
        let version = match blocking(move || store.data_version()).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read hub.db's data version");
                return;
            }
        };
        if !self.reload && self.data_version == Some(version) {
            return;
        }
        let (store, runtime) = (self.ctx.store.clone(), self.runtime.clone());
        let read = blocking(move || {
            let tz = runtime
                .load()
                .map(|s| s.tz())
                .map_err(|e| ScheduleError::Invalid(format!("runtime settings: {e}")))?;
            Ok((store.active()?, tz))
        })
        .await;
        let (schedules, hub_tz) = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the schedules");
                return;
            }
        };
        self.reload = false;
        self.data_version = Some(version);
        self.hub_tz = hub_tz;
        self.entries.clear();
        for schedule in schedules {
            match When::parse(schedule.kind, &schedule.spec) {
                Ok(when) => {
                    self.entries
                        .insert(schedule.id.clone(), Entry { schedule, when });
                }
                Err(e) => {
                    tracing::warn!(schedule = %schedule.id, error = %e, "a stored schedule cannot be read; it is passed over")
                }
            }
        }
        // A schedule paused or removed since it was queued does not start.
        let entries = &self.entries;
        self.queues.retain(|id, _| entries.contains_key(id));
        if self.zone_checked != Some(hub_tz) {
            self.follow_hub_zone().await;
        }
    }

    /// Schedules without a zone of their own follow the hub's: their future due times
    /// are computed again in the hub's zone now (past ones are left to the planner).
    async fn follow_hub_zone(&mut self) {
        let now = self.clock.now_ms();
        let hub_tz = self.hub_tz;
        let mut moved: Vec<(String, i64, Option<i64>)> = Vec::new();
        for entry in self.entries.values_mut() {
            let s = &mut entry.schedule;
            let Some(due) = s.next_due.filter(|&d| d > now) else {
                continue;
            };
            if !s.tz.trim().is_empty() {
                continue;
            }
            let anchor = s.anchor.unwrap_or(due);
            let next = entry.when.next_after(hub_tz, anchor, now);
            if next != Some(due) {
                tracing::info!(schedule = %s.id, zone = %hub_tz, "due time follows the hub's new zone");
                s.next_due = next;
                moved.push((s.id.clone(), s.updated_at, next));
            }
        }
        if !moved.is_empty() {
            let store = self.ctx.store.clone();
            let wanted = moved.len();
            match blocking(move || store.set_next_dues(&moved)).await {
                Err(e) => {
                    tracing::warn!(error = %e, "cannot store due times moved to the hub's zone");
                    return;
                }
                // Some were changed meanwhile: read them again.
                Ok(stored) if stored < wanted => self.reload = true,
                Ok(_) => {}
            }
        }
        self.zone_checked = Some(hub_tz);
    }

    fn is_busy(&self, id: &str) -> bool {
        self.running
            .lock()
            .map(|r| r.contains_key(id))
            .unwrap_or(false)
            || self.queues.get(id).is_some_and(|q| !q.is_empty())
    }

    /// Plans every schedule that is due, not running and has nothing queued; stores
    /// the due times that follow.
    async fn plan_due(&mut self, now: i64) {
        let hub_tz = self.hub_tz;
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.schedule.next_due.is_some_and(|d| d <= now))
            .map(|(id, _)| id.clone())
            .filter(|id| !self.is_busy(id))
            .collect();
        let mut updates = Vec::with_capacity(due.len());
        for id in due {
            let Some(entry) = self.entries.get_mut(&id) else {
                continue;
            };
            let s = &mut entry.schedule;
            let Some(next_due) = s.next_due else { continue };
            let tz = match timing::zone(&s.tz, hub_tz) {
                Ok(tz) => tz,
                Err(e) => {
                    tracing::warn!(schedule = %id, error = %e, "schedule passed over");
                    continue;
                }
            };
            let plan = timing::plan(
                &entry.when,
                tz,
                s.anchor.unwrap_or(next_due),
                next_due,
                s.missed,
                s.catch_up_max,
                now,
            );
            if plan.runs.is_empty() {
                tracing::info!(schedule = %id, missed_since = next_due, "missed due times skipped");
            }
            s.next_due = plan.next_due;
            updates.push((id.clone(), s.updated_at, plan.next_due));
            if !plan.runs.is_empty() {
                self.queues.insert(id, plan.runs.into());
            }
        }
        if updates.is_empty() {
            return;
        }
        let store = self.ctx.store.clone();
        let wanted = updates.len();
        match blocking(move || store.set_next_dues(&updates)).await {
            Err(e) => tracing::warn!(error = %e, "cannot store the schedules' next due times"),
            // The owner changed some meanwhile: their change stands; read them again.
            Ok(stored) if stored < wanted => self.reload = true,
            Ok(_) => {}
        }
    }

    /// Starts queued runs, oldest due time first, while there is room.
    async fn dispatch(&mut self) {
        while self.runs.len() < self.config.max_concurrent_runs {
            let running = self.running.lock().map(|r| r.clone()).unwrap_or_default();
            let next = self
                .queues
                .iter()
                .filter(|(id, q)| !q.is_empty() && !running.contains_key(*id))
                .filter_map(|(id, q)| q.front().map(|r| (r.due_at, id.clone())))
                .min();
            let Some((_, id)) = next else { return };
            let Some(planned) = self.queues.get_mut(&id).and_then(VecDeque::pop_front) else {
                return;
            };
            if self.queues.get(&id).is_some_and(VecDeque::is_empty) {
                self.queues.remove(&id);
            }
            let Some(schedule) = self.entries.get(&id).map(|e| e.schedule.clone()) else {
                continue;
            };
            if let Err(e) = self.start(schedule, planned.reason, planned.due_at).await {
                tracing::warn!(schedule = %id, error = %e, "cannot start a scheduled run");
            }
        }
    }

    /// Records a run of `schedule` and spawns it.
    async fn start(
        &mut self,
        schedule: Schedule,
        reason: RunReason,
        due_at: i64,
    ) -> Result<Run, ScheduleError> {
        let started_at = self.clock.now_ms();
        let (store, s) = (self.ctx.store.clone(), schedule.clone());
        let run = blocking(move || store.start_run(&s, reason, due_at, started_at)).await?;
        tracing::info!(schedule = %schedule.id, run = run.id, reason = reason.as_str(), late_ms = started_at - due_at, "scheduled run starts");
        if let Ok(mut r) = self.running.lock() {
            r.insert(schedule.id.clone(), run.id);
        }
        let (ctx, stop, record) = (self.ctx.clone(), self.stop.clone(), run.clone());
        let key = (schedule.id.clone(), run.id);
        let running = self.running.clone();
        let task = self
            .runs
            .spawn(execute(ctx, schedule, record, stop, running));
        self.tasks.insert(task.id(), key);
        Ok(run)
    }

    async fn command(&mut self, cmd: Command) {
        match cmd {
            Command::RunNow { id, reply } => {
                let answer = self.run_now(&id).await;
                let _ = reply.send(answer);
            }
        }
    }

    async fn run_now(&mut self, id: &str) -> Result<Run, ScheduleError> {
        if self.is_busy(id) {
            return Err(ScheduleError::Busy(id.to_string()));
        }
        let (store, key) = (self.ctx.store.clone(), id.to_string());
        let schedule = blocking(move || store.get(&key))
            .await?
            .ok_or_else(|| ScheduleError::NotFound(id.to_string()))?;
        let now = self.clock.now_ms();
        self.start(schedule, RunReason::Manual, now).await
    }

    fn ended(&mut self, ended: Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
        let task = match ended {
            Ok((task, _)) => task,
            Err(e) => {
                tracing::error!(error = %e, "a scheduled run's task failed");
                e.id()
            }
        };
        if let Some((schedule, run)) = self.tasks.remove(&task) {
            done_running(&self.running, &schedule, run);
        }
    }

    /// How long to sleep: until the soonest due time of an idle schedule, at most the
    /// poll interval (and never more than [`MAX_SLEEP`]).
    fn sleep_for(&self, now: i64) -> Duration {
        let cap = self.config.poll.min(MAX_SLEEP);
        let soonest = self
            .entries
            .iter()
            .filter(|(id, _)| !self.is_busy(id))
            .filter_map(|(_, e)| e.schedule.next_due)
            .min();
        match soonest {
            Some(due) => Duration::from_millis((due - now).max(0) as u64).min(cap),
            None => cap,
        }
    }

    /// At shutdown: every run task was told to stop (the watch); waits for them to end,
    /// then cuts off what is left.
    async fn stop_runs(&mut self) {
        let grace = self.config.shutdown_grace;
        let runs = &mut self.runs;
        let drained =
            tokio::time::timeout(grace, async { while runs.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                left = self.runs.len(),
                "scheduled runs did not stop in time; cutting them off (the next start marks them interrupted)"
            );
        }
        self.runs.shutdown().await;
    }
}

/// The change that resumes `schedule` at `now`: unpaused, due at its first due time
/// after now (an interval stays on its anchor's grid; what fell due while it was paused
/// does not run).
pub fn resume_patch(
    schedule: &Schedule,
    hub_tz: Tz,
    now: i64,
) -> Result<SchedulePatch, ScheduleError> {
    let when = When::parse(schedule.kind, &schedule.spec)?;
    let tz = timing::zone(&schedule.tz, hub_tz)?;
    let anchor = schedule.anchor.unwrap_or(now);
    Ok(SchedulePatch {
        paused: Some(false),
        next_due: Some(when.next_after(tz, anchor, now)),
        ..SchedulePatch::default()
    })
}

/// Checks a schedule's `model`: `provider/model` with a provider the hub knows.
pub fn check_model(model: &str) -> Result<(), ScheduleError> {
    let m: ModelRef = model.parse().map_err(|e| {
        ScheduleError::Invalid(format!("model {model:?} is not provider/model: {e}"))
    })?;
    if !crate::chat::PROVIDERS.contains(&m.provider.as_str()) {
        return Err(ScheduleError::Invalid(format!(
            "model {model:?}: unknown provider {:?} (use {})",
            m.provider,
            crate::chat::PROVIDERS.join(", ")
        )));
    }
    Ok(())
}

/// The model a schedule asks for, with its provider's client (blocking: reads the
/// secret store).
fn choose_model(
    model: &str,
    urls: &ProviderUrls,
    secrets: &SecretStore,
) -> Result<ModelChoice, String> {
    let m: ModelRef = model
        .parse()
        .map_err(|e| format!("model {model:?} is not provider/model: {e}"))?;
    let provider = crate::chat::provider_for(&m, urls, secrets)
        .map_err(|e| format!("model {model:?}: {e}"))?;
    Ok(ModelChoice {
        model: m.model,
        provider,
    })
}

/// Resolves once the scheduler stops (or its handle is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Cuts `text` to [`NOTIFICATION_BODY_MAX`] characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(NOTIFICATION_BODY_MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Marks `run` of `schedule` no longer under way (unless a later run took its place).
fn done_running(running: &Mutex<HashMap<String, i64>>, schedule: &str, run: i64) {
    if let Ok(mut r) = running.lock() {
        if r.get(schedule) == Some(&run) {
            r.remove(schedule);
        }
    }
}

/// One run: the agent, the record of how it ended, the notification.
async fn execute(
    ctx: Arc<RunContext>,
    schedule: Schedule,
    run: Run,
    mut stop: watch::Receiver<bool>,
    running: Arc<Mutex<HashMap<String, i64>>>,
) {
    let model = match schedule.model.clone() {
        None => Ok(None),
        Some(m) => {
            let (urls, secrets) = (ctx.urls.clone(), ctx.secrets.clone());
            tokio::task::spawn_blocking(move || choose_model(&m, &urls, &secrets))
                .await
                .unwrap_or_else(|e| Err(format!("model: {e}")))
                .map(Some)
        }
    };
    let end = match model {
        Err(error) => RunEnd {
            status: RunStatus::Failed,
            input_tokens: 0,
            output_tokens: 0,
            answer: None,
            error: Some(error),
        },
        Ok(model) => {
            if let Some(dir) = &ctx.projects_dir {
                crate::chat::ensure_project_dir(dir, run.project);
            }
            let options = RunOptions {
                trigger: Trigger::Scheduled {
                    auto_approve: schedule.auto_approve.clone(),
                    approval_timeout: Duration::from_secs(schedule.approval_wait_secs),
                },
                model,
                // A task's name and notes come from whichever device wrote them.
                untrusted_message: schedule.task.is_some(),
            };
            let invoke =
                ctx.agent
                    .invoke_with(&run.conversation, run.project, &schedule.prompt, options);
            tokio::pin!(invoke);
            let result = tokio::select! {
                r = &mut invoke => r,
                _ = stopped(&mut stop) => loop {
                    // Again until it ends: an abort that came before the invocation
                    // took its generation would be lost.
                    ctx.agent.abort(run.project, &run.conversation);
                    if let Ok(r) = tokio::time::timeout(Duration::from_millis(200), &mut invoke).await {
                        break r;
                    }
                },
            };
            match result {
                Ok(out) => RunEnd {
                    status: if out.reason == "aborted" {
                        RunStatus::Aborted
                    } else {
                        RunStatus::Ok
                    },
                    input_tokens: out.usage.input_tokens,
                    output_tokens: out.usage.output_tokens,
                    answer: Some(ctx.agent.redact_text(&out.text)),
                    error: (out.reason == "aborted").then(|| "stopped before it finished".into()),
                },
                Err(e) => RunEnd {
                    status: RunStatus::Failed,
                    input_tokens: 0,
                    output_tokens: 0,
                    answer: None,
                    error: Some(ctx.agent.redact_text(&e.to_string())),
                },
            }
        }
    };
    // The agent is done: from here on the schedule may run again, before its record
    // is written, so whoever sees the run ended can start the next at once.
    done_running(&running, &schedule.id, run.id);
    let ended_at = ctx.clock.now_ms();
    let (store, record) = (ctx.store.clone(), end.clone());
    if let Err(e) = blocking(move || store.finish_run(run.id, &record, ended_at)).await {
        tracing::warn!(run = run.id, error = %e, "cannot record how a scheduled run ended");
    }
    tracing::info!(schedule = %schedule.id, run = run.id, status = end.status.as_str(), "scheduled run ended");
    let (kind, title, body) = match end.status {
        RunStatus::Ok => (
            NotificationKind::RunFinished,
            format!("{} finished", schedule.name),
            cut(end.answer.as_deref().unwrap_or_default()),
        ),
        RunStatus::Failed => (
            NotificationKind::RunFailed,
            format!("{} failed", schedule.name),
            cut(end.error.as_deref().unwrap_or_default()),
        ),
        // Stopped (by the owner or the hub's shutdown): nothing to tell.
        _ => return,
    };
    let n = Notification {
        kind,
        title,
        body,
        project: Some(run.project),
        refs: NotificationRefs {
            schedule: Some(schedule.id.clone()),
            run: Some(run.id),
            conversation: Some(run.conversation.clone()),
            ..NotificationRefs::default()
        },
    };
    if let Err(e) = ctx.notifier.notify(n).await {
        tracing::warn!(run = run.id, error = %e, "cannot notify a scheduled run's end");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_body_is_cut_at_a_character_boundary() {
        let long = "é".repeat(NOTIFICATION_BODY_MAX + 10);
        let cut = cut(&long);
        assert_eq!(cut.chars().count(), NOTIFICATION_BODY_MAX + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(super::cut("short"), "short");
    }
}
