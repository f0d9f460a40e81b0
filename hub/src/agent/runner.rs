//! The agent loop: one invocation per user message, scoped to a project.
//!
//! [`Agent::invoke`] stores the user message, assembles the system prompt (agent and
//! project instructions, context: date, model, project, permitted tools), streams the
//! model's turn, runs the tool calls it makes (asking the owner first for risky ones),
//! feeds the results back, and repeats until the model stops or the step limit is hit.
//! Events go to every subscriber. Invocations are serialised per channel and run
//! concurrently across channels; [`Agent::abort`] cancels a channel's running invocation
//! by bumping its generation. The transcript is stored when the turn completes or is
//! aborted (tool calls still in flight are dropped; tool output over 100,000 characters
//! is capped with a note of its size). Every tool run is appended to the audit log.

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use hearth_sync::{DocId, DocumentStore, Project};
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot};

use crate::secrets::Redactor;

use super::{
    provider::{
        ChatRequest, Content, Message, ProviderClient, ProviderError, Role, StreamEvent, ToolSpec,
    },
    tools::{self, Risk, ToolContext, ToolInfo},
};

/// Tool output longer than this is cut, with a note of its full size.
pub const MAX_TOOL_OUTPUT: usize = 100_000;

/// What subscribers see.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Model text.
    TextDelta {
        /// Channel.
        channel: String,
        /// Text.
        text: String,
    },
    /// The model's try failed mid-stream and is retried: drop the partial text.
    Restart {
        /// Channel.
        channel: String,
    },
    /// A tool is about to run.
    ToolCall {
        /// Channel.
        channel: String,
        /// Tool name.
        name: String,
        /// Arguments.
        args: Value,
    },
    /// A tool finished.
    ToolResult {
        /// Channel.
        channel: String,
        /// Tool name.
        name: String,
        /// Output (capped).
        output: String,
        /// Whether it failed or was denied.
        is_error: bool,
    },
    /// A risky tool waits for the owner.
    ApprovalRequested {
        /// Approval id for [`Agent::decide`].
        id: u64,
        /// Channel.
        channel: String,
        /// Tool name.
        name: String,
        /// Arguments.
        args: Value,
    },
    /// The invocation ended.
    Finished {
        /// Channel.
        channel: String,
        /// Why: `end_turn`, `step_limit`, `aborted`, or `error: …`.
        reason: String,
    },
}

/// Agent settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Model id for the provider.
    pub model: String,
    /// The agent's own instructions (static, cached by the provider).
    pub instructions: String,
    /// Model calls per invocation.
    pub max_steps: u32,
    /// How long a risky tool waits for the owner before it counts as denied.
    pub approval_timeout: Duration,
    /// Output limit per model call.
    pub max_tokens: u32,
    /// Opt-in tools to offer besides the defaults (e.g. `notes_delete`).
    pub extra_tools: Vec<String>,
    /// Where project directories live (`<dir>/<project name>`).
    pub projects_dir: Option<std::path::PathBuf>,
    /// Model for rolling summaries (default: the chat model, same provider).
    pub summary_model: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: "claude-sonnet-4-5".into(),
            instructions: "You are Hearth, the owner's personal agent. Use the tools to keep their notes and tasks.".into(),
            max_steps: 12,
            approval_timeout: Duration::from_secs(300),
            max_tokens: 4096,
            extra_tools: Vec::new(),
            projects_dir: None,
            summary_model: None,
        }
    }
}

/// Why an invocation could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The hub's database failed.
    #[error("agent storage: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` could not be opened (e.g. it is from a newer release).
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// The document store failed.
    #[error(transparent)]
    Store(#[from] hearth_sync::StoreError),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
}

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The final assistant text.
    pub text: String,
    /// Why it ended.
    pub reason: String,
    /// Model calls made.
    pub steps: u32,
}

/// The hub's agent.
pub struct Agent {
    store: DocumentStore,
    provider: Mutex<ProviderClient>,
    config: AgentConfig,
    updates: Arc<tools::UpdateLog>,
    db: Mutex<Connection>,
    events: broadcast::Sender<AgentEvent>,
    channels: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    generations: Mutex<HashMap<String, u64>>,
    approvals: Mutex<HashMap<u64, oneshot::Sender<bool>>>,
    next_approval: AtomicU64,
    redactor: Mutex<Redactor>,
}

