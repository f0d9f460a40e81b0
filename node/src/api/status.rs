//! `GET /status`: the node's sync status ([`crate::status::NodeStatus`]): online or
//! offline, the hub, when it last synced, how many local changes wait to reach the hub,
//! the API's address and version information. `hearth status` prints the same.

use axum::{extract::State, Json};
use hearth_ui::{ApiResult, ApiRoutes, Verb};

use super::NodeApiState;
use crate::status::NodeStatus;

pub(super) fn routes() -> ApiRoutes<NodeApiState> {
    ApiRoutes::new("status").route(
        Verb::Get,
        "/status",
        "Online or offline, last sync, changes waiting for the hub",
        status,
    )
}

async fn status(State(s): State<NodeApiState>) -> ApiResult<Json<NodeStatus>> {
    Ok(Json(s.status.status(&s.store).await?))
}
