//! The scheduler on a controllable clock: tokio's time is paused (it moves only when
//! every task waits, straight to the next timer) and the scheduler's wall clock is a
//! [`FakeClock`] that follows tokio's time plus an offset the test moves. Moving the
//! offset while tokio's time stands still is the machine sleeping; stopping the
//! scheduler, moving the offset and starting a new one over the same `hub.db` is the
//! hub being down. Runs go through the real agent to a fake Anthropic server on
//! 127.0.0.1 (answering every request, optionally slowly or with an error), with real
//! SQLite under a temporary directory.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use axum::{body::Body, extract::State, response::Response, routing::post, Router};
use chrono::TimeZone;
use hearth_hub::{
    agent::{
        provider::{ProviderClient, ProviderKind},
        registry::{Effect, ToolDescriptor, ToolFuture, ToolHandler, ToolSource},
        runner::{Agent, AgentConfig},
        tools::{Risk, ToolContext},
    },
    chat::ProviderUrls,
    events::EventHub,
    notify::Notifier,
    scheduler::{
        timing, MissedPolicy, NewSchedule, Run, RunReason, RunStatus, Schedule, ScheduleError,
        ScheduleKind, ScheduleStore, Scheduler, SchedulerConfig, SchedulerDeps, WallClock,
    },
    secrets::SecretStore,
    settings::{RuntimePatch, RuntimeStore},
};
use hearth_sync::{DocId, DocumentStore};
use serde_json::{json, Value};

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;

/// Wall time = `base` + tokio's elapsed time + `offset` (the test's jumps).
struct FakeClock {
    base: i64,
    start: tokio::time::Instant,
    offset: AtomicI64,
}

impl FakeClock {
    fn new(base: i64) -> Arc<Self> {
        Arc::new(Self {
            base,
            start: tokio::time::Instant::now(),
            offset: AtomicI64::new(0),
        })
    }

    /// The wall clock jumps by `ms` (tokio's time does not move).
    fn jump(&self, ms: i64) {
        self.offset.fetch_add(ms, Ordering::SeqCst);
    }
}

impl WallClock for FakeClock {
    fn now_ms(&self) -> i64 {
        self.base + self.start.elapsed().as_millis() as i64 + self.offset.load(Ordering::SeqCst)
    }
}

// ---- the fake model ----------------------------------------------------------------------

#[derive(Default)]
struct Model {
    /// How long each answer takes (tokio time).
    delay_ms: AtomicU64,
    /// Answer every request with a 400.
    fail: AtomicBool,
    requests: AtomicU64,
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

fn text_turn(text: &str) -> String {
    sse(&[
        json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}),
        json!({"type":"message_stop"}),
    ])
}

fn shell_turn() -> String {
    sse(&[
        json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"test_shell","input":{}}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}),
        json!({"type":"message_stop"}),
    ])
}

