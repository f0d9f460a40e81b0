//! HTTP routes for talking to the agent: a chat turn streamed as server-sent events,
//! approvals, aborts, and provider keys (stored encrypted, shown masked).
//!
//! `POST /api/v1/chat {message, project?, channel?}` answers `text/event-stream`, one JSON
//! event per `data:` line (`text`, `restart`, `tool_call`, `tool_result`,
//! `approval_requested`, `finished`), ending after `finished`. The owner answers approval
//! requests with `POST /api/v1/approvals/{id} {"approve": bool}`.

use std::{path::PathBuf, sync::Arc};

use axum::{
    body::Body,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post, put},
    Json, Router,
};
use hearth_sync::{DocId, DocumentStore};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{
    agent::{
        provider::{ModelRef, ProviderClient, ProviderKind},
        runner::{Agent, AgentEvent},
    },
    secrets::{SecretStore, SecretValue, MASK},
};

/// Where each provider lives, from settings.
#[derive(Debug, Clone)]
pub struct ProviderUrls {
    /// Anthropic Messages base URL.
    pub anthropic: String,
    /// OpenAI base URL (with `/v1`).
    pub openai: String,
    /// Ollama's OpenAI-compatible base URL.
    pub ollama: String,
}

impl Default for ProviderUrls {
    fn default() -> Self {
        Self {
            anthropic: "https://api.anthropic.com".into(),
            openai: "https://api.openai.com/v1".into(),
            ollama: "http://127.0.0.1:11434/v1".into(),
        }
    }
}

/// Builds the client for `model`'s provider with its key from the secret store.
pub fn provider_for(
    model: &ModelRef,
    urls: &ProviderUrls,
    secrets: &SecretStore,
) -> Result<ProviderClient, String> {
    let (kind, url) = match model.provider.as_str() {
        "anthropic" => (ProviderKind::Anthropic, urls.anthropic.clone()),
        "openai" => (ProviderKind::OpenAi, urls.openai.clone()),
        "ollama" => (ProviderKind::OpenAi, urls.ollama.clone()),
        other => {
            return Err(format!(
                "unknown provider {other:?}: use anthropic, openai or ollama"
            ))
        }
    };
    let key = secrets
        .get("provider", &model.provider)
        .map_err(|e| e.to_string())?;
    ProviderClient::new(
        &model.provider,
        kind,
        &url,
        key.map(|k| k.expose().to_string()),
    )
    .map_err(|e| e.to_string())
}

/// Shared state of the chat routes.
#[derive(Clone)]
pub struct ChatState {
    /// The agent.
    pub agent: Arc<Agent>,
    /// The document store.
    pub store: DocumentStore,
    /// Encrypted secrets.
    pub secrets: Arc<SecretStore>,
    /// The chat model.
    pub model: ModelRef,
    /// The embedding model.
    pub embedding_model: ModelRef,
    /// Provider URLs.
    pub urls: ProviderUrls,
    /// Project directories live under here.
    pub projects_dir: PathBuf,
    /// The hub's general project (by id: a title proves nothing).
    pub general: DocId,
}

