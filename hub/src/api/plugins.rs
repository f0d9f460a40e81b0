//! Plugin routes, the owner's only (not in the relay table: a paired device cannot add
//! or call a program on the hub).
//!
//! - `GET /plugins` (a page, each server with its state), `POST /plugins {name, servers,
//!   env?, settings?, project?, enabled?}` (201; added disabled unless `enabled: true`;
//!   the answer's `warning` says each command runs as the hub's user, sandboxed or not,
//!   and shows it)
//! - `GET|PATCH|DELETE /plugins/{name}` (PATCH: `enabled`, `env`, `settings`, `project`
//!   (null: none), `servers`); the built-in `computer` can be disabled, not removed
//! - `GET /plugins/{name}/tools` (a page: the registered tools, else the cached ones)
//! - `POST /plugins/{name}/tools/{tool} {project?, arguments}`: the owner calls one tool
//!   directly (audited under the conversation `api`); `{output, isError}`
//!
//! Variables and headers bound to secrets show the secret's key, never its value.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use hearth_ui::{ApiRoutes, Verb};

use super::{blocking, ApiError, ApiJson, ApiQuery, ApiResult, ApiState, Page, PageQuery};
use crate::plugins::{EnvBinding, NewPlugin, Phase, Plugin, PluginPatch, ServerSpec, ServerStatus};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("plugins")
        .route(
            Verb::Get,
            "/plugins",
            "List plugins with their servers' states",
            list,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Post,
            "/plugins",
            "Add a plugin (its servers run as the hub's user)",
            create,
        )
        .route(Verb::Get, "/plugins/{name}", "Read a plugin", get)
        .route(
            Verb::Patch,
            "/plugins/{name}",
            "Enable, disable or change a plugin",
            patch,
        )
        .route(Verb::Delete, "/plugins/{name}", "Remove a plugin", remove)
        .route(
            Verb::Get,
            "/plugins/{name}/tools",
            "A plugin's tools",
            tools,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Post,
            "/plugins/{name}/tools/{tool}",
            "Call a plugin's tool directly (audited)",
            call,
        )
}

#[derive(Debug, Serialize)]
struct ServerDto {
    #[serde(flatten)]
    spec: ServerSpec,
    status: ServerStatus,
}