async fn answer(State(m): State<Arc<Model>>, body: String) -> Response {
    let n = m.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let delay = m.delay_ms.load(Ordering::SeqCst);
    if m.fail.load(Ordering::SeqCst) {
        return Response::builder()
            .status(400)
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"type":"error","error":{"type":"invalid_request_error","message":"the fake model refuses"}}).to_string(),
            ))
            .unwrap_or_default();
    }
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let last = v["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let wants_shell = last.to_string().contains("use the shell");
    let body = if wants_shell {
        shell_turn()
    } else {
        text_turn(&format!("Answer {n}.\nSecond line."))
    };
    // A slow answer keeps the stream alive with an SSE comment a minute (the client's
    // read timeout is two), then answers.
    let pings = delay / 60_000;
    let rest = delay % 60_000;
    let chunks = futures_util::stream::unfold(0u64, move |i| {
        let body = body.clone();
        async move {
            if i < pings {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Some((Ok::<_, std::io::Error>(": ping\n\n".to_string()), i + 1))
            } else if i == pings {
                tokio::time::sleep(Duration::from_millis(rest)).await;
                Some((Ok(body), i + 1))
            } else {
                None
            }
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(chunks))
        .unwrap_or_default()
}

async fn serve_model() -> (String, Arc<Model>) {
    let model = Arc::new(Model::default());
    let app = Router::new()
        .route("/v1/messages", post(answer))
        .with_state(model.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), model)
}

// ---- a hub's scheduler over a data directory ---------------------------------------------

struct Hub {
    scheduler: Arc<Scheduler>,
    store: Arc<ScheduleStore>,
    agent: Arc<Agent>,
    runtime: Arc<RuntimeStore>,
    general: DocId,
}

async fn start(home: &Path, model_url: &str, clock: Arc<FakeClock>) -> Hub {
    start_with(home, model_url, clock, SchedulerConfig::default()).await
}

async fn start_with(
    home: &Path,
    model_url: &str,
    clock: Arc<FakeClock>,
    config: SchedulerConfig,
) -> Hub {
    let hub_db = home.join("hub.db");
    let docs = DocumentStore::open(home.join("hearth.db")).expect("store");
    let general = hearth_hub::projects::ensure_general(&docs, &hub_db)
        .await
        .expect("general");
    let provider = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        model_url,
        Some("k".into()),
    )
    .expect("provider");
    let agent = Arc::new(
        Agent::new(
            docs,
            provider,
            AgentConfig {
                model: "fake-model".into(),
                // The interactive wait, which a scheduled run's own wait replaces.
                approval_timeout: Duration::from_secs(300),
                ..AgentConfig::default()
            },
            &hub_db,
        )
        .expect("agent"),
    );
    agent.tools().set_source(
        ToolSource::Plugin {
            plugin: "test".into(),
            server: None,
        },
        vec![shell_tool()],
    );
    let secrets =
        Arc::new(SecretStore::open(&hub_db, &home.join("server.secret")).expect("secrets"));
    let runtime = Arc::new(RuntimeStore::open(&hub_db).expect("runtime"));
    if runtime.load().expect("settings").timezone != "Europe/Paris" {
        runtime
            .update(RuntimePatch {
                timezone: Some("Europe/Paris".into()),
                ..RuntimePatch::default()
            })
            .expect("zone");
    }
    let events = Arc::new(EventHub::new());
    let notifier = Arc::new(Notifier::open(&hub_db, events).expect("notifier"));
    let store = Arc::new(ScheduleStore::open(&hub_db).expect("schedules"));
    let url = model_url.to_string();
    let scheduler = Scheduler::start(
        SchedulerDeps {
            store: store.clone(),
            runtime: runtime.clone(),
            agent: agent.clone(),
            secrets,
            urls: ProviderUrls {
                anthropic: url.clone(),
                openai: url.clone(),
                ollama: url,
            },
            notifier,
            projects_dir: None,
            clock,
        },
        config,
    );
    Hub {
        scheduler,
        store,
        agent,
        runtime,
        general,
    }
}

struct Shell;

impl ToolHandler for Shell {
    fn call(&self, _ctx: ToolContext, _args: Value) -> ToolFuture {
        Box::pin(async move { Ok(json!({"exit": 0, "stdout": "notes.txt"})) })
    }
}

/// A risky tool: a scheduled run asks the owner before using it.
fn shell_tool() -> ToolDescriptor {
    ToolDescriptor {
        name: "test_shell".into(),
        description: "Runs a command.".into(),
        schema: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        risk: Risk::Risky,
        default_on: true,
        effect: Effect::RunsCommands,
        reads_untrusted: false,
        risk_of_call: None,
        only_in: None,
        source: ToolSource::Plugin {
            plugin: "test".into(),
            server: None,
        },
        handler: Arc::new(Shell),
    }
}

/// A schedule created as the API creates it, first due computed at the clock's now.
fn add(
    hub: &Hub,
    clock: &FakeClock,
    kind: ScheduleKind,
    spec: &str,
    tz: &str,
    missed: MissedPolicy,
) -> Schedule {
    let when = timing::When::parse(kind, spec).expect("spec");
    let zone = timing::zone(tz, hub.runtime.load().expect("settings").tz()).expect("zone");
    let (anchor, first) = timing::first_due(&when, zone, clock.now_ms()).expect("first due");
    let s = hub
        .store
        .create(NewSchedule {
            id: None,
            name: format!("every {spec}"),
            project: hub.general,
            task: None,
            kind,
            spec: spec.into(),
            tz: tz.into(),
            prompt: "Summarise my day.".into(),
            model: None,
            auto_approve: Vec::new(),
            missed,
            catch_up_max: 3,
            approval_wait_secs: 86_400,
            anchor,
            next_due: Some(first),
        })
        .expect("create");
    hub.scheduler.nudge();
    s
}

