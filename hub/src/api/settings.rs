//! Settings routes: runtime settings (models, the agent's instructions, the approval
//! timeout; kept in `hub.db`, in force at once), provider keys (write-only, shown
//! masked), and per-project tool permissions and secrets.
//!
//! - `GET /settings`, `PATCH /settings {chat_model?, summary_model? (null: the chat
//!   model), embedding_model?, instructions?, approval_timeout_secs?, timezone?, quiet_hours? ({start, end} HH:MM, or null)}`
//! - `GET /settings/providers` (a page), `PUT /settings/providers/{name} {key}`
//! - `GET /projects/{project}/tools` (a page, system and plugin tools: `allowed`, `ask`
//!   — calls wait for the owner's approval —, `approval`, `risky`, `effect`, `plugin`),
//!   `PUT /projects/{project}/tools/{tool} {allowed, ask?}` (`ask`: true asks every
//!   call, false none — a risky tool allowed outright —, absent: risky calls ask)
//! - `GET /projects/{project}/secrets` (a page), `PUT|DELETE
//!   /projects/{project}/secrets/{name}`

use axum::{
    extract::{Path, State},
    http::StatusCode,
    Json,
};
use serde::{Deserialize, Deserializer, Serialize};

use hearth_ui::{ApiRoutes, Verb};

use super::{blocking, ApiError, ApiJson, ApiQuery, ApiResult, ApiState, Page, PageQuery};
use crate::{
    agent::provider::ModelRef,
    chat::PROVIDERS,
    secrets::{SecretError, SecretValue, MASK},
    settings::{QuietHours, RuntimePatch, RuntimeSettings},
};

pub(super) fn routes() -> ApiRoutes<ApiState> {
    ApiRoutes::new("settings")
        .route(
            Verb::Get,
            "/settings",
            "Read runtime settings",
            get_settings,
        )
        .route(
            Verb::Patch,
            "/settings",
            "Change runtime settings",
            patch_settings,
        )
        .route(
            Verb::Get,
            "/settings/providers",
            "List providers (keys masked)",
            providers,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Put,
            "/settings/providers/{name}",
            "Set a provider key (write-only)",
            set_provider_key,
        )
        .route(
            Verb::Get,
            "/projects/{project}/tools",
            "A project's tool permissions",
            project_tools,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Put,
            "/projects/{project}/tools/{tool}",
            "Allow or forbid a tool in a project",
            set_project_tool,
        )
        .route(
            Verb::Get,
            "/projects/{project}/secrets",
            "A project's secrets (masked)",
            project_secrets,
        )
        .query(&["limit", "offset"])
        .route(
            Verb::Put,
            "/projects/{project}/secrets/{name}",
            "Set a project secret (write-only)",
            set_project_secret,
        )
        .route(
            Verb::Delete,
            "/projects/{project}/secrets/{name}",
            "Delete a project secret",
            delete_project_secret,
        )
}

#[derive(Debug, Serialize)]
struct SettingsDto {
    chat_model: String,
    summary_model: Option<String>,
    embedding_model: String,
    instructions: String,
    approval_timeout_secs: u64,
    timezone: String,
    quiet_hours: Option<QuietHours>,
}

impl From<RuntimeSettings> for SettingsDto {
    fn from(s: RuntimeSettings) -> Self {
        Self {
            chat_model: s.chat_model.to_string(),
            summary_model: s.summary_model.map(|m| m.to_string()),
            embedding_model: s.embedding_model.to_string(),
            instructions: s.instructions,
            approval_timeout_secs: s.approval_timeout_secs,
            timezone: s.timezone,
            quiet_hours: s.quiet_hours,
        }
    }
}

async fn get_settings(State(s): State<ApiState>) -> ApiResult<Json<SettingsDto>> {
    let runtime = s.runtime.clone();
    Ok(Json(blocking(move || runtime.load()).await?.into()))
}

/// `null` and absent differ: `Some(None)` clears.
fn double_option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsPatch {
    chat_model: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    summary_model: Option<Option<String>>,
    embedding_model: Option<String>,
    instructions: Option<String>,
    approval_timeout_secs: Option<u64>,
    timezone: Option<String>,
    #[serde(default, deserialize_with = "double_quiet")]
    quiet_hours: Option<Option<QuietHours>>,
}