/// The routes.
pub fn router(state: ChatState) -> Router {
    Router::new()
        .route("/api/v1/chat", post(chat))
        .route("/api/v1/chat/{channel}/abort", post(abort))
        .route("/api/v1/approvals/{id}", post(approve))
        .route("/api/v1/settings/providers", get(providers))
        .route("/api/v1/settings/providers/{name}", put(set_provider_key))
        .route("/api/v1/projects/{project}/tools", get(project_tools))
        .route(
            "/api/v1/projects/{project}/tools/{tool}",
            put(set_project_tool),
        )
        .route("/api/v1/projects/{project}/secrets", get(project_secrets))
        .route(
            "/api/v1/projects/{project}/secrets/{name}",
            put(set_project_secret).delete(delete_project_secret),
        )
        .with_state(state)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// JSON for one event.
pub fn event_json(ev: &AgentEvent) -> Value {
    match ev {
        AgentEvent::TextDelta { text, .. } => json!({ "type": "text", "text": text }),
        AgentEvent::Restart { .. } => json!({ "type": "restart" }),
        AgentEvent::ToolCall { name, args, .. } => {
            json!({ "type": "tool_call", "name": name, "args": args })
        }
        AgentEvent::ToolResult {
            name,
            output,
            is_error,
            ..
        } => {
            json!({ "type": "tool_result", "name": name, "output": output, "is_error": is_error })
        }
        AgentEvent::ApprovalRequested { id, name, args, .. } => {
            json!({ "type": "approval_requested", "id": id, "name": name, "args": args })
        }
        AgentEvent::Finished { reason, .. } => json!({ "type": "finished", "reason": reason }),
    }
}

fn channel_of(ev: &AgentEvent) -> &str {
    match ev {
        AgentEvent::TextDelta { channel, .. }
        | AgentEvent::Restart { channel }
        | AgentEvent::ToolCall { channel, .. }
        | AgentEvent::ToolResult { channel, .. }
        | AgentEvent::ApprovalRequested { channel, .. }
        | AgentEvent::Finished { channel, .. } => channel,
    }
}

/// Finds a project by name or id (the hub's `general` project, by id, when none is given).
/// An unknown name answers 404, an ambiguous one 409 (use an id).
pub async fn resolve_project(s: &ChatState, given: Option<&str>) -> Result<DocId, Response> {
    use crate::projects::ProjectError;
    let Some(given) = given else {
        return Ok(s.general);
    };
    crate::projects::find_project(&s.store, Some(s.general), given)
        .await
        .map_err(|e| {
            let status = match e {
                ProjectError::NotFound(_) => StatusCode::NOT_FOUND,
                ProjectError::Ambiguous { .. } => StatusCode::CONFLICT,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            error(status, e.to_string())
        })
}

#[derive(Deserialize)]
struct ChatBody {
    message: String,
    project: Option<String>,
    channel: Option<String>,
}

async fn chat(State(s): State<ChatState>, Json(body): Json<ChatBody>) -> Response {
    if body.message.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "message is empty");
    }
    let project = match resolve_project(&s, body.project.as_deref()).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if let Ok(p) = s.store.get::<hearth_sync::Project>(project).await {
        // Projects made after the hub started get their directory on first use.
        let _ = std::fs::create_dir_all(s.projects_dir.join(&p.value.name));
    }
    let channel = body.channel.unwrap_or_else(|| "web".into());
    let mut events = s.agent.subscribe();
    let agent = s.agent.clone();
    let (ch, message) = (channel.clone(), body.message);
    let run = tokio::spawn(async move { agent.invoke(&ch, project, &message).await });
    // Stream this channel's events until the invocation finishes.
    let stream = futures_util::stream::unfold(
        (events.resubscribe(), Some(run), false),
        move |(mut rx, run, done)| {
            let channel = channel.clone();
            async move {
                if done {
                    return None;
                }
                loop {
                    match rx.recv().await {
                        Ok(ev) if channel_of(&ev) == channel => {
                            let finished = matches!(ev, AgentEvent::Finished { .. });
                            let line = format!("data: {}\n\n", event_json(&ev));
                            return Some((Ok::<_, std::io::Error>(line), (rx, run, finished)));
                        }
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            continue
                        }
                        Err(_) => return None,
                    }
                }
            }
        },
    );
    // `events` was only needed to subscribe before the invocation started.
    drop(events.try_recv());
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "cannot stream"))
}

async fn abort(State(s): State<ChatState>, Path(channel): Path<String>) -> StatusCode {
    s.agent.abort(&channel);
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
struct Decision {
    approve: bool,
}

async fn approve(
    State(s): State<ChatState>,
    Path(id): Path<u64>,
    Json(d): Json<Decision>,
) -> Response {
    if s.agent.decide(id, d.approve) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        error(
            StatusCode::NOT_FOUND,
            format!("no approval {id} is waiting (answered, or timed out)"),
        )
    }
}

