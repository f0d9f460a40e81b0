//! Device routes: paired devices and pairing decisions, for the UI and scripts.
//!
//! `GET /devices`, `GET /devices/pending` (pages), `POST /devices/approve`, `POST
//! /devices/deny`, `PATCH /devices/{id} {name?, scope? (a project id, or null: all),
//! admin?}`, `DELETE /devices/{id}` (revoke: the device's open connections close at
//! once). Every route goes through the `DeviceRegistry`. A change of scope or of the
//! admin flag cuts the device's relayed connection within a second (the hub's device
//! watcher). `admin` is the owner's alone: a relayed request that names it is refused
//! (403 `owner_only`), whatever device it comes from.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use serde::{Deserialize, Serialize};

use hearth_ui::{ApiRoutes, Verb};

use super::{
    blocking, caller::Caller, ApiError, ApiJson, ApiQuery, ApiResult, ApiState, Page, PageQuery,
};
use crate::{
    access::{ConnectionTracker, REVOKED_REASON},
    devices::{Device, DeviceError},
};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("devices")
        .route(Verb::Get, "/devices", "List paired devices", list)
        .query(&["limit", "offset"])
        .route(
            Verb::Get,
            "/devices/pending",
            "List pairing requests",
            pending,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Post,
            "/devices/approve",
            "Approve a pairing request",
            approve,
        )
        .route(Verb::Post, "/devices/deny", "Deny a pairing request", deny)
        .route(
            Verb::Patch,
            "/devices/{id}",
            "Rename a device or change its scope",
            patch,
        )
        .route(Verb::Delete, "/devices/{id}", "Revoke a device", revoke)
}

#[derive(Serialize)]
struct DeviceDto {
    node_id: String,
    /// `hearth_net::fingerprint` of the key: what the device's `hearth pair` shows.
    fingerprint: String,
    name: String,
    scope: Option<String>,
    paired_at: i64,
    last_seen: Option<i64>,
    online: bool,
    revoked: bool,
    /// Whether the owner lets it widen power through its relay.
    admin: bool,
}

fn dto(d: Device, tracker: &ConnectionTracker) -> DeviceDto {
    let online = d
        .node_id
        .parse()
        .map(|id| tracker.is_online(&id))
        .unwrap_or(false);
    DeviceDto {
        fingerprint: hearth_net::fingerprint_of_id(&d.node_id).unwrap_or_default(),
        node_id: d.node_id,
        name: d.name,
        scope: d.scope,
        paired_at: d.paired_at,
        last_seen: d.last_seen,
        online,
        revoked: d.revoked_at.is_some(),
        admin: d.admin,
    }
}

async fn list(
    State(s): State<ApiState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<DeviceDto>> {
    let reg = s.registry.clone();
    let devices = blocking(move || reg.list()).await?;
    Ok(Page::from_all(devices, &q)?.map(|d| dto(d, &s.tracker)))
}

#[derive(Serialize)]
struct PendingDto {
    code: String,
    node_id: String,
    device_name: String,
    fingerprint: String,
    previously_revoked: bool,
    created_at: i64,
    expires_at: i64,
}

async fn pending(
    State(s): State<ApiState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<PendingDto>> {
    let reg = s.registry.clone();
    let rows = blocking(move || reg.pending()).await?;
    Ok(Page::from_all(rows, &q)?.map(|p| PendingDto {
        code: p.code,
        node_id: p.node_id,
        device_name: p.device_name,
        fingerprint: p.fingerprint,
        previously_revoked: p.previously_revoked,
        created_at: p.created_at,
        expires_at: p.expires_at,
    }))
}

#[derive(Deserialize)]
struct Decision {
    code: String,
    name: Option<String>,
    scope: Option<String>,
    /// When given, approve only if the code belongs to the key with this fingerprint
    /// (what the UI showed the owner); otherwise 409 and nothing changes.
    fingerprint: Option<String>,
}

async fn approve(
    State(s): State<ApiState>,
    ApiJson(d): ApiJson<Decision>,
) -> ApiResult<Json<DeviceDto>> {
    if let Some(scope) = &d.scope {
        if scope.parse::<hearth_sync::DocId>().is_err() {
            return Err(ApiError::bad_request(format!(
                "scope {scope:?} is not a project id"
            )));
        }
    }
    let reg = s.registry.clone();
    let device = blocking(move || -> Result<Device, DeviceError> {
        if let Some(want) = &d.fingerprint {
            let req = reg.request(&d.code)?;
            if !req.fingerprint.eq_ignore_ascii_case(want.trim()) {
                return Err(DeviceError::Mismatch {
                    code: req.code,
                    fingerprint: req.fingerprint,
                });
            }
        }
        reg.approve(&d.code, d.name.as_deref(), d.scope.as_deref())
    })
    .await?;
    Ok(Json(dto(device, &s.tracker)))
}

async fn deny(State(s): State<ApiState>, ApiJson(d): ApiJson<Decision>) -> ApiResult<StatusCode> {
    let reg = s.registry.clone();
    blocking(move || reg.deny(&d.code)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `null` and absent differ: `Some(None)` clears.
fn double_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DevicePatch {
    name: Option<String>,
    /// A project id, or null for everything.
    #[serde(default, deserialize_with = "double_option")]
    scope: Option<Option<String>>,
    admin: Option<bool>,
}

async fn patch(
    State(s): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<DevicePatch>,
) -> ApiResult<Json<DeviceDto>> {
    if p.admin.is_some() && !caller.is_owner() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "owner_only",
            "only the owner (on the hub, or with the owner's credential) gives or takes a device's admin flag",
        ));
    }
    if let Some(Some(scope)) = &p.scope {
        if scope.parse::<hearth_sync::DocId>().is_err() {
            return Err(ApiError::bad_request(format!(
                "scope {scope:?} is not a project id"
            )));
        }
    }
    let reg = s.registry.clone();
    let device = blocking(move || -> Result<Device, DeviceError> {
        let mut d = reg.get(&id)?;
        if let Some(name) = &p.name {
            d = reg.rename(&d.node_id, name)?;
        }
        if let Some(scope) = &p.scope {
            d = reg.set_scope(&d.node_id, scope.as_deref())?;
        }
        if let Some(admin) = p.admin {
            d = reg.set_admin(&d.node_id, admin)?;
        }
        Ok(d)
    })
    .await?;
    Ok(Json(dto(device, &s.tracker)))
}

async fn revoke(State(s): State<ApiState>, Path(id): Path<String>) -> ApiResult<Json<DeviceDto>> {
    let reg = s.registry.clone();
    let device = blocking(move || reg.revoke(&id)).await?;
    if let Ok(node) = device.node_id.parse() {
        s.tracker.close(&node, REVOKED_REASON);
    }
    Ok(Json(dto(device, &s.tracker)))
}