/// `null` turns quiet hours off; absent leaves them.
fn double_quiet<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<QuietHours>>, D::Error> {
    Option::<QuietHours>::deserialize(d).map(Some)
}

fn model(s: &str) -> Result<ModelRef, ApiError> {
    s.parse()
        .map_err(|e: crate::agent::provider::ProviderError| ApiError::bad_request(e.to_string()))
}

async fn patch_settings(
    State(s): State<ApiState>,
    ApiJson(p): ApiJson<SettingsPatch>,
) -> ApiResult<Json<SettingsDto>> {
    let patch = RuntimePatch {
        chat_model: p.chat_model.as_deref().map(model).transpose()?,
        summary_model: match p.summary_model {
            None => None,
            Some(None) => Some(None),
            Some(Some(m)) => Some(Some(model(&m)?)),
        },
        embedding_model: p.embedding_model.as_deref().map(model).transpose()?,
        instructions: p.instructions,
        approval_timeout_secs: p.approval_timeout_secs,
        timezone: p.timezone,
        quiet_hours: p.quiet_hours,
    };
    let (runtime, chat) = (s.runtime.clone(), s.chat.clone());
    let now = blocking(move || -> Result<RuntimeSettings, ApiError> {
        let now = runtime.update(patch)?;
        chat.apply_runtime(&now).map_err(ApiError::bad_request)?;
        Ok(now)
    })
    .await?;
    Ok(Json(now.into()))
}

#[derive(Debug, Serialize)]
struct ProviderDto {
    name: &'static str,
    /// `********` when a key is stored, else null.
    key: Option<&'static str>,
}