fn runs(hub: &Hub, id: &str) -> Vec<Run> {
    let (mut rows, _) = hub.store.runs(id, 100, 0).expect("runs");
    rows.reverse();
    rows
}

fn ended(hub: &Hub, id: &str) -> Vec<Run> {
    runs(hub, id)
        .into_iter()
        .filter(|r| r.status != RunStatus::Running)
        .collect()
}

/// Lets tokio's (paused) time run in small steps until `done` holds, at most `limit`.
async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    done()
}

fn notifications(home: &Path) -> Vec<(String, String, String)> {
    let conn = rusqlite::Connection::open(home.join("hub.db")).expect("db");
    let mut stmt = conn
        .prepare("SELECT kind, title, body FROM notifications ORDER BY id")
        .expect("query");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("notifications")
}

fn paris(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
    chrono_tz::Europe::Paris
        .with_ymd_and_hms(y, mo, d, h, mi, 0)
        .earliest()
        .expect("a Paris time")
        .timestamp_millis()
}

// ---- tests --------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_interval_fires_on_time_and_records_its_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, model) = serve_model().await;
    let clock = FakeClock::new(paris(2026, 5, 4, 8, 0));
    let hub = start(dir.path(), &url, clock.clone()).await;
    let s = add(
        &hub,
        &clock,
        ScheduleKind::Interval,
        "30min",
        "",
        MissedPolicy::RunOnce,
    );
    assert_eq!(s.next_due, Some(clock.now_ms() + 30 * MIN));
    // Nothing before its due time.
    tokio::time::sleep(Duration::from_secs(29 * 60)).await;
    assert!(runs(&hub, &s.id).is_empty());
    assert!(
        until(Duration::from_secs(5 * 60), || ended(&hub, &s.id).len()
            == 1)
        .await
    );
    assert!(
        until(Duration::from_secs(40 * 60), || ended(&hub, &s.id).len()
            == 2)
        .await
    );
    let done = ended(&hub, &s.id);
    for (i, r) in done.iter().enumerate() {
        assert_eq!(r.reason, RunReason::Due);
        assert_eq!(r.due_at, s.next_due.expect("due") + i as i64 * 30 * MIN);
        assert!(r.started_at - r.due_at < 2_000, "started late: {r:?}");
        assert_eq!(r.status, RunStatus::Ok, "{r:?}");
        assert_eq!((r.input_tokens, r.output_tokens), (100, 7));
        assert!(
            r.answer
                .as_deref()
                .is_some_and(|a| a.starts_with("Answer ")),
            "{r:?}"
        );
        assert_eq!(r.conversation, format!("schedule-{}-{}", s.id, r.id));
    }
    assert_eq!(model.requests.load(Ordering::SeqCst), 2);
    let n = notifications(dir.path());
    assert_eq!(n.len(), 2, "{n:?}");
    assert!(n.iter().all(|(kind, title, body)| kind == "run_finished"
        && title.contains("every 30min")
        && body.starts_with("Answer ")));
    let after = hub.store.get(&s.id).expect("get").expect("exists");
    assert_eq!(after.next_due, Some(s.next_due.expect("due") + 60 * MIN));
    hub.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_cron_schedule_fires_across_a_daylight_saving_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, _model) = serve_model().await;
    // Paris skips 02:00-03:00 on 2026-03-29: a 02:30 job runs at 03:00 CEST that day.
    let clock = FakeClock::new(paris(2026, 3, 28, 12, 0));
    let hub = start(dir.path(), &url, clock.clone()).await;
    let s = add(
        &hub,
        &clock,
        ScheduleKind::Cron,
        "30 2 * * *",
        "Europe/Paris",
        MissedPolicy::Skip,
    );
    let after_change = chrono_tz::Europe::Paris
        .with_ymd_and_hms(2026, 3, 29, 3, 0, 0)
        .single()
        .expect("03:00 CEST")
        .timestamp_millis();
    assert_eq!(s.next_due, Some(after_change));
    // The night passes (the wall clock moves to 01:50 CET, just before the change).
    clock.jump(paris(2026, 3, 29, 1, 50) - clock.now_ms());
    assert!(
        until(Duration::from_secs(15 * 60), || ended(&hub, &s.id).len()
            == 1)
        .await
    );
    let r = &ended(&hub, &s.id)[0];
    assert_eq!((r.due_at, r.reason), (after_change, RunReason::Due));
    let next = hub.store.get(&s.id).expect("get").expect("exists").next_due;
    assert_eq!(next, Some(paris(2026, 3, 30, 2, 30)));
    hub.scheduler.shutdown().await;
}