async fn providers(State(s): State<ChatState>) -> Response {
    let mut data = Vec::new();
    for name in ["anthropic", "openai", "ollama"] {
        let set = matches!(s.secrets.get("provider", name), Ok(Some(_)));
        data.push(json!({ "name": name, "key": if set { json!(MASK) } else { Value::Null } }));
    }
    Json(json!({ "data": data, "chat_model": s.model.to_string(), "embedding_model": s.embedding_model.to_string() }))
        .into_response()
}

#[derive(Deserialize)]
struct KeyBody {
    key: String,
}

async fn set_provider_key(
    State(s): State<ChatState>,
    Path(name): Path<String>,
    Json(b): Json<KeyBody>,
) -> Response {
    if !["anthropic", "openai", "ollama"].contains(&name.as_str()) {
        return error(StatusCode::NOT_FOUND, format!("unknown provider {name:?}"));
    }
    if let Err(e) = s.secrets.set("provider", &name, &SecretValue::new(b.key)) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    match s.secrets.redactor() {
        Ok(r) => {
            crate::secrets::set_log_redactor(r.clone());
            s.agent.set_redactor(r)
        }
        Err(e) => tracing::warn!(error = %e, "cannot refresh the redactor"),
    }
    if name == s.model.provider {
        match provider_for(&s.model, &s.urls, &s.secrets) {
            Ok(p) => s.agent.set_provider(p),
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        }
    }
    Json(json!({ "name": name, "key": MASK })).into_response()
}

async fn project_scope(s: &ChatState, project: &str) -> Result<String, Response> {
    resolve_project(s, Some(project))
        .await
        .map(|id| format!("project:{id}"))
}

async fn project_secrets(State(s): State<ChatState>, Path(project): Path<String>) -> Response {
    let scope = match project_scope(&s, &project).await {
        Ok(scope) => scope,
        Err(r) => return r,
    };
    match s.secrets.names(&scope) {
        // Values are never returned, only masked.
        Ok(names) => Json(json!({ "data": names.iter().map(|n| json!({ "name": n, "value": MASK })).collect::<Vec<_>>() }))
            .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct SecretBody {
    value: String,
}

async fn set_project_secret(
    State(s): State<ChatState>,
    Path((project, name)): Path<(String, String)>,
    Json(b): Json<SecretBody>,
) -> Response {
    let scope = match project_scope(&s, &project).await {
        Ok(scope) => scope,
        Err(r) => return r,
    };
    if let Err(e) = s.secrets.set(&scope, &name, &SecretValue::new(b.value)) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    if let Ok(r) = s.secrets.redactor() {
        crate::secrets::set_log_redactor(r.clone());
        s.agent.set_redactor(r);
    }
    Json(json!({ "name": name, "value": MASK })).into_response()
}

async fn delete_project_secret(
    State(s): State<ChatState>,
    Path((project, name)): Path<(String, String)>,
) -> Response {
    let scope = match project_scope(&s, &project).await {
        Ok(scope) => scope,
        Err(r) => return r,
    };
    match s.secrets.delete(&scope, &name) {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => error(StatusCode::NOT_FOUND, format!("no secret {name:?}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn project_tools(State(s): State<ChatState>, Path(project): Path<String>) -> Response {
    let id = match resolve_project(&s, Some(&project)).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    let allowed = match s.agent.permitted(&id) {
        Ok(t) => t.into_iter().map(|t| t.name).collect::<Vec<_>>(),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let data: Vec<Value> = crate::agent::tools::catalog()
        .into_iter()
        .map(|t| {
            json!({ "name": t.name, "description": t.description, "allowed": allowed.contains(&t.name),
                    "risky": t.risk == crate::agent::tools::Risk::Risky })
        })
        .collect();
    Json(json!({ "data": data })).into_response()
}

#[derive(Deserialize)]
struct Allowed {
    allowed: bool,
}

async fn set_project_tool(
    State(s): State<ChatState>,
    Path((project, tool)): Path<(String, String)>,
    Json(a): Json<Allowed>,
) -> Response {
    let id = match resolve_project(&s, Some(&project)).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    match s.agent.set_permission(&id, &tool, a.allowed) {
        Ok(()) => Json(json!({ "tool": tool, "allowed": a.allowed })).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}
