//! Schedule routes: the schedules in `hub.db` and their runs.
//!
//! - `GET /schedules?project=&task=&limit=&offset=` (a page), `POST /schedules {name,
//!   project (name or id), kind, spec, tz?, prompt, model?, auto_approve?, missed?,
//!   catch_up_max?, approval_wait_secs?}` (201)
//! - `GET|PATCH|DELETE /schedules/{id}` (PATCH: any of the creation fields; a new kind,
//!   spec or zone starts the schedule again from now)
//! - `POST /schedules/{id}/pause`, `/resume` (due again from now: what fell due while
//!   paused does not run), `/run` (a manual run now: 202 `{run}`; 409 while it runs)
//! - `GET /schedules/{id}/runs?limit=&offset=` (a page, newest first), `GET /runs/{id}`
//!
//! A schedule answers with `describe` (its timing in words) and `running`. Specs and
//! zones are checked by the scheduler's timing ([`When::parse`], [`timing::zone`]): a bad
//! one is a 400 naming the problem. Every write nudges the scheduler.
//!
//! Relayed (see `caller`): reads reach a scoped device's subtree only (a schedule or run
//! outside it is not found); writes need the owner or a full-scope admin device, since a
//! schedule's `auto_approve` lets its runs use tools unasked.

use std::collections::HashSet;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use chrono_tz::Tz;
use hearth_sync::DocId;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

use hearth_ui::{ApiRoutes, Verb};

use super::{
    blocking, caller::Caller, caller::Reach, ApiError, ApiJson, ApiQuery, ApiResult, ApiState,
    Page, PageQuery,
};
use crate::scheduler::{
    service::check_model,
    timing::{self, When},
    MissedPolicy, NewSchedule, Run, Schedule, ScheduleError, ScheduleFilter, ScheduleKind,
    SchedulePatch,
};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("schedules")
        .route(Verb::Get, "/schedules", "List schedules", list)
        .query(&["project", "task", "limit", "offset"])
        .route(Verb::Post, "/schedules", "Create a schedule", create)
        .route(Verb::Get, "/schedules/{id}", "Read a schedule", get)
        .route(Verb::Patch, "/schedules/{id}", "Change a schedule", patch)
        .route(
            Verb::Delete,
            "/schedules/{id}",
            "Remove a schedule (its runs stay)",
            remove,
        )
        .route(
            Verb::Post,
            "/schedules/{id}/pause",
            "Pause a schedule",
            pause,
        )
        .route(
            Verb::Post,
            "/schedules/{id}/resume",
            "Resume a schedule (due again from now)",
            resume,
        )
        .route(
            Verb::Post,
            "/schedules/{id}/run",
            "Run a schedule now",
            run_now,
        )
        .route(
            Verb::Get,
            "/schedules/{id}/runs",
            "A schedule's runs, newest first",
            runs,
        )
        .query(&["limit", "offset"])
        .route(Verb::Get, "/runs/{id}", "Read a scheduled run", get_run)
}

/// A schedule as the API shows it.
#[derive(Debug, Serialize)]
struct ScheduleDto {
    id: String,
    name: String,
    project: String,
    task: Option<String>,
    kind: ScheduleKind,
    spec: String,
    tz: String,
    prompt: String,
    model: Option<String>,
    auto_approve: Vec<String>,
    missed: MissedPolicy,
    catch_up_max: u32,
    approval_wait_secs: u64,
    paused: bool,
    next_due: Option<i64>,
    last_run_at: Option<i64>,
    running: bool,
    created_at: i64,
    updated_at: i64,
    /// Its timing in words.
    describe: String,
}

/// A run as the API shows it.
#[derive(Debug, Serialize)]
struct RunDto {
    id: i64,
    schedule: String,
    project: String,
    conversation: String,
    reason: crate::scheduler::RunReason,
    due_at: i64,
    started_at: i64,
    ended_at: Option<i64>,
    status: crate::scheduler::RunStatus,
    input_tokens: u64,
    output_tokens: u64,
    answer: Option<String>,
    error: Option<String>,
}

fn run_dto(r: Run) -> RunDto {
    RunDto {
        id: r.id,
        schedule: r.schedule,
        project: r.project.to_string(),
        conversation: r.conversation,
        reason: r.reason,
        due_at: r.due_at,
        started_at: r.started_at,
        ended_at: r.ended_at,
        status: r.status,
        input_tokens: r.input_tokens,
        output_tokens: r.output_tokens,
        answer: r.answer,
        error: r.error,
    }
}

/// Its timing in words, in its own zone or the hub's.
fn describe(s: &Schedule, hub_tz: Tz) -> String {
    match (When::parse(s.kind, &s.spec), timing::zone(&s.tz, hub_tz)) {
        (Ok(when), Ok(tz)) => when.describe(tz),
        (Err(e), _) | (_, Err(e)) => format!("not valid: {e}"),
    }
}