/// Who started an invocation, which decides how risky tools are approved.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// The owner, chatting: risky tools ask and wait.
    Interactive,
    /// A scheduled run nobody watches: risky tools run only if listed here, else denied.
    Scheduled {
        /// Risky tools the owner allowed this schedule to run without asking.
        auto_approve: Vec<String>,
    },
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.config.model)
            .finish()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Caps tool output at [`MAX_TOOL_OUTPUT`] characters, noting the full size.
pub fn cap_output(s: String) -> String {
    let n = s.chars().count();
    if n <= MAX_TOOL_OUTPUT {
        return s;
    }
    let mut cut: String = s.chars().take(MAX_TOOL_OUTPUT).collect();
    cut.push_str(&format!(
        "\n[output truncated: {n} characters in all, first {MAX_TOOL_OUTPUT} shown]"
    ));
    cut
}

impl Agent {
    /// An agent over `store`, keeping messages and the audit log in `db`.
    pub fn new(
        store: DocumentStore,
        provider: ProviderClient,
        config: AgentConfig,
        db: &Path,
    ) -> Result<Self, AgentError> {
        // WAL and NORMAL: a message survives a crash of the hub process at the cost of a
        // WAL append, not an fsync per row (which would dominate a turn). Audit rows are
        // committed with FULL (see `audit`), as durable as the actions they record.
        let conn = crate::hubdb::open(db, crate::hubdb::Durability::Normal)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                channel TEXT NOT NULL,
                role TEXT NOT NULL,
                content TEXT NOT NULL,
                created_at INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS messages_channel ON messages(channel, id);
            CREATE TABLE IF NOT EXISTS audit_log (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                at INTEGER NOT NULL,
                channel TEXT NOT NULL,
                project TEXT NOT NULL,
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                outcome TEXT NOT NULL,
                is_error INTEGER NOT NULL
            );
            CREATE TRIGGER IF NOT EXISTS audit_log_append_only_u BEFORE UPDATE ON audit_log
                BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
            CREATE TRIGGER IF NOT EXISTS audit_log_append_only_d BEFORE DELETE ON audit_log
                BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
        )?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS tool_permissions (
                project TEXT NOT NULL,
                tool TEXT NOT NULL,
                allowed INTEGER NOT NULL,
                PRIMARY KEY (project, tool)
            );",
        )?;
        super::memory::migrate(&conn)?;
        super::usage::migrate(&conn)?;
        let (events, _) = broadcast::channel(4096);
        let updates = Arc::new(tools::UpdateLog::open(db)?);
        Ok(Self {
            store,
            provider: Mutex::new(provider),
            config,
            updates,
            db: Mutex::new(conn),
            events,
            channels: Mutex::new(HashMap::new()),
            generations: Mutex::new(HashMap::new()),
            approvals: Mutex::new(HashMap::new()),
            next_approval: AtomicU64::new(1),
            redactor: Mutex::new(Redactor::default()),
        })
    }

    /// Replaces the model provider (a key or URL changed); the next model call uses it.
    pub fn set_provider(&self, provider: ProviderClient) {
        if let Ok(mut p) = self.provider.lock() {
            *p = provider;
        }
    }

    /// Sets the values to scrub from tool output (every stored secret).
    pub fn set_redactor(&self, redactor: Redactor) {
        if let Ok(mut r) = self.redactor.lock() {
            *r = redactor;
        }
    }

    fn redact(&self, text: String) -> String {
        self.redactor
            .lock()
            .map(|r| r.redact(&text))
            .unwrap_or(text)
    }

    /// Daily usage rollups.
    pub fn usage(&self) -> Result<Vec<super::usage::DailyUsage>, AgentError> {
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        Ok(super::usage::daily(&db)?)
    }

    /// The channel's rolling summary, if one was made.
    pub fn summary(&self, channel: &str) -> Result<Option<String>, AgentError> {
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        Ok(super::memory::summary(&db, channel)?.map(|(s, _)| s))
    }

    /// Subscribes to every channel's events.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.events.subscribe()
    }

    /// Cancels the channel's running invocation (it ends with reason `aborted`).
    pub fn abort(&self, channel: &str) {
        if let Ok(mut g) = self.generations.lock() {
            *g.entry(channel.to_string()).or_default() += 1;
        }
    }

    /// Answers an approval request; returns whether one was waiting.
    pub fn decide(&self, id: u64, approve: bool) -> bool {
        let waiting = self.approvals.lock().ok().and_then(|mut a| a.remove(&id));
        waiting.is_some_and(|tx| tx.send(approve).is_ok())
    }

    fn generation(&self, channel: &str) -> u64 {
        self.generations
            .lock()
            .map(|g| g.get(channel).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    fn emit(&self, ev: AgentEvent) {
        let _ = self.events.send(ev);
    }

    fn store_message(&self, channel: &str, role: &str, content: &Value) -> Result<(), AgentError> {
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        db.execute(
            "INSERT INTO messages (channel, role, content, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![channel, role, content.to_string(), now_ms()],
        )?;
        Ok(())
    }

    fn audit(
        &self,
        channel: &str,
        project: &DocId,
        tool: &str,
        args: &Value,
        outcome: &str,
        is_error: bool,
    ) {
        // The row is committed with synchronous=FULL (the WAL is fsynced) before the
        // tool's result is reported to anyone, so an action that survived a power cut is
        // never missing from the log; the connection goes back to NORMAL for messages.
        let written = self.db.lock().map(|db| {
            db.pragma_update(None, "synchronous", "FULL")?;
            let inserted = db.execute(
                "INSERT INTO audit_log (at, channel, project, tool, args, outcome, is_error)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    now_ms(),
                    channel,
                    project.to_string(),
                    tool,
                    args.to_string(),
                    outcome,
                    is_error
                ],
            );
            db.pragma_update(None, "synchronous", "NORMAL")?;
            inserted
        });
        if !matches!(written, Ok(Ok(_))) {
            tracing::error!(tool, "could not append to the audit log");
        }
    }

    /// The audit log, oldest first: (tool, outcome, is_error).
    pub fn audit_entries(&self) -> Result<Vec<(String, String, bool)>, AgentError> {
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        let mut stmt = db.prepare("SELECT tool, outcome, is_error FROM audit_log ORDER BY id")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The channel's summary (if any) and the messages after it, oldest first.
    fn history(&self, channel: &str) -> Result<(Option<String>, Vec<Message>), AgentError> {
        let rows = self.rows_after_summary(channel)?;
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        let summary = super::memory::summary(&db, channel)?.map(|(s, _)| s);
        Ok((
            summary,
            rows.iter()
                .filter_map(|(_, role, content)| decode_message(role, content))
                .collect(),
        ))
    }

    fn rows_after_summary(&self, channel: &str) -> Result<Vec<super::memory::Row>, AgentError> {
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        let covered = super::memory::summary(&db, channel)?
            .map(|(_, c)| c)
            .unwrap_or(0);
        let mut stmt = db.prepare(
            "SELECT id, role, content FROM messages WHERE channel = ?1 AND id > ?2 ORDER BY id",
        )?;
        let rows = stmt
            .query_map(params![channel, covered], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Folds old messages into the channel's summary when enough have accumulated.
    /// Best effort: a failure is logged, never returned.
    async fn summarize_if_due(&self, channel: &str, project: &DocId) {
        let result: Result<(), AgentError> = async {
            let rows = self.rows_after_summary(channel)?;
            let since = {
                let db = self
                    .db
                    .lock()
                    .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
                super::memory::seen_until(&db, channel)?
            };
            let Some((old, covered)) = super::memory::due(&rows, since) else {
                return Ok(());
            };
            let newest = rows.last().map(|r| r.0).unwrap_or(covered);
            let previous = self.summary(channel)?;
            let req = ChatRequest {
                model: self
                    .config
                    .summary_model
                    .clone()
                    .unwrap_or_else(|| self.config.model.clone()),
                system: "You maintain concise running summaries of conversations.".into(),
                system_dynamic: String::new(),
                messages: vec![Message {
                    role: Role::User,
                    content: vec![Content::Text(super::memory::prompt(
                        previous.as_deref(),
                        &old,
                    ))],
                }],
                tools: Vec::new(),
                max_tokens: 1024,
            };
            let provider = self
                .provider
                .lock()
                .map(|p| p.clone())
                .map_err(|_| AgentError::Invalid("provider lock poisoned".into()))?;
            let turn = provider.stream(&req, |_| {}).await?;
            self.record_usage(&req.model, project, &turn.usage);
            if turn.text.trim().is_empty() {
                return Err(AgentError::Invalid("the summary came back empty".into()));
            }
            let db = self
                .db
                .lock()
                .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
            super::memory::store(&db, channel, turn.text.trim(), covered, newest, now_ms())?;
            Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(channel, error = %e, "summarising the conversation failed; the turn is unaffected");
        }
    }

    fn record_usage(&self, model: &str, project: &DocId, usage: &super::provider::Usage) {
        let ok = self
            .db
            .lock()
            .map(|db| {
                super::usage::record(&db, &today(), model, &project.to_string(), usage).is_ok()
            })
            .unwrap_or(false);
        if !ok {
            tracing::warn!(model, "could not record usage");
        }
    }

    /// The tools offered in `project`: the defaults, the globally enabled opt-ins, and
    /// the project's own overrides (which win).
    pub fn permitted(&self, project: &DocId) -> Result<Vec<ToolInfo>, AgentError> {
        let overrides: HashMap<String, bool> = {
            let db = self
                .db
                .lock()
                .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
            let mut stmt =
                db.prepare("SELECT tool, allowed FROM tool_permissions WHERE project = ?1")?;
            let rows = stmt
                .query_map([project.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            rows
        };
        Ok(tools::catalog()
            .into_iter()
            .filter(|t| match overrides.get(t.name) {
                Some(allowed) => *allowed,
                None => t.default_on || self.config.extra_tools.iter().any(|x| x == t.name),
            })
            .collect())
    }

    /// Allows or forbids `tool` in `project`.
    pub fn set_permission(
        &self,
        project: &DocId,
        tool: &str,
        allowed: bool,
    ) -> Result<(), AgentError> {
        if !tools::catalog().iter().any(|t| t.name == tool) {
            return Err(AgentError::Invalid(format!("unknown tool {tool:?}")));
        }
        let db = self
            .db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))?;
        db.execute(
            "INSERT INTO tool_permissions (project, tool, allowed) VALUES (?1, ?2, ?3)
             ON CONFLICT(project, tool) DO UPDATE SET allowed = excluded.allowed",
            params![project.to_string(), tool, allowed],
        )?;
        Ok(())
    }

    async fn system_prompt(
        &self,
        project: DocId,
        summary: Option<&str>,
        permitted: &[ToolInfo],
    ) -> Result<(String, String), AgentError> {
        let p = self.store.get::<Project>(project).await?;
        let names: Vec<&str> = permitted.iter().map(|t| t.name).collect();
        let dir = self
            .config
            .projects_dir
            .as_ref()
            .map(|d| d.join(&p.value.name).display().to_string())
            .unwrap_or_else(|| "(none)".into());
        let visible = {
            let store = self.store.clone();
            tokio::task::spawn_blocking(move || store.scope_blocking(project))
                .await
                .map_err(|e| AgentError::Invalid(e.to_string()))??
        };
        let skills: Vec<String> = self
            .store
            .list(hearth_sync::Filter {
                limit: 1_000,
                ..hearth_sync::Filter::new(hearth_sync::Kind::Skill)
            })
            .await?
            .data
            .into_iter()
            .filter(|s| s.project.is_none_or(|p| visible.contains_project(&p)))
            .map(|s| s.title)
            .collect();
        let dynamic = format!(
            "Project: {} (id {project}). Its instructions:\n{}\n\nDate: {}\nModel: {}\nProject directory: {dir}\nTools: {}\nSkills (read with skills_read): {}",
            p.value.name,
            if p.value.instructions.is_empty() { "(none)" } else { &p.value.instructions },
            today(),
            self.config.model,
            names.join(", "),
            if skills.is_empty() { "(none)".to_string() } else { skills.join(", ") },
        );
        let dynamic = match summary {
            Some(sum) => format!("{dynamic}\n\nConversation so far (summary):\n{sum}"),
            None => dynamic,
        };
        Ok((self.config.instructions.clone(), dynamic))
    }

    /// Runs one invocation: `message` from the user on `channel`, in `project`.
    pub async fn invoke(
        &self,
        channel: &str,
        project: DocId,
        message: &str,
    ) -> Result<Outcome, AgentError> {
        self.invoke_with(channel, project, message, Trigger::Interactive)
            .await
    }

    /// Runs one invocation started by `trigger`.
    pub async fn invoke_with(
        &self,
        channel: &str,
        project: DocId,
        message: &str,
        trigger: Trigger,
    ) -> Result<Outcome, AgentError> {
        let lock = {
            let mut ch = self
                .channels
                .lock()
                .map_err(|_| AgentError::Invalid("channel lock poisoned".into()))?;
            ch.entry(channel.to_string()).or_default().clone()
        };
        let _serial = lock.lock().await;
        let generation = self.generation(channel);
        let user = json!([{ "type": "text", "text": message }]);
        // Stored before anything streams, so a crash never loses what the user said.
        self.store_message(channel, "user", &user)?;
        // The permitted tools, read once: offered to the model, named in the prompt, checked per call.
        let permitted = self.permitted(&project)?;
        let (summary, mut messages) = self.history(channel)?;
        let (system, system_dynamic) = self
            .system_prompt(project, summary.as_deref(), &permitted)
            .await?;
        let specs: Vec<ToolSpec> = permitted
            .iter()
            .cloned()
            .map(|t| ToolSpec {
                name: t.name.into(),
                description: t.description.into(),
                input_schema: t.schema,
            })
            .collect();
        let risky: HashMap<String, Risk> = permitted
            .iter()
            .map(|t| (t.name.to_string(), t.risk))
            .collect();
        let ctx = ToolContext {
            store: self.store.clone(),
            updates: self.updates.clone(),
            project,
        };
        let mut transcript: Vec<(String, Value)> = Vec::new();
        let mut steps = 0;
        let mut last_text = String::new();
        let reason = loop {
            if self.generation(channel) != generation {
                break "aborted".to_string();
            }
            if steps >= self.config.max_steps {
                break "step_limit".to_string();
            }
            steps += 1;
            let req = ChatRequest {
                model: self.config.model.clone(),
                system: system.clone(),
                system_dynamic: system_dynamic.clone(),
                messages: messages.clone(),
                tools: specs.clone(),
                max_tokens: self.config.max_tokens,
            };
            let ch = channel.to_string();
            let provider = self
                .provider
                .lock()
                .map(|p| p.clone())
                .map_err(|_| AgentError::Invalid("provider lock poisoned".into()))?;
            let turn = provider
                .stream(&req, |ev| match ev {
                    StreamEvent::TextDelta(text) => self.emit(AgentEvent::TextDelta {
                        channel: ch.clone(),
                        text,
                    }),
                    StreamEvent::Restart { .. } => self.emit(AgentEvent::Restart {
                        channel: ch.clone(),
                    }),
                    StreamEvent::ToolCall(_) => {}
                })
                .await;
            let turn = match turn {
                Ok(t) => t,
                Err(e) => {
                    self.emit(AgentEvent::Finished {
                        channel: channel.into(),
                        reason: format!("error: {e}"),
                    });
                    self.save_transcript(channel, &transcript)?;
                    return Err(e.into());
                }
            };
            self.record_usage(&self.config.model, &project, &turn.usage);
            last_text = turn.text.clone();
            let mut assistant = Vec::new();
            if !turn.text.is_empty() {
                assistant.push(Content::Text(turn.text.clone()));
            }
            for c in &turn.tool_calls {
                assistant.push(Content::ToolUse {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    input: c.input.clone(),
                });
            }
            if turn.tool_calls.is_empty() {
                transcript.push(("assistant".into(), encode_content(&assistant)));
                break turn.stop_reason.clone();
            }
            let mut results = Vec::new();
            for c in &turn.tool_calls {
                if self.generation(channel) != generation {
                    break;
                }
                self.emit(AgentEvent::ToolCall {
                    channel: channel.into(),
                    name: c.name.clone(),
                    args: c.input.clone(),
                });
                let (output, is_error) = match risky.get(&c.name) {
                    None => (
                        format!("tool {} is not permitted in this project", c.name),
                        true,
                    ),
                    Some(risk) => {
                        let approved = match (&trigger, *risk) {
                            (_, Risk::Safe) => true,
                            (Trigger::Interactive, Risk::Risky) => {
                                self.ask(channel, &c.name, &c.input).await
                            }
                            (Trigger::Scheduled { auto_approve }, Risk::Risky) => {
                                auto_approve.contains(&c.name)
                            }
                        };
                        if approved {
                            match tools::call(&ctx, &c.name, c.input.clone()).await {
                                Ok(v) => (cap_output(self.redact(v.to_string())), false),
                                Err(e) => (self.redact(e.to_string()), true),
                            }
                        } else {
                            ("the owner denied this tool call".to_string(), true)
                        }
                    }
                };
                self.audit(channel, &project, &c.name, &c.input, &output, is_error);
                self.emit(AgentEvent::ToolResult {
                    channel: channel.into(),
                    name: c.name.clone(),
                    output: output.clone(),
                    is_error,
                });
                results.push(Content::ToolResult {
                    id: c.id.clone(),
                    content: output,
                    is_error,
                });
            }
            if results.len() < turn.tool_calls.len() {
                // Aborted between calls: the calls without results are dropped.
                break "aborted".to_string();
            }
            transcript.push(("assistant".into(), encode_content(&assistant)));
            transcript.push(("user".into(), encode_content(&results)));
            messages.push(Message {
                role: Role::Assistant,
                content: assistant,
            });
            messages.push(Message {
                role: Role::User,
                content: results,
            });
        };
        self.save_transcript(channel, &transcript)?;
        self.summarize_if_due(channel, &project).await;
        self.emit(AgentEvent::Finished {
            channel: channel.into(),
            reason: reason.clone(),
        });
        Ok(Outcome {
            text: last_text,
            reason,
            steps,
        })
    }

    fn save_transcript(
        &self,
        channel: &str,
        transcript: &[(String, Value)],
    ) -> Result<(), AgentError> {
        for (role, content) in transcript {
            self.store_message(channel, role, content)?;
        }
        Ok(())
    }

    async fn ask(&self, channel: &str, name: &str, args: &Value) -> bool {
        let id = self.next_approval.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut a) = self.approvals.lock() {
            a.insert(id, tx);
        }
        self.emit(AgentEvent::ApprovalRequested {
            id,
            channel: channel.into(),
            name: name.into(),
            args: args.clone(),
        });
        let decided = tokio::time::timeout(self.config.approval_timeout, rx).await;
        if let Ok(mut a) = self.approvals.lock() {
            a.remove(&id);
        }
        // No answer in time counts as a denial.
        matches!(decided, Ok(Ok(true)))
    }
}

fn today() -> String {
    let days = now_ms() / 86_400_000;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn encode_content(parts: &[Content]) -> Value {
    Value::Array(
        parts
            .iter()
            .map(|c| match c {
                Content::Text(t) => json!({ "type": "text", "text": t }),
                Content::ToolUse { id, name, input } => json!({ "type": "tool_use", "id": id, "name": name, "input": input }),
                Content::ToolResult { id, content, is_error } => {
                    json!({ "type": "tool_result", "id": id, "content": content, "is_error": is_error })
                }
            })
            .collect(),
    )
}

fn decode_message(role: &str, content: &str) -> Option<Message> {
    let role = match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return None,
    };
    let parts: Vec<Value> = serde_json::from_str(content).ok()?;
    let content = parts
        .into_iter()
        .filter_map(|p| match p["type"].as_str()? {
            "text" => Some(Content::Text(p["text"].as_str()?.to_string())),
            "tool_use" => Some(Content::ToolUse {
                id: p["id"].as_str()?.to_string(),
                name: p["name"].as_str()?.to_string(),
                input: p["input"].clone(),
            }),
            "tool_result" => Some(Content::ToolResult {
                id: p["id"].as_str()?.to_string(),
                content: p["content"].as_str()?.to_string(),
                is_error: p["is_error"].as_bool().unwrap_or(false),
            }),
            _ => None,
        })
        .collect();
    Some(Message { role, content })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_long_output_with_its_size() {
        let long = "x".repeat(MAX_TOOL_OUTPUT + 5);
        let capped = cap_output(long);
        assert!(capped.ends_with(&format!(
            "[output truncated: {} characters in all, first {MAX_TOOL_OUTPUT} shown]",
            MAX_TOOL_OUTPUT + 5
        )));
        assert_eq!(cap_output("short".into()), "short");
        assert_eq!(today().len(), 10);
    }
}
