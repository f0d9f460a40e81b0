//! `POST /schedules/preview {kind, spec, tz?}`: what the hub makes of a schedule's timing
//! before it is saved — `{describe, tz, next_due}` (the zone it is read in, and the first
//! due time from now), or the 400 naming what is wrong — so a form can say it live.
//!
//! Reads only the runtime settings (the hub's zone); never writes, never nudges the
//! scheduler. Relayed to every paired device (it reveals nothing of the hub's data).

use axum::{extract::State, Json};
use serde::{Deserialize, Serialize};

use hearth_ui::{ApiRoutes, Verb};

use super::{blocking, ApiJson, ApiResult, ApiState};
use crate::scheduler::{
    timing::{self, When},
    ScheduleKind,
};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("schedules").route(
        Verb::Post,
        "/schedules/preview",
        "Say a schedule's timing in words and its first due time, without saving it",
        preview,
    )
}

/// Body of `POST /schedules/preview`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewBody {
    kind: ScheduleKind,
    spec: String,
    #[serde(default)]
    tz: String,
}

/// The answer.
#[derive(Debug, Serialize)]
struct PreviewDto {
    /// "every 3 days", "at 09:00 on Mon–Fri (Europe/Paris)", "once at …".
    describe: String,
    /// The zone its times are read in (the hub's when none was given).
    tz: String,
    /// The first due time if it were saved now (ms).
    next_due: i64,
}

async fn preview(
    State(s): State<ApiState>,
    ApiJson(body): ApiJson<PreviewBody>,
) -> ApiResult<Json<PreviewDto>> {
    let runtime = s.runtime.clone();
    let hub_tz = blocking(move || runtime.load().map(|r| r.tz())).await?;
    let when = When::parse(body.kind, body.spec.trim())?;
    let tz = timing::zone(&body.tz, hub_tz)?;
    let (_, next_due) = timing::first_due(&when, tz, crate::hubdb::now_ms())?;
    Ok(Json(PreviewDto {
        describe: when.describe(tz),
        tz: tz.to_string(),
        next_due,
    }))
}