/// Downtime: the hub stops, the wall clock moves 5 h 30 min, the hub starts again over
/// the same hub.db. Due times passed: +1 h … +5 h after creation.
#[tokio::test(start_paused = true)]
async fn each_missed_run_policy_after_the_hub_was_down() {
    let (url, _model) = serve_model().await;
    for (policy, expect) in [
        (MissedPolicy::Skip, vec![]),
        (MissedPolicy::RunOnce, vec![(4, RunReason::Missed)]),
        (
            MissedPolicy::CatchUp,
            vec![
                (2, RunReason::CatchUp),
                (3, RunReason::CatchUp),
                (4, RunReason::CatchUp),
            ],
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = FakeClock::new(paris(2026, 5, 4, 8, 0));
        let hub = start(dir.path(), &url, clock.clone()).await;
        let s = add(&hub, &clock, ScheduleKind::Interval, "1h", "", policy);
        let anchor = s.anchor.expect("anchor");
        tokio::time::sleep(Duration::from_secs(2)).await;
        hub.scheduler.shutdown().await;
        drop(hub);
        clock.jump(5 * HOUR + 30 * MIN);
        let hub = start(dir.path(), &url, clock.clone()).await;
        // The schedule survived the restart.
        assert_eq!(
            hub.store.get(&s.id).expect("get").map(|x| x.name),
            Some(s.name.clone())
        );
        let want = expect.len();
        assert!(
            until(Duration::from_secs(60), || ended(&hub, &s.id).len() == want).await,
            "{policy:?}"
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        let got: Vec<(i64, RunReason)> = ended(&hub, &s.id)
            .iter()
            .map(|r| ((r.due_at - anchor) / HOUR, r.reason))
            .collect();
        assert_eq!(got, expect, "{policy:?}");
        // One after another, never overlapping.
        let done = ended(&hub, &s.id);
        for pair in done.windows(2) {
            assert!(
                pair[1].started_at >= pair[0].ended_at.expect("ended"),
                "{pair:?}"
            );
        }
        let next = hub.store.get(&s.id).expect("get").expect("exists").next_due;
        assert_eq!(
            next,
            Some(anchor + 5 * HOUR),
            "{policy:?}: first due after now"
        );
        hub.scheduler.shutdown().await;
    }
}

/// Sleep: the wall clock jumps while tokio's time stands still (a runtime's timers do
/// not run while the machine sleeps); the scheduler notices within 30 s of tokio time.
#[tokio::test(start_paused = true)]
async fn each_missed_run_policy_after_the_machine_slept() {
    let (url, _model) = serve_model().await;
    for (policy, want) in [
        (MissedPolicy::Skip, 0),
        (MissedPolicy::RunOnce, 1),
        (MissedPolicy::CatchUp, 3),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = FakeClock::new(paris(2026, 5, 4, 8, 0));
        let hub = start(dir.path(), &url, clock.clone()).await;
        let s = add(&hub, &clock, ScheduleKind::Interval, "1h", "", policy);
        let anchor = s.anchor.expect("anchor");
        tokio::time::sleep(Duration::from_secs(5)).await;
        clock.jump(4 * HOUR + 10 * MIN);
        let woke = tokio::time::Instant::now();
        assert!(
            until(Duration::from_secs(30), || {
                hub.store.get(&s.id).ok().flatten().and_then(|x| x.next_due)
                    == Some(anchor + 4 * HOUR)
            })
            .await,
            "{policy:?}: noticed within 30 s"
        );
        assert!(woke.elapsed() <= Duration::from_secs(30));
        assert!(until(Duration::from_secs(60), || ended(&hub, &s.id).len() == want).await);
        let reasons: Vec<RunReason> = ended(&hub, &s.id).iter().map(|r| r.reason).collect();
        match policy {
            MissedPolicy::Skip => assert!(reasons.is_empty()),
            MissedPolicy::RunOnce => assert_eq!(reasons, vec![RunReason::Missed]),
            MissedPolicy::CatchUp => assert_eq!(reasons, vec![RunReason::CatchUp; 3]),
        }
        hub.scheduler.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_that_outlasts_its_interval_never_overlaps_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, model) = serve_model().await;
    // Each answer takes 50 minutes; the schedule is every 30.
    model.delay_ms.store(50 * 60_000, Ordering::SeqCst);
    let clock = FakeClock::new(paris(2026, 5, 4, 8, 0));
    let hub = start(dir.path(), &url, clock.clone()).await;
    let s = add(
        &hub,
        &clock,
        ScheduleKind::Interval,
        "30min",
        "",
        MissedPolicy::RunOnce,
    );
    assert!(
        until(Duration::from_secs(40 * 60), || hub
            .scheduler
            .is_running(&s.id))
        .await
    );
    // A manual run is refused while it runs.
    match hub.scheduler.run_now(&s.id).await {
        Err(ScheduleError::Busy(id)) => assert_eq!(id, s.id),
        other => panic!("a second run started: {other:?}"),
    }
    assert!(
        until(Duration::from_secs(3 * 3600), || ended(&hub, &s.id).len()
            >= 3)
        .await
    );
    let done = ended(&hub, &s.id);
    for pair in done.windows(2) {
        assert!(
            pair[1].started_at >= pair[0].ended_at.expect("ended"),
            "overlap: {pair:?}"
        );
    }
    // The due time reached during the first run is judged as missed when it ends.
    assert_eq!(done[0].reason, RunReason::Due);
    assert_eq!(done[1].reason, RunReason::Missed);
    assert!(
        runs(&hub, &s.id)
            .iter()
            .filter(|r| r.status == RunStatus::Running)
            .count()
            <= 1
    );
    hub.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn empty_zone_schedules_follow_the_hubs_zone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, _model) = serve_model().await;
    let clock = FakeClock::new(paris(2026, 5, 4, 12, 0));
    let hub = start(dir.path(), &url, clock.clone()).await;
    let follows = add(
        &hub,
        &clock,
        ScheduleKind::Cron,
        "0 9 * * *",
        "",
        MissedPolicy::Skip,
    );
    let own = add(
        &hub,
        &clock,
        ScheduleKind::Cron,
        "0 9 * * *",
        "Europe/Paris",
        MissedPolicy::Skip,
    );
    assert_eq!(follows.next_due, Some(paris(2026, 5, 5, 9, 0)));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The owner moves the hub to New York (another connection writes hub.db).
    RuntimeStore::open(&dir.path().join("hub.db"))
        .expect("runtime")
        .update(RuntimePatch {
            timezone: Some("America/New_York".into()),
            ..RuntimePatch::default()
        })
        .expect("zone");
    // 06:00 in New York: 9:00 comes the same day.
    let new_york = chrono_tz::America::New_York
        .with_ymd_and_hms(2026, 5, 4, 9, 0, 0)
        .single()
        .expect("9:00 in New York")
        .timestamp_millis();
    assert!(
        until(Duration::from_secs(5), || {
            hub.store
                .get(&follows.id)
                .ok()
                .flatten()
                .and_then(|s| s.next_due)
                == Some(new_york)
        })
        .await
    );
    let mine = hub.store.get(&own.id).expect("get").expect("exists");
    assert_eq!(
        mine.next_due,
        Some(paris(2026, 5, 5, 9, 0)),
        "its own zone stays"
    );
    hub.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_scheduled_approval_waits_longer_than_an_interactive_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, _model) = serve_model().await;
    let clock = FakeClock::new(paris(2026, 5, 4, 8, 0));
    let hub = start(dir.path(), &url, clock.clone()).await;
    let s = hub
        .store
        .create(NewSchedule {
            id: None,
            name: "tidy".into(),
            project: hub.general,
            task: None,
            kind: ScheduleKind::Once,
            spec: "2026-05-04T08:05".into(),
            tz: String::new(),
            prompt: "Please use the shell to list my files.".into(),
            model: None,
            auto_approve: Vec::new(),
            missed: MissedPolicy::RunOnce,
            catch_up_max: 3,
            approval_wait_secs: 3_600,
            anchor: None,
            next_due: Some(paris(2026, 5, 4, 8, 5)),
        })
        .expect("create");
    hub.scheduler.nudge();
    let waiting = |a: &Agent| {
        a.approvals()
            .into_iter()
            .find(|x| x.resolution.is_none() && x.conversation.starts_with("schedule-"))
    };
    assert!(
        until(Duration::from_secs(10 * 60), || waiting(&hub.agent)
            .is_some())
        .await
    );
    // Ten minutes: twice the interactive wait, still waiting for the owner.
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    let asked = waiting(&hub.agent).expect("still waiting");
    assert_eq!(asked.tool, "test_shell");
    assert!(runs(&hub, &s.id)
        .iter()
        .all(|r| r.status == RunStatus::Running));
    hub.agent.decide(&asked.id, None, true);
    assert!(until(Duration::from_secs(60), || ended(&hub, &s.id).len() == 1).await);
    let r = &ended(&hub, &s.id)[0];
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    assert_eq!((r.input_tokens, r.output_tokens), (200, 12));
    // A one-shot schedule is done after its run.
    let after = hub.store.get(&s.id).expect("get").expect("exists");
    assert_eq!(after.next_due, None);
    hub.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn failed_runs_notify_and_a_run_stopped_by_shutdown_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, model) = serve_model().await;
    let clock = FakeClock::new(paris(2026, 5, 4, 8, 0));
    let hub = start(dir.path(), &url, clock.clone()).await;
    // A model the hub has no provider for fails the run with a clear error.
    let mut s = add(
        &hub,
        &clock,
        ScheduleKind::Interval,
        "1h",
        "",
        MissedPolicy::Skip,
    );
    s = hub
        .store
        .update(
            &s.id,
            hearth_hub::scheduler::SchedulePatch {
                model: Some(Some("nowhere/big-model".into())),
                ..Default::default()
            },
        )
        .expect("model");
    let run = hub.scheduler.run_now(&s.id).await.expect("run now");
    assert_eq!(run.reason, RunReason::Manual);
    assert!(until(Duration::from_secs(30), || ended(&hub, &s.id).len() == 1).await);
    let r = &ended(&hub, &s.id)[0];
    assert_eq!(r.status, RunStatus::Failed);
    assert!(
        r.error.as_deref().is_some_and(|e| e.contains("nowhere")),
        "{r:?}"
    );
    // The provider refusing fails it too.
    hub.store
        .update(
            &s.id,
            hearth_hub::scheduler::SchedulePatch {
                model: Some(None),
                ..Default::default()
            },
        )
        .expect("model");
    model.fail.store(true, Ordering::SeqCst);
    hub.scheduler.run_now(&s.id).await.expect("run now");
    assert!(until(Duration::from_secs(30), || ended(&hub, &s.id).len() == 2).await);
    assert_eq!(ended(&hub, &s.id)[1].status, RunStatus::Failed);
    let n = notifications(dir.path());
    assert_eq!(n.len(), 2, "{n:?}");
    assert!(n
        .iter()
        .all(|(kind, title, _)| kind == "run_failed" && title.ends_with("failed")));
    // A slow run stopped by the hub's shutdown ends as aborted, without a notification.
    model.fail.store(false, Ordering::SeqCst);
    model.delay_ms.store(3_600_000, Ordering::SeqCst);
    hub.scheduler.run_now(&s.id).await.expect("run now");
    tokio::time::sleep(Duration::from_secs(5)).await;
    hub.scheduler.shutdown().await;
    let last = runs(&hub, &s.id).pop().expect("a run");
    assert_eq!(last.status, RunStatus::Aborted, "{last:?}");
    assert_eq!(notifications(dir.path()).len(), 2);
    // A run found under way at start-up (the hub died) is marked interrupted.
    let dead = hub
        .store
        .start_run(&s, RunReason::Due, clock.now_ms(), clock.now_ms())
        .expect("a run");
    drop(hub);
    let hub = start(dir.path(), &url, clock.clone()).await;
    assert!(
        until(Duration::from_secs(5), || {
            hub.store.run(dead.id).ok().flatten().map(|r| r.status) == Some(RunStatus::Interrupted)
        })
        .await
    );
    hub.scheduler.shutdown().await;
}
