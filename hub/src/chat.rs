//! Chat turns as the hub runs them, for every front end (the HTTP API today, channels
//! later): which project a turn is for, starting it inside the hub's set of turns, and
//! the stream of that one conversation's events. Also the provider factory.
//!
//! A turn is spawned into a `JoinSet` owned by [`ChatService`], never detached, so
//! [`ChatService::shutdown`] reaches every turn: it stops them (the agent ends them as
//! aborted and resolves their approvals as stopped), waits a grace period and aborts
//! what is left. Every chat event goes through the hub's numbered stream
//! ([`EventHub`], which the API's WebSocket serves); a turn's stream is that stream's
//! events of its conversation, the same numbered JSON. It subscribes before the turn
//! starts, so no early event is lost, and ends after `finished`, or with an `error` event
//! when the turn fails (also numbered; after `finished` when the failure came late).
//!
//! Knows no HTTP: the API shapes what this returns.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures_util::Stream;
use hearth_sync::{DocId, DocumentStore};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::{
    agent::{
        provider::{ModelRef, ProviderClient, ProviderKind},
        runner::{Agent, AgentEvent},
    },
    events::{Event, EventHub, Next, Subscription},
    projects::ProjectError,
    secrets::SecretStore,
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

/// The providers a key can be stored for.
pub const PROVIDERS: [&str; 3] = ["anthropic", "openai", "ollama"];

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

/// Why a turn could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// The project is unknown or ambiguous.
    #[error(transparent)]
    Project(#[from] ProjectError),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The hub is stopping.
    #[error("the hub is shutting down")]
    ShuttingDown,
}

/// JSON for one event, as every front end shows it.
pub fn event_json(ev: &AgentEvent) -> Value {
    let (project, conversation) = (ev.project().to_string(), ev.conversation());
    let mut v = match ev {
        AgentEvent::Started { message, .. } => json!({ "type": "started", "message": message }),
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
        AgentEvent::ApprovalResolved { id, resolution, .. } => {
            json!({ "type": "approval_resolved", "id": id, "resolution": resolution.as_str() })
        }
        AgentEvent::Finished { reason, .. } => json!({ "type": "finished", "reason": reason }),
    };
    v["project"] = json!(project);
    v["conversation"] = json!(conversation);
    v
}

/// The chat side of the hub.
pub struct ChatService {
    /// The agent.
    pub agent: Arc<Agent>,
    /// The document store.
    pub store: DocumentStore,
    /// Encrypted secrets.
    pub secrets: Arc<SecretStore>,
    /// Provider URLs.
    pub urls: ProviderUrls,
    /// Project directories live under here, named by project id.
    pub projects_dir: PathBuf,
    /// The hub's general project (by id: a title proves nothing).
    pub general: DocId,
    /// The hub's numbered event stream, which every chat event goes through.
    pub events: Arc<EventHub>,
    turns: Mutex<Option<JoinSet<()>>>,
}

impl std::fmt::Debug for ChatService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatService").finish_non_exhaustive()
    }
}

/// A turn's stream: its conversation's events from the hub's numbered stream.
struct TurnStream {
    sub: Subscription,
    events: Arc<EventHub>,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Set once the turn's task ended: `Some(message)` if it was cancelled.
    ended: Option<Option<String>>,
    finished: bool,
    project: DocId,
    conversation: String,
}

impl TurnStream {
    fn mine(&self, ev: &Event) -> bool {
        ev.chat
            .as_ref()
            .is_some_and(|k| k.project == self.project && k.conversation == self.conversation)
    }

    /// Takes `ev` if it is this conversation's.
    fn take(&mut self, ev: &Event) -> Option<Arc<str>> {
        if !self.mine(ev) {
            return None;
        }
        self.finished = ev.chat.as_ref().is_some_and(|k| k.terminal);
        Some(ev.json.clone())
    }

    async fn next(&mut self) -> Option<Arc<str>> {
        loop {
            if self.finished {
                return None;
            }
            if let Some(cancelled) = &self.ended {
                // The turn's task ended, so every event it sent is already numbered.
                match self.sub.try_next() {
                    Some(Next::Event(ev)) => match self.take(&ev) {
                        Some(json) => return Some(json),
                        None => continue,
                    },
                    Some(Next::Lagged { last }) => {
                        self.sub = self.events.subscribe(Some(last));
                        continue;
                    }
                    Some(Next::Resync { .. }) => continue,
                    Some(Next::Closed) | None => {
                        self.finished = true;
                        return cancelled.as_ref().map(|message| {
                            json!({ "type": "error", "message": message,
                                    "project": self.project.to_string(),
                                    "conversation": self.conversation })
                            .to_string()
                            .into()
                        });
                    }
                }
            }
            let got = {
                let (sub, done) = (&mut self.sub, self.done.as_mut());
                tokio::select! {
                    biased;
                    n = sub.next() => Got::Next(n),
                    r = async {
                        match done {
                            Some(d) => d.await,
                            None => std::future::pending().await,
                        }
                    } => Got::Done(r.is_ok()),
                }
            };
            match got {
                Got::Next(Next::Event(ev)) => {
                    if let Some(json) = self.take(&ev) {
                        return Some(json);
                    }
                }
                Got::Next(Next::Lagged { last }) => self.sub = self.events.subscribe(Some(last)),
                Got::Next(Next::Resync { .. }) => {}
                Got::Next(Next::Closed) => return None,
                Got::Done(ran) => {
                    self.done = None;
                    self.ended = Some(
                        (!ran).then(|| "the turn was cancelled: the hub is shutting down".into()),
                    );
                }
            }
        }
    }
}