fn dto(s: &ApiState, sc: Schedule, hub_tz: Tz) -> ScheduleDto {
    ScheduleDto {
        describe: describe(&sc, hub_tz),
        running: s.scheduler.is_running(&sc.id),
        id: sc.id,
        name: sc.name,
        project: sc.project.to_string(),
        task: sc.task.map(|t| t.to_string()),
        kind: sc.kind,
        spec: sc.spec,
        tz: sc.tz,
        prompt: sc.prompt,
        model: sc.model,
        auto_approve: sc.auto_approve,
        missed: sc.missed,
        catch_up_max: sc.catch_up_max,
        approval_wait_secs: sc.approval_wait_secs,
        paused: sc.paused,
        next_due: sc.next_due,
        last_run_at: sc.last_run_at,
        created_at: sc.created_at,
        updated_at: sc.updated_at,
    }
}

/// The hub's zone now (a blocking read of the runtime settings).
async fn hub_tz(s: &ApiState) -> ApiResult<Tz> {
    let runtime = s.runtime.clone();
    blocking(move || runtime.load().map(|r| r.tz())).await
}

/// Schedule `id`, if the caller may see it; one outside a scoped device's subtree is
/// not found, so the device learns nothing of it.
async fn visible(s: &ApiState, caller: &Caller, id: &str) -> ApiResult<Schedule> {
    let store = s.scheduler.store().clone();
    let key = id.to_string();
    let found = blocking(move || store.get(&key)).await?;
    let not_found = || ApiError::from(ScheduleError::NotFound(id.to_string()));
    let sc = found.ok_or_else(not_found)?;
    if !caller.reach(&s.store).await?.contains(&sc.project) {
        return Err(not_found());
    }
    Ok(sc)
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    project: Option<String>,
    task: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn list(
    State(s): State<ApiState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Page<ScheduleDto>> {
    let (limit, offset) = PageQuery {
        limit: q.limit,
        offset: q.offset,
    }
    .bounds()?;
    let projects: Option<Vec<DocId>> = match (q.project.as_deref(), caller.reach(&s.store).await?) {
        (Some(p), _) => Some(vec![caller.project(&s, Some(p)).await?]),
        (None, Reach::All) => None,
        (None, Reach::Projects(set)) => Some(set.into_iter().collect()),
    };
    let task = q.task.map(|t| t.parse::<DocId>()).transpose()?;
    let filter = ScheduleFilter {
        projects,
        task,
        limit,
        offset,
    };
    let store = s.scheduler.store().clone();
    let (rows, total) = blocking(move || store.list(&filter)).await?;
    let tz = hub_tz(&s).await?;
    Ok(Page {
        data: rows.into_iter().map(|r| dto(&s, r, tz)).collect(),
        total,
        limit,
        offset,
    })
}

async fn get(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<ScheduleDto>> {
    let sc = visible(&s, &caller, &id).await?;
    let tz = hub_tz(&s).await?;
    Ok(Json(dto(&s, sc, tz)))
}

/// A field a PATCH may set to null (`Some(None)`) or leave out (`None`).
fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    project: String,
    kind: ScheduleKind,
    spec: String,
    #[serde(default)]
    tz: String,
    prompt: String,
    model: Option<String>,
    #[serde(default)]
    auto_approve: Vec<String>,
    missed: Option<MissedPolicy>,
    catch_up_max: Option<u32>,
    approval_wait_secs: Option<u64>,
}

/// Checks `kind`/`spec`/`tz` and answers where the schedule starts from `now`.
fn timing_of(
    kind: ScheduleKind,
    spec: &str,
    tz: &str,
    hub_tz: Tz,
    now: i64,
) -> Result<(Option<i64>, i64), ScheduleError> {
    let when = When::parse(kind, spec)?;
    let zone = timing::zone(tz, hub_tz)?;
    timing::first_due(&when, zone, now)
}

async fn create(
    State(s): State<ApiState>,
    caller: Caller,
    ApiJson(body): ApiJson<CreateBody>,
) -> ApiResult<(StatusCode, Json<ScheduleDto>)> {
    let project = caller.project(&s, Some(&body.project)).await?;
    if let Some(m) = &body.model {
        check_model(m)?;
    }
    let tz = hub_tz(&s).await?;
    let (anchor, next_due) =
        timing_of(body.kind, &body.spec, &body.tz, tz, crate::hubdb::now_ms())?;
    let new = NewSchedule {
        id: None,
        name: body.name,
        project,
        task: None,
        kind: body.kind,
        spec: body.spec.trim().to_string(),
        tz: body.tz.trim().to_string(),
        prompt: body.prompt,
        model: body.model,
        auto_approve: body.auto_approve,
        missed: body.missed.unwrap_or(MissedPolicy::RunOnce),
        catch_up_max: body.catch_up_max.unwrap_or(3),
        approval_wait_secs: body.approval_wait_secs.unwrap_or(86_400),
        anchor,
        next_due: Some(next_due),
    };
    let store = s.scheduler.store().clone();
    let sc = blocking(move || store.create(new)).await?;
    s.scheduler.nudge();
    Ok((StatusCode::CREATED, Json(dto(&s, sc, tz))))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    name: Option<String>,
    project: Option<String>,
    kind: Option<ScheduleKind>,
    spec: Option<String>,
    tz: Option<String>,
    prompt: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    model: Option<Option<String>>,
    auto_approve: Option<Vec<String>>,
    missed: Option<MissedPolicy>,
    catch_up_max: Option<u32>,
    approval_wait_secs: Option<u64>,
}

async fn patch(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchBody>,
) -> ApiResult<Json<ScheduleDto>> {
    let old = visible(&s, &caller, &id).await?;
    let project = match body.project.as_deref() {
        Some(p) => Some(caller.project(&s, Some(p)).await?),
        None => None,
    };
    if let Some(Some(m)) = &body.model {
        check_model(m)?;
    }
    let tz = hub_tz(&s).await?;
    let retimed = body.kind.is_some() || body.spec.is_some() || body.tz.is_some();
    let (anchor, next_due) = if retimed {
        let kind = body.kind.unwrap_or(old.kind);
        let spec = body.spec.as_deref().unwrap_or(&old.spec);
        let zone = body.tz.as_deref().unwrap_or(&old.tz);
        let (anchor, first) = timing_of(kind, spec, zone, tz, crate::hubdb::now_ms())?;
        (Some(anchor), Some(Some(first)))
    } else {
        (None, None)
    };
    let change = SchedulePatch {
        name: body.name,
        project,
        kind: body.kind,
        spec: body.spec.map(|v| v.trim().to_string()),
        tz: body.tz.map(|v| v.trim().to_string()),
        prompt: body.prompt,
        model: body.model,
        auto_approve: body.auto_approve,
        missed: body.missed,
        catch_up_max: body.catch_up_max,
        approval_wait_secs: body.approval_wait_secs,
        paused: None,
        anchor,
        next_due,
    };
    let store = s.scheduler.store().clone();
    let sc = blocking(move || store.update(&id, change)).await?;
    s.scheduler.nudge();
    Ok(Json(dto(&s, sc, tz)))
}

async fn remove(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    visible(&s, &caller, &id).await?;
    let store = s.scheduler.store().clone();
    let key = id.clone();
    if !blocking(move || store.delete(&key)).await? {
        return Err(ScheduleError::NotFound(id).into());
    }
    s.scheduler.nudge();
    Ok(StatusCode::NO_CONTENT)
}

async fn pause(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<ScheduleDto>> {
    visible(&s, &caller, &id).await?;
    let change = SchedulePatch {
        paused: Some(true),
        ..SchedulePatch::default()
    };
    let store = s.scheduler.store().clone();
    let sc = blocking(move || store.update(&id, change)).await?;
    s.scheduler.nudge();
    let tz = hub_tz(&s).await?;
    Ok(Json(dto(&s, sc, tz)))
}

async fn resume(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<ScheduleDto>> {
    let old = visible(&s, &caller, &id).await?;
    let tz = hub_tz(&s).await?;
    let change = crate::scheduler::service::resume_patch(&old, tz, crate::hubdb::now_ms())?;
    let store = s.scheduler.store().clone();
    let sc = blocking(move || store.update(&id, change)).await?;
    s.scheduler.nudge();
    Ok(Json(dto(&s, sc, tz)))
}

async fn run_now(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    visible(&s, &caller, &id).await?;
    let run = s.scheduler.run_now(&id).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "run": run.id }))))
}

async fn runs(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<RunDto>> {
    let (limit, offset) = q.bounds()?;
    // Runs outlive their schedule: a removed schedule's runs are still listed (to the
    // owner and full devices; a scoped device sees runs of its subtree's projects).
    let store = s.scheduler.store().clone();
    let key = id.clone();
    let (rows, total) = blocking(move || store.runs(&key, limit, offset)).await?;
    let reach = caller.reach(&s.store).await?;
    let projects: HashSet<DocId> = rows.iter().map(|r| r.project).collect();
    if projects.iter().any(|p| !reach.contains(p)) {
        return Err(ScheduleError::NotFound(id).into());
    }
    Ok(Page {
        data: rows.into_iter().map(run_dto).collect(),
        total,
        limit,
        offset,
    })
}

async fn get_run(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> ApiResult<Json<RunDto>> {
    let store = s.scheduler.store().clone();
    let run = blocking(move || store.run(id)).await?;
    let not_found = || ApiError::from(ScheduleError::NotFound(id.to_string()));
    let run = run.ok_or_else(not_found)?;
    if !caller.reach(&s.store).await?.contains(&run.project) {
        return Err(not_found());
    }
    Ok(Json(run_dto(run)))
}