#[derive(Debug, Serialize)]
struct PluginDto {
    name: String,
    builtin: bool,
    enabled: bool,
    /// Declared variables; a secret binding shows its key only.
    env: Vec<EnvBinding>,
    servers: Vec<ServerDto>,
    settings: Map<String, Value>,
    project: Option<String>,
    created_at: i64,
    updated_at: i64,
    /// On creation: what running its servers means, and their command lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

fn dto(s: &ApiState, p: Plugin) -> PluginDto {
    let states = s.plugins.states();
    let servers = p
        .servers
        .iter()
        .map(|spec| {
            let status = match states.get(&(p.name.clone(), spec.name.clone())) {
                // A server's last words may quote a secret it was given.
                Some(status) if p.enabled => ServerStatus {
                    error: status.error.as_deref().map(|e| s.chat.agent.redact_text(e)),
                    ..status.clone()
                },
                other => {
                    let stopped = ServerStatus::stopped(&s.plugins.sandbox_for(spec));
                    // Enabled a moment ago: the supervisor is about to start it.
                    if p.enabled && other.is_none() {
                        ServerStatus {
                            state: Phase::Starting,
                            ..stopped
                        }
                    } else {
                        stopped
                    }
                }
            };
            ServerDto {
                spec: spec.clone(),
                status,
            }
        })
        .collect();
    PluginDto {
        name: p.name,
        builtin: p.builtin,
        enabled: p.enabled,
        env: p.env,
        servers,
        settings: p.settings,
        project: p.project.map(|d| d.to_string()),
        created_at: p.created_at,
        updated_at: p.updated_at,
        warning: None,
    }
}

async fn list(
    State(s): State<ApiState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<PluginDto>> {
    let store = s.plugins.store().clone();
    let all = blocking(move || store.list()).await?;
    Ok(Page::from_all(all, &q)?.map(|p| dto(&s, p)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    servers: Vec<ServerSpec>,
    #[serde(default)]
    env: Vec<EnvBinding>,
    #[serde(default)]
    settings: Map<String, Value>,
    /// A project's name or id.
    project: Option<String>,
    #[serde(default)]
    enabled: bool,
}

async fn create(
    State(s): State<ApiState>,
    ApiJson(b): ApiJson<CreateBody>,
) -> ApiResult<(StatusCode, Json<PluginDto>)> {
    let project = match b.project.as_deref() {
        Some(p) => Some(s.chat.resolve(Some(p)).await?),
        None => None,
    };
    let new = NewPlugin {
        name: b.name,
        enabled: b.enabled,
        env: b.env,
        servers: b.servers,
        settings: b.settings,
        project,
    };
    let store = s.plugins.store().clone();
    let created = blocking(move || store.create(new)).await?;
    s.plugins.nudge();
    let plugins = s.plugins.clone();
    let warning = crate::plugins::run_warning(&created, &|spec| plugins.sandbox_for(spec));
    let mut out = dto(&s, created);
    out.warning = Some(warning);
    Ok((StatusCode::CREATED, Json(out)))
}

async fn get(State(s): State<ApiState>, Path(name): Path<String>) -> ApiResult<Json<PluginDto>> {
    let store = s.plugins.store().clone();
    let p = blocking(move || store.get(&name)).await?;
    Ok(Json(dto(&s, p)))
}

/// `null` and absent differ: `Some(None)` unbinds.
fn double_option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    enabled: Option<bool>,
    env: Option<Vec<EnvBinding>>,
    settings: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "double_option")]
    project: Option<Option<String>>,
    servers: Option<Vec<ServerSpec>>,
}

async fn patch(
    State(s): State<ApiState>,
    Path(name): Path<String>,
    ApiJson(b): ApiJson<PatchBody>,
) -> ApiResult<Json<PluginDto>> {
    let project = match b.project {
        None => None,
        Some(None) => Some(None),
        Some(Some(p)) => Some(Some(s.chat.resolve(Some(&p)).await?)),
    };
    let patch = PluginPatch {
        enabled: b.enabled,
        env: b.env,
        settings: b.settings,
        project,
        servers: b.servers,
    };
    let store = s.plugins.store().clone();
    let p = blocking(move || store.update(&name, patch)).await?;
    s.plugins.nudge();
    Ok(Json(dto(&s, p)))
}

async fn remove(State(s): State<ApiState>, Path(name): Path<String>) -> ApiResult<StatusCode> {
    let store = s.plugins.store().clone();
    blocking(move || store.remove(&name)).await?;
    s.plugins.nudge();
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Serialize)]
struct ToolDto {
    name: String,
    description: String,
    schema: Value,
    risky: bool,
    server: Option<String>,
    /// Registered now (its server runs), or only remembered from its last listing.
    live: bool,
}

async fn tools(
    State(s): State<ApiState>,
    Path(name): Path<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<ToolDto>> {
    let store = s.plugins.store().clone();
    let n = name.clone();
    let cached = blocking(move || {
        store.get(&n)?;
        store.cached_tools(&n)
    })
    .await?;
    let live: Vec<ToolDto> = s
        .chat
        .agent
        .tools()
        .all()
        .into_iter()
        .filter(|t| t.source.plugin() == Some(name.as_str()))
        .map(|t| ToolDto {
            name: t.name.clone(),
            description: t.description.clone(),
            schema: t.schema.clone(),
            risky: t.risk == crate::agent::tools::Risk::Risky,
            server: match &t.source {
                crate::agent::registry::ToolSource::Plugin { server, .. } => server.clone(),
                crate::agent::registry::ToolSource::System => None,
            },
            live: true,
        })
        .collect();
    let mut all = live;
    for t in cached {
        if !all.iter().any(|l| l.name == t.name) {
            all.push(ToolDto {
                name: t.name,
                description: t.description,
                schema: t.schema,
                risky: t.risky,
                server: Some(t.server),
                live: false,
            });
        }
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Page::from_all(all, &q)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallBody {
    /// A project's name or id (default: the plugin's bound project, else `general`).
    project: Option<String>,
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Serialize)]
struct CallDto {
    output: Value,
    #[serde(rename = "isError")]
    is_error: bool,
}

async fn call(
    State(s): State<ApiState>,
    Path((name, tool)): Path<(String, String)>,
    ApiJson(b): ApiJson<CallBody>,
) -> ApiResult<Json<CallDto>> {
    let store = s.plugins.store().clone();
    let n = name.clone();
    let plugin = blocking(move || store.get(&n)).await?;
    let project = match (b.project.as_deref(), plugin.project) {
        (Some(p), _) => s.chat.resolve(Some(p)).await?,
        (None, Some(bound)) => bound,
        (None, None) => s.chat.general,
    };
    let called = crate::plugins::call_tool(&s.chat.agent, &name, &tool, project, b.arguments)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(CallDto {
        output: called.output,
        is_error: called.is_error,
    }))
}