enum Got {
    Next(Next),
    Done(bool),
}

impl ChatService {
    /// A service over `agent`.
    pub fn new(
        agent: Arc<Agent>,
        store: DocumentStore,
        secrets: Arc<SecretStore>,
        urls: ProviderUrls,
        projects_dir: PathBuf,
        general: DocId,
        events: Arc<EventHub>,
    ) -> Self {
        events.hook_agent(&agent);
        Self {
            events,
            agent,
            store,
            secrets,
            urls,
            projects_dir,
            general,
            turns: Mutex::new(Some(JoinSet::new())),
        }
    }

    /// The live project `given` names (name, id or id prefix; `general` by id), or
    /// the general project when none is given.
    pub async fn resolve(&self, given: Option<&str>) -> Result<DocId, ProjectError> {
        match given {
            None => Ok(self.general),
            Some(given) => {
                crate::projects::find_project(&self.store, Some(self.general), given).await
            }
        }
    }

    /// Creates the project's directory, named by id.
    pub fn ensure_project_dir(&self, project: DocId) {
        ensure_project_dir(&self.projects_dir, project);
    }

    /// Starts a turn: `message` in `conversation` of `project` (already resolved). The
    /// stream carries that conversation's numbered events (JSON objects, `seq` first) and
    /// ends after `finished`, or with an `error` event if the turn fails before finishing.
    pub fn start_turn(
        &self,
        project: DocId,
        conversation: &str,
        message: &str,
    ) -> Result<impl Stream<Item = Arc<str>> + Send + 'static, ChatError> {
        if message.trim().is_empty() {
            return Err(ChatError::Invalid("message is empty".into()));
        }
        if conversation.is_empty()
            || conversation.len() > 100
            || conversation.chars().any(char::is_control)
        {
            return Err(ChatError::Invalid(
                "a conversation name is 1-100 characters, no control characters".into(),
            ));
        }
        self.ensure_project_dir(project);
        // Subscribe before the turn starts, so no early event is lost.
        let sub = self.events.subscribe(None);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        {
            let mut turns = self.turns.lock().map_err(|_| ChatError::ShuttingDown)?;
            let Some(turns) = turns.as_mut() else {
                return Err(ChatError::ShuttingDown);
            };
            // Reap finished turns.
            while turns.try_join_next().is_some() {}
            let (agent, events) = (self.agent.clone(), self.events.clone());
            let (conv, message) = (conversation.to_string(), message.to_string());
            turns.spawn(async move {
                if let Err(e) = agent.invoke(&conv, project, &message).await {
                    let message = agent.redact_text(&e.to_string());
                    tracing::warn!(conversation = %conv, error = %message, "chat turn failed");
                    events.publish_turn_error(project, &conv, &message);
                }
                let _ = done_tx.send(());
            });
        }
        let state = TurnStream {
            sub,
            events: self.events.clone(),
            done: Some(done_rx),
            ended: None,
            finished: false,
            project,
            conversation: conversation.to_string(),
        };
        Ok(futures_util::stream::unfold(state, |mut st| async move {
            st.next().await.map(|v| (v, st))
        }))
    }

    /// Stops every turn for shutdown: new ones are refused, running ones are stopped and
    /// given `grace` to finish (their transcripts are saved), then aborted.
    pub async fn shutdown(&self, grace: Duration) {
        let turns = self.turns.lock().ok().and_then(|mut t| t.take());
        self.agent.stop_all();
        let Some(mut turns) = turns else { return };
        let drained =
            tokio::time::timeout(grace, async { while turns.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                left = turns.len(),
                "chat turns did not stop in time; aborting them"
            );
        }
        turns.shutdown().await;
    }
}

/// Creates `<dir>/<project id>`: directories are named by id, never by a project's name,
/// which any paired device may set (to `../x`, say).
pub fn ensure_project_dir(dir: &std::path::Path, project: DocId) {
    if let Err(e) = std::fs::create_dir_all(dir.join(project.to_string())) {
        tracing::warn!(%project, error = %e, "cannot create the project directory");
    }
}

impl ChatService {
    /// Puts runtime settings into force: the provider for the chat model (with its
    /// stored key), the models, the instructions and the approval timeout.
    /// Blocking (reads the secret store).
    pub fn apply_runtime(&self, s: &crate::settings::RuntimeSettings) -> Result<(), String> {
        let provider = provider_for(&s.chat_model, &self.urls, &self.secrets)?;
        self.agent.set_provider(provider);
        self.agent.update_config(|c| {
            c.model = s.chat_model.model.clone();
            c.summary_model = s.summary_model.as_ref().map(|m| m.model.clone());
            c.instructions = s.instructions.clone();
            c.approval_timeout = s.approval_timeout();
        });
        Ok(())
    }

    /// Reloads the values redacted from everything that leaves the hub (after a secret
    /// changed). Blocking (reads the secret store).
    pub fn refresh_redactor(&self) {
        match self.secrets.redactor() {
            Ok(r) => {
                crate::secrets::set_log_redactor(r.clone());
                self.agent.set_redactor(r);
            }
            Err(e) => tracing::warn!(error = %e, "cannot refresh the redactor"),
        }
    }
}