async fn providers(
    State(s): State<ApiState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<ProviderDto>> {
    let secrets = s.chat.secrets.clone();
    let data = blocking(move || -> Result<Vec<ProviderDto>, SecretError> {
        PROVIDERS
            .iter()
            .map(|name| {
                Ok(ProviderDto {
                    name,
                    key: secrets.get("provider", name)?.map(|_| MASK),
                })
            })
            .collect()
    })
    .await?;
    Page::from_all(data, &q)
}

#[derive(Debug, Deserialize)]
struct KeyBody {
    key: String,
}

async fn set_provider_key(
    State(s): State<ApiState>,
    Path(name): Path<String>,
    ApiJson(b): ApiJson<KeyBody>,
) -> ApiResult<Json<serde_json::Value>> {
    if !PROVIDERS.contains(&name.as_str()) {
        return Err(ApiError::not_found(format!("unknown provider {name:?}")));
    }
    let (chat, runtime, n) = (s.chat.clone(), s.runtime.clone(), name.clone());
    blocking(move || -> Result<(), ApiError> {
        chat.secrets.set("provider", &n, &SecretValue::new(b.key))?;
        chat.refresh_redactor();
        let now = runtime.load()?;
        if now.chat_model.provider == n {
            chat.apply_runtime(&now).map_err(ApiError::bad_request)?;
        }
        Ok(())
    })
    .await?;
    Ok(Json(serde_json::json!({ "name": name, "key": MASK })))
}

#[derive(Debug, Serialize)]
struct ToolDto {
    name: String,
    description: String,
    allowed: bool,
    /// Every call waits for the owner's approval (a risky tool's, unless allowed).
    ask: bool,
    /// The owner's choice: `always` (asks every call), `if_risky` (the default: risky
    /// calls ask) or `never` (allowed outright); absent while not offered.
    approval: Option<&'static str>,
    /// Risky by default (some calls or all: a whole-content note replace, a command).
    risky: bool,
    /// What it can do outside Hearth's documents: `none`, `writes_files`,
    /// `runs_commands` or `fetches` (these ask after untrusted text in a turn).
    effect: &'static str,
    /// The plugin it comes from, if any.
    plugin: Option<String>,
}

async fn project_tools(
    State(s): State<ApiState>,
    Path(project): Path<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<ToolDto>> {
    use crate::agent::{registry::Effect, runner::ApprovalRule, tools::Risk};
    let id = s.chat.resolve(Some(&project)).await?;
    let agent = s.chat.agent.clone();
    let permitted = {
        let agent = agent.clone();
        blocking(move || agent.permitted(&id)).await?
    };
    let data = agent
        .tools()
        .all()
        .into_iter()
        .map(|t| {
            let offered = permitted.iter().find(|p| p.tool.name == t.name);
            let risky = t.risk == Risk::Risky || t.risk_of_call.is_some();
            ToolDto {
                allowed: offered.is_some(),
                ask: offered.is_some_and(|p| match p.approval {
                    ApprovalRule::Always => true,
                    ApprovalRule::IfRisky => risky,
                    ApprovalRule::Never => false,
                }),
                approval: offered.map(|p| match p.approval {
                    ApprovalRule::Always => "always",
                    ApprovalRule::IfRisky => "if_risky",
                    ApprovalRule::Never => "never",
                }),
                risky,
                effect: match t.effect {
                    Effect::None => "none",
                    Effect::WritesFiles => "writes_files",
                    Effect::RunsCommands => "runs_commands",
                    Effect::Fetches => "fetches",
                },
                plugin: t.source.plugin().map(str::to_string),
                name: t.name.clone(),
                description: t.description.clone(),
            }
        })
        .collect();
    Page::from_all(data, &q)
}

#[derive(Debug, Deserialize)]
struct Allowed {
    allowed: bool,
    /// `true`: every call asks; `false`: none does, even a risky one; absent or
    /// `null`: risky calls ask.
    #[serde(default)]
    ask: Option<bool>,
}

async fn set_project_tool(
    State(s): State<ApiState>,
    Path((project, tool)): Path<(String, String)>,
    ApiJson(a): ApiJson<Allowed>,
) -> ApiResult<Json<serde_json::Value>> {
    let id = s.chat.resolve(Some(&project)).await?;
    let agent = s.chat.agent.clone();
    let t = tool.clone();
    let permission = crate::agent::runner::ToolPermission {
        allowed: a.allowed,
        ask: a.ask,
    };
    blocking(move || agent.set_permission(&id, &t, permission)).await?;
    Ok(Json(
        serde_json::json!({ "tool": tool, "allowed": a.allowed, "ask": a.ask.filter(|_| a.allowed) }),
    ))
}

#[derive(Debug, Serialize)]
struct SecretDto {
    name: String,
    value: &'static str,
}

async fn project_scope(s: &ApiState, project: &str) -> ApiResult<String> {
    Ok(format!("project:{}", s.chat.resolve(Some(project)).await?))
}

async fn project_secrets(
    State(s): State<ApiState>,
    Path(project): Path<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Page<SecretDto>> {
    let scope = project_scope(&s, &project).await?;
    let secrets = s.chat.secrets.clone();
    let names = blocking(move || secrets.names(&scope)).await?;
    // Values are never returned, only masked.
    Ok(Page::from_all(names, &q)?.map(|name| SecretDto { name, value: MASK }))
}

#[derive(Debug, Deserialize)]
struct SecretBody {
    value: String,
}

async fn set_project_secret(
    State(s): State<ApiState>,
    Path((project, name)): Path<(String, String)>,
    ApiJson(b): ApiJson<SecretBody>,
) -> ApiResult<Json<SecretDto>> {
    let scope = project_scope(&s, &project).await?;
    let (chat, n) = (s.chat.clone(), name.clone());
    blocking(move || -> Result<(), SecretError> {
        chat.secrets.set(&scope, &n, &SecretValue::new(b.value))?;
        chat.refresh_redactor();
        Ok(())
    })
    .await?;
    Ok(Json(SecretDto { name, value: MASK }))
}

async fn delete_project_secret(
    State(s): State<ApiState>,
    Path((project, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let scope = project_scope(&s, &project).await?;
    let (chat, n) = (s.chat.clone(), name.clone());
    let existed = blocking(move || -> Result<bool, SecretError> {
        let existed = chat.secrets.delete(&scope, &n)?;
        chat.refresh_redactor();
        Ok(existed)
    })
    .await?;
    if existed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no secret {name:?}")))
    }
}
