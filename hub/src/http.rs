//! Hub-only HTTP routes: devices and pairing decisions, for the UI and scripts.
//!
//! Merged with `hearth_ui::router` under `/api/v1`. Every route goes through the
//! [`DeviceRegistry`]; a revocation also closes the device's open connections at once.

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, patch, post},
    Json, Router,
};
use serde::{Deserialize, Serialize};

use crate::{
    access::{ConnectionTracker, REVOKED_REASON},
    devices::{Device, DeviceError, DeviceRegistry},
};

#[derive(Clone)]
struct AppState {
    registry: Arc<DeviceRegistry>,
    tracker: Arc<ConnectionTracker>,
}

/// The device routes.
pub fn router(registry: Arc<DeviceRegistry>, tracker: Arc<ConnectionTracker>) -> Router {
    Router::new()
        .route("/api/v1/devices", get(list))
        .route("/api/v1/devices/pending", get(pending))
        .route("/api/v1/devices/approve", post(approve))
        .route("/api/v1/devices/deny", post(deny))
        .route("/api/v1/devices/{id}", patch(rename).delete(revoke))
        .with_state(AppState { registry, tracker })
}

struct ApiError(DeviceError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            DeviceError::WrongCode(_) | DeviceError::NoDevice(_) => StatusCode::NOT_FOUND,
            DeviceError::Expired(_) | DeviceError::Used(_) | DeviceError::Denied(_) => {
                StatusCode::GONE
            }
            DeviceError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            DeviceError::Invalid(_) | DeviceError::BadTicket | DeviceError::TicketRequired => {
                StatusCode::BAD_REQUEST
            }
            DeviceError::Mismatch { .. } => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (
            status,
            Json(serde_json::json!({ "error": self.0.to_string() })),
        )
            .into_response()
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DeviceError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError(DeviceError::Invalid(format!("internal error: {e}"))))?
        .map_err(ApiError)
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
    }
}

async fn list(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let reg = s.registry.clone();
    let devices = blocking(move || reg.list()).await?;
    let data: Vec<DeviceDto> = devices.into_iter().map(|d| dto(d, &s.tracker)).collect();
    let total = data.len();
    Ok(Json(
        serde_json::json!({ "data": data, "total": total, "limit": total, "offset": 0 }),
    ))
}

async fn pending(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let reg = s.registry.clone();
    let rows = blocking(move || reg.pending()).await?;
    let data: Vec<serde_json::Value> = rows
        .into_iter()
        .map(|p| {
            serde_json::json!({ "code": p.code, "node_id": p.node_id, "device_name": p.device_name,
                                "fingerprint": p.fingerprint, "previously_revoked": p.previously_revoked,
                                "created_at": p.created_at, "expires_at": p.expires_at })
        })
        .collect();
    let total = data.len();
    Ok(Json(
        serde_json::json!({ "data": data, "total": total, "limit": total, "offset": 0 }),
    ))
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
    State(s): State<AppState>,
    Json(d): Json<Decision>,
) -> Result<Json<DeviceDto>, ApiError> {
    if let Some(scope) = &d.scope {
        if scope.parse::<hearth_sync::DocId>().is_err() {
            return Err(ApiError(DeviceError::Invalid(format!(
                "scope {scope:?} is not a project id"
            ))));
        }
    }
    let reg = s.registry.clone();
    let device = blocking(move || {
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

async fn deny(State(s): State<AppState>, Json(d): Json<Decision>) -> Result<StatusCode, ApiError> {
    let reg = s.registry.clone();
    blocking(move || reg.deny(&d.code)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct Rename {
    name: String,
}

async fn rename(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Json(r): Json<Rename>,
) -> Result<Json<DeviceDto>, ApiError> {
    let reg = s.registry.clone();
    let device = blocking(move || reg.rename(&id, &r.name)).await?;
    Ok(Json(dto(device, &s.tracker)))
}

async fn revoke(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<DeviceDto>, ApiError> {
    let reg = s.registry.clone();
    let device = blocking(move || reg.revoke(&id)).await?;
    if let Ok(node) = device.node_id.parse() {
        s.tracker.close(&node, REVOKED_REASON);
    }
    Ok(Json(dto(device, &s.tracker)))
}
