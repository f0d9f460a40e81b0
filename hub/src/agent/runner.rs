//! The agent loop: one invocation per user message, scoped to a project.
//!
//! [`Agent::invoke`] stores the user message, assembles the system prompt (agent and
//! project instructions, context: date, model, project, permitted tools), streams the
//! model's turn, runs the tool calls it makes (asking the owner first for risky ones),
//! feeds the results back, and repeats until the model stops or the step limit is hit.
//! Events go to every subscriber. A conversation is (project, name): its history and
//! summary are its own, never another project's. Invocations are serialised per
//! conversation and run concurrently across conversations; [`Agent::abort`] cancels a
//! conversation's running invocation by bumping its generation and resolves its waiting
//! approvals as stopped. Approval ids are random and bound to the conversation that
//! asked; the first decision wins and later ones see it resolved. The transcript is stored when the turn completes or is
//! aborted (tool calls still in flight are dropped; tool output over 100,000 characters
//! is capped with a note of its size). Every tool run is appended to the audit log.
//!
//! Tools come from the [`ToolRegistry`] (system tools and every plugin's, one table) and
//! are gated here, the same way for all: per-project permissions decide what is offered
//! and whether a call asks; a call whose risk is raised by its arguments asks; and once
//! a turn has read untrusted text (a tool whose output may carry someone else's words,
//! in this turn or earlier in the conversation), a guarded tool — files, commands,
//! fetches — asks whatever the project or a schedule allows.
//!
//! Everything that leaves the agent (events, approvals, audit rows, stored messages, tool
//! arguments and results) passes the [`Redactor`] first. The agent knows no HTTP.

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use hearth_sync::{DocId, DocumentStore, Project};
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot};

use crate::secrets::{Redactor, SecretStore};

use super::{
    provider::{
        ChatRequest, Content, Message, ProviderClient, ProviderError, Role, StreamEvent, ToolSpec,
    },
    registry::{ToolDescriptor, ToolRegistry, ToolSource},
    tools::{self, Risk, ToolContext},
};

/// Tool output longer than this is cut, with a note of its full size.
pub const MAX_TOOL_OUTPUT: usize = 100_000;

/// What subscribers see.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// An invocation began (it holds its conversation: events up to its `Finished`
    /// are its own).
    Started {
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
        channel: String,
        /// What the user said.
        message: String,
    },
    /// Model text.
    TextDelta {
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
        channel: String,
        /// Text.
        text: String,
    },
    /// The model's try failed mid-stream and is retried: drop the partial text.
    Restart {
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
        channel: String,
    },
    /// A tool is about to run.
    ToolCall {
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
        channel: String,
        /// Tool name.
        name: String,
        /// Arguments.
        args: Value,
    },
    /// A tool finished.
    ToolResult {
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
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
        /// Approval id for [`Agent::decide`] (random, unguessable).
        id: String,
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
        channel: String,
        /// Tool name.
        name: String,
        /// Arguments.
        args: Value,
    },
    /// An approval request was resolved (by an answer, the timeout or a stop).
    ApprovalResolved {
        /// Approval id.
        id: String,
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
        channel: String,
        /// `approved`, `denied`, `timed_out` or `stopped`.
        resolution: Resolution,
    },
    /// The invocation ended.
    Finished {
        /// Project of the conversation.
        project: DocId,
        /// Conversation.
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
    /// Where project directories live (`<dir>/<project id>`).
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
    /// Tokens used by every model call of the invocation.
    pub usage: super::provider::Usage,
}

/// A conversation: a project and a name within it (`cli`, `web`, …).
type ConvKey = (DocId, String);

/// The owner's choice for one tool in one project (`tool_permissions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolPermission {
    /// Offered at all.
    pub allowed: bool,
    /// `Some(true)`: every call waits for the owner; `Some(false)`: no call does, even a
    /// risky one ("risky unless allowed for the project"); `None`: risky calls do.
    pub ask: Option<bool>,
}

impl ToolPermission {
    /// Offered; risky calls ask.
    pub const ALLOW: Self = Self {
        allowed: true,
        ask: None,
    };
    /// Offered, and no call asks, even a risky one (but a guarded tool still does after
    /// untrusted text in the same turn).
    pub const TRUST: Self = Self {
        allowed: true,
        ask: Some(false),
    };
    /// Offered, and every call waits for the owner.
    pub const ASK: Self = Self {
        allowed: true,
        ask: Some(true),
    };
    /// Not offered.
    pub const FORBID: Self = Self {
        allowed: false,
        ask: None,
    };
}

/// When a permitted tool's calls wait for the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalRule {
    /// Every call (the owner chose "ask first").
    Always,
    /// A call whose risk is [`Risk::Risky`] (no explicit choice for this project).
    IfRisky,
    /// None: the owner allowed it in this project. A guarded tool still asks after
    /// untrusted text in the same turn.
    Never,
}

/// A tool offered in a project, with when its calls ask.
#[derive(Debug, Clone)]
pub struct PermittedTool {
    /// The tool.
    pub tool: Arc<ToolDescriptor>,
    /// When its calls wait for the owner.
    pub approval: ApprovalRule,
}

impl PermittedTool {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.tool.name
    }

    /// Whether a call with `args` needs the owner's approval, `tainted` being whether
    /// the turn has read untrusted text. Only a tool whose risk depends on the call
    /// reads the store for it, off the async threads.
    async fn needs_approval(&self, ctx: &ToolContext, args: &Value, tainted: bool) -> bool {
        if tainted && self.tool.effect.is_guarded() {
            return true;
        }
        match (self.approval, self.tool.risk, self.tool.risk_of_call) {
            (ApprovalRule::Always, ..) => true,
            (ApprovalRule::Never, ..) => false,
            (ApprovalRule::IfRisky, Risk::Risky, _) => true,
            (ApprovalRule::IfRisky, Risk::Safe, None) => false,
            (ApprovalRule::IfRisky, Risk::Safe, Some(risk_of)) => {
                let (ctx, args) = (ctx.clone(), args.clone());
                // A call whose risk cannot be read asks.
                tokio::task::spawn_blocking(move || risk_of(&ctx, &args))
                    .await
                    .map_or(true, |r| r == Risk::Risky)
            }
        }
    }
}

/// How an approval request was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The owner allowed the call.
    Approved,
    /// The owner denied it.
    Denied,
    /// Nobody answered within the owner's timeout (counts as denied).
    TimedOut,
    /// The turn was stopped (counts as denied).
    Stopped,
}

impl Resolution {
    /// `approved`, `denied`, `timed_out` or `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Resolution::Approved => "approved",
            Resolution::Denied => "denied",
            Resolution::TimedOut => "timed_out",
            Resolution::Stopped => "stopped",
        }
    }
}

/// What [`Agent::decide`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// This answer decided the request.
    Now,
    /// It had already been resolved (another screen answered first, it timed out, or
    /// the turn stopped): this answer changed nothing.
    Already(Resolution),
    /// No such approval (or it belongs to another conversation).
    Unknown,
}

/// An approval request, as the owner's screens list it.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    /// Its id.
    pub id: String,
    /// The conversation's project.
    pub project: DocId,
    /// The conversation.
    pub conversation: String,
    /// Tool name.
    pub tool: String,
    /// Arguments (redacted).
    pub args: Value,
    /// When it was asked, ms.
    pub asked_at: i64,
    /// `None` while it waits.
    pub resolution: Option<Resolution>,
}

struct ApprovalSlot {
    info: Approval,
    tx: Option<oneshot::Sender<Resolution>>,
}

/// Called with every event (redacted) as it is emitted, before subscribers see it: the
/// hub's numbered event stream hangs here, so its order is the agent's order.
pub type EventSink = Arc<dyn Fn(&AgentEvent) + Send + Sync>;

/// Resolved approvals kept so that late answers see the outcome.
const KEEP_RESOLVED: usize = 256;

/// The hub's agent.
pub struct Agent {
    store: DocumentStore,
    provider: Mutex<ProviderClient>,
    config: Mutex<AgentConfig>,
    tools: Arc<ToolRegistry>,
    secrets: Mutex<Option<Arc<SecretStore>>>,
    updates: Arc<tools::UpdateLog>,
    db: Mutex<Connection>,
    events: broadcast::Sender<AgentEvent>,
    conversations: Mutex<HashMap<ConvKey, Arc<tokio::sync::Mutex<()>>>>,
    generations: Mutex<HashMap<ConvKey, u64>>,
    /// Woken whenever a generation moves, so a model call in flight stops at once.
    generation_moved: tokio::sync::Notify,
    approvals: Mutex<Vec<ApprovalSlot>>,
    redactor: Mutex<Redactor>,
    closing: AtomicBool,
    sink: Mutex<Option<EventSink>>,
}

/// Who started an invocation, which decides how risky tools are approved.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// The owner, chatting: risky tools ask and wait.
    Interactive,
    /// A scheduled run nobody watches: a call that needs approval runs unasked only if
    /// its tool is listed here, else it asks and waits; a guarded tool (files,
    /// commands, fetches) after untrusted text in the turn always asks.
    Scheduled {
        /// Risky tools the owner allowed this schedule to run without asking.
        auto_approve: Vec<String>,
        /// How long a call that asks waits for the owner: as long as the schedule
        /// allows, not the few minutes of an interactive turn.
        approval_timeout: Duration,
    },
}

/// How one invocation runs, beyond its message: who started it and, optionally, a
/// model other than the configured chat model.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Who started it.
    pub trigger: Trigger,
    /// The model to use instead of the configured one.
    pub model: Option<ModelChoice>,
    /// The message itself may carry someone else's words (a task's agent job: its
    /// name and notes replicate from any device that holds the project), so the turn
    /// starts tainted: guarded tools ask whatever the project or schedule allows.
    pub untrusted_message: bool,
}

impl RunOptions {
    /// The owner chatting, with the configured model.
    pub fn interactive() -> Self {
        Self {
            trigger: Trigger::Interactive,
            model: None,
            untrusted_message: false,
        }
    }
}

/// A model for one invocation, with the client of its provider.
#[derive(Debug, Clone)]
pub struct ModelChoice {
    /// The provider's model id.
    pub model: String,
    /// The client that reaches it.
    pub provider: ProviderClient,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").finish_non_exhaustive()
    }
}

use crate::hubdb::now_ms;

/// A random approval id: 128 bits, hex.
fn approval_id() -> Result<String, AgentError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| AgentError::Invalid(format!("no randomness: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
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

impl AgentEvent {
    /// The project of the conversation the event belongs to.
    pub fn project(&self) -> DocId {
        match self {
            AgentEvent::Started { project, .. }
            | AgentEvent::TextDelta { project, .. }
            | AgentEvent::Restart { project, .. }
            | AgentEvent::ToolCall { project, .. }
            | AgentEvent::ToolResult { project, .. }
            | AgentEvent::ApprovalRequested { project, .. }
            | AgentEvent::ApprovalResolved { project, .. }
            | AgentEvent::Finished { project, .. } => *project,
        }
    }

    /// The conversation the event belongs to.
    pub fn conversation(&self) -> &str {
        match self {
            AgentEvent::Started { channel, .. }
            | AgentEvent::TextDelta { channel, .. }
            | AgentEvent::Restart { channel, .. }
            | AgentEvent::ToolCall { channel, .. }
            | AgentEvent::ToolResult { channel, .. }
            | AgentEvent::ApprovalRequested { channel, .. }
            | AgentEvent::ApprovalResolved { channel, .. }
            | AgentEvent::Finished { channel, .. } => channel,
        }
    }

    /// The event with every string redacted.
    fn redacted(self, r: &Redactor) -> Self {
        match self {
            AgentEvent::Started {
                project,
                channel,
                message,
            } => AgentEvent::Started {
                project,
                channel,
                message: r.redact(&message),
            },
            AgentEvent::TextDelta {
                project,
                channel,
                text,
            } => AgentEvent::TextDelta {
                project,
                channel,
                text: r.redact(&text),
            },
            AgentEvent::ToolCall {
                project,
                channel,
                name,
                args,
            } => AgentEvent::ToolCall {
                project,
                channel,
                name,
                args: r.redact_json(&args),
            },
            AgentEvent::ToolResult {
                project,
                channel,
                name,
                output,
                is_error,
            } => AgentEvent::ToolResult {
                project,
                channel,
                name,
                output: r.redact(&output),
                is_error,
            },
            AgentEvent::ApprovalRequested {
                id,
                project,
                channel,
                name,
                args,
            } => AgentEvent::ApprovalRequested {
                id,
                project,
                channel,
                name,
                args: r.redact_json(&args),
            },
            AgentEvent::Finished {
                project,
                channel,
                reason,
            } => AgentEvent::Finished {
                project,
                channel,
                reason: r.redact(&reason),
            },
            other => other,
        }
    }
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
        let (events, _) = broadcast::channel(4096);
        let updates = Arc::new(tools::UpdateLog::open(db)?);
        Ok(Self {
            store,
            provider: Mutex::new(provider),
            config: Mutex::new(config),
            tools: Arc::new(ToolRegistry::with_system()),
            secrets: Mutex::new(None),
            updates,
            db: Mutex::new(conn),
            events,
            conversations: Mutex::new(HashMap::new()),
            generations: Mutex::new(HashMap::new()),
            generation_moved: tokio::sync::Notify::new(),
            approvals: Mutex::new(Vec::new()),
            redactor: Mutex::new(Redactor::default()),
            closing: AtomicBool::new(false),
            sink: Mutex::new(None),
        })
    }

    /// The tool registry: the system tools, and every plugin's once it registers.
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// The secret store tools take secrets from by name (project secrets only).
    pub fn set_secrets(&self, secrets: Arc<SecretStore>) {
        if let Ok(mut s) = self.secrets.lock() {
            *s = Some(secrets);
        }
    }

    /// What a tool running for `project` is given.
    pub fn tool_context(&self, project: DocId) -> ToolContext {
        ToolContext {
            store: self.store.clone(),
            updates: self.updates.clone(),
            project,
            project_dir: self
                .config()
                .projects_dir
                .map(|d| d.join(project.to_string())),
            secrets: self.secrets.lock().ok().and_then(|s| s.clone()),
        }
    }

    /// Replaces the model provider (a key or URL changed); the next model call uses it.
    pub fn set_provider(&self, provider: ProviderClient) {
        if let Ok(mut p) = self.provider.lock() {
            *p = provider;
        }
    }

    /// The settings now in force (a copy).
    pub fn config(&self) -> AgentConfig {
        self.config
            .lock()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Changes settings while running (models, instructions, the approval timeout);
    /// the next invocation uses them.
    pub fn update_config(&self, f: impl FnOnce(&mut AgentConfig)) {
        match self.config.lock() {
            Ok(mut c) => f(&mut c),
            Err(e) => f(&mut e.into_inner()),
        }
    }

    /// Sets the values to scrub from everything the agent emits or stores.
    pub fn set_redactor(&self, redactor: Redactor) {
        if let Ok(mut r) = self.redactor.lock() {
            *r = redactor;
        }
    }

    fn redactor(&self) -> Redactor {
        self.redactor
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    fn redact(&self, text: String) -> String {
        self.redactor().redact(&text)
    }

    fn db(&self) -> Result<std::sync::MutexGuard<'_, Connection>, AgentError> {
        self.db
            .lock()
            .map_err(|_| AgentError::Invalid("agent database lock poisoned".into()))
    }

    /// Runs a read (or a small bookkeeping write) of [`super::records`] on the agent's
    /// connection to `hub.db`. Blocking: call it off the async threads.
    pub fn records<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, AgentError> {
        Ok(f(&*self.db()?)?)
    }

    /// Daily usage rollups.
    pub fn usage(&self) -> Result<Vec<super::usage::DailyUsage>, AgentError> {
        Ok(super::usage::daily(&*self.db()?)?)
    }

    /// The conversation's rolling summary, if one was made.
    pub fn summary(&self, project: DocId, channel: &str) -> Result<Option<String>, AgentError> {
        Ok(super::memory::summary(&*self.db()?, &project.to_string(), channel)?.map(|(s, _)| s))
    }

    /// Subscribes to every conversation's events.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.events.subscribe()
    }

    /// Cancels the conversation's running invocation (it ends with reason `aborted`);
    /// its waiting approvals resolve as stopped.
    pub fn abort(&self, project: DocId, channel: &str) {
        if let Ok(mut g) = self.generations.lock() {
            *g.entry((project, channel.to_string())).or_default() += 1;
        }
        self.generation_moved.notify_waiters();
        self.resolve_waiting(|a| a.project == project && a.conversation == channel);
    }

    /// Stops every invocation for shutdown: running ones end as aborted at their next
    /// step, waiting approvals resolve as stopped, and new ones are refused.
    pub fn stop_all(&self) {
        self.closing.store(true, Ordering::SeqCst);
        if let Ok(mut g) = self.generations.lock() {
            for v in g.values_mut() {
                *v += 1;
            }
        }
        self.generation_moved.notify_waiters();
        self.resolve_waiting(|_| true);
    }

    fn resolve_waiting(&self, which: impl Fn(&Approval) -> bool) {
        if let Ok(mut slots) = self.approvals.lock() {
            for slot in slots.iter_mut() {
                if slot.info.resolution.is_none() && which(&slot.info) {
                    slot.info.resolution = Some(Resolution::Stopped);
                    if let Some(tx) = slot.tx.take() {
                        let _ = tx.send(Resolution::Stopped);
                    }
                }
            }
        }
    }

    /// Answers an approval request. The first answer wins; later ones learn how it was
    /// resolved. With `conversation`, only an approval of that conversation is decided.
    pub fn decide(&self, id: &str, conversation: Option<(DocId, &str)>, approve: bool) -> Decided {
        let Ok(mut slots) = self.approvals.lock() else {
            return Decided::Unknown;
        };
        let Some(slot) = slots.iter_mut().find(|s| {
            s.info.id == id
                && conversation.is_none_or(|(p, c)| s.info.project == p && s.info.conversation == c)
        }) else {
            return Decided::Unknown;
        };
        if let Some(done) = slot.info.resolution {
            return Decided::Already(done);
        }
        let resolution = if approve {
            Resolution::Approved
        } else {
            Resolution::Denied
        };
        slot.info.resolution = Some(resolution);
        if let Some(tx) = slot.tx.take() {
            let _ = tx.send(resolution);
        }
        Decided::Now
    }

    /// Approval requests: waiting ones and recently resolved ones, oldest first.
    pub fn approvals(&self) -> Vec<Approval> {
        self.approvals
            .lock()
            .map(|s| s.iter().map(|s| s.info.clone()).collect())
            .unwrap_or_default()
    }

    /// Completes once `key`'s generation is no longer `generation` (an abort or a stop).
    async fn moved_from(&self, key: &ConvKey, generation: u64) {
        loop {
            let moved = self.generation_moved.notified();
            tokio::pin!(moved);
            // Registered before the check, so a move between the two is not missed.
            moved.as_mut().enable();
            if self.generation(key) != generation {
                return;
            }
            moved.await;
        }
    }

    fn generation(&self, key: &ConvKey) -> u64 {
        self.generations
            .lock()
            .map(|g| g.get(key).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    fn emit(&self, ev: AgentEvent) {
        let ev = ev.redacted(&self.redactor());
        let sink = self.sink.lock().ok().and_then(|s| s.clone());
        if let Some(sink) = sink {
            sink(&ev);
        }
        let _ = self.events.send(ev);
    }

    /// Installs the hook that sees every (redacted) event first, in emission order.
    pub fn set_sink(&self, sink: EventSink) {
        if let Ok(mut s) = self.sink.lock() {
            *s = Some(sink);
        }
    }

    /// `text` with every secret value the agent knows of redacted.
    pub fn redact_text(&self, text: &str) -> String {
        self.redactor().redact(text)
    }

    fn store_message(
        &self,
        project: &DocId,
        channel: &str,
        role: &str,
        content: &Value,
    ) -> Result<(), AgentError> {
        let content = self.redactor().redact_json(content);
        self.db()?.execute(
            "INSERT INTO messages (project, conversation, role, content, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                project.to_string(),
                channel,
                role,
                content.to_string(),
                now_ms()
            ],
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
        let r = self.redactor();
        let args = r.redact_json(args).to_string();
        let outcome = r.redact(outcome);
        // The row is committed with synchronous=FULL (the WAL is fsynced) before the
        // tool's result is reported to anyone, so an action that survived a power cut is
        // never missing from the log; the connection goes back to NORMAL for messages.
        let written = self.db.lock().map(|db| {
            db.pragma_update(None, "synchronous", "FULL")?;
            let inserted = db.execute(
                "INSERT INTO audit_log (at, conversation, project, tool, args, outcome, is_error)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    now_ms(),
                    channel,
                    project.to_string(),
                    tool,
                    args,
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

    /// Appends a tool call made outside a turn (the owner calling a plugin's tool
    /// through the API) to the audit log, redacted like every other row.
    pub fn audit_direct(
        &self,
        conversation: &str,
        project: &DocId,
        tool: &str,
        args: &Value,
        outcome: &str,
        is_error: bool,
    ) {
        self.audit(conversation, project, tool, args, outcome, is_error);
    }

    /// The audit log, oldest first: (tool, outcome, is_error).
    pub fn audit_entries(&self) -> Result<Vec<(String, String, bool)>, AgentError> {
        let db = self.db()?;
        let mut stmt = db.prepare("SELECT tool, outcome, is_error FROM audit_log ORDER BY id")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The conversation's summary (if any) and the messages after it, oldest first.
    fn history(
        &self,
        project: &DocId,
        channel: &str,
    ) -> Result<(Option<String>, Vec<Message>), AgentError> {
        let rows = self.rows_after_summary(project, channel)?;
        let summary = self.summary(*project, channel)?;
        Ok((
            summary,
            rows.iter()
                .filter_map(|(_, role, content)| decode_message(role, content))
                .collect(),
        ))
    }

    fn rows_after_summary(
        &self,
        project: &DocId,
        channel: &str,
    ) -> Result<Vec<super::memory::Row>, AgentError> {
        let db = self.db()?;
        let project = project.to_string();
        let covered = super::memory::summary(&db, &project, channel)?
            .map(|(_, c)| c)
            .unwrap_or(0);
        let mut stmt = db.prepare(
            "SELECT id, role, content FROM messages
             WHERE project = ?1 AND conversation = ?2 AND id > ?3 ORDER BY id",
        )?;
        let rows = stmt
            .query_map(params![project, channel, covered], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Folds old messages into the conversation's summary when enough have accumulated.
    /// Best effort: a failure is logged, never returned.
    async fn summarize_if_due(&self, channel: &str, project: &DocId) {
        let result: Result<(), AgentError> = async {
            let rows = self.rows_after_summary(project, channel)?;
            let since = super::memory::seen_until(&*self.db()?, &project.to_string(), channel)?;
            let Some((old, covered)) = super::memory::due(&rows, since) else {
                return Ok(());
            };
            let newest = rows.last().map(|r| r.0).unwrap_or(covered);
            let previous = self.summary(*project, channel)?;
            let config = self.config();
            let req = ChatRequest {
                model: config.summary_model.clone().unwrap_or(config.model),
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
            let text = self.redact(turn.text.trim().to_string());
            super::memory::store(
                &*self.db()?,
                &project.to_string(),
                channel,
                &text,
                covered,
                newest,
                now_ms(),
            )?;
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
    /// overrides, of which the nearest wins: the project's own, else its parent's, and
    /// so on up the tree (a subproject inherits unless it overrides). A plugin bound to a
    /// project is offered only in that project's subtree. An override that allows a
    /// tool asks every call ("ask first"), none (allowed outright: even a risky call
    /// runs unasked), or, like no override, its risky calls.
    pub fn permitted(&self, project: &DocId) -> Result<Vec<PermittedTool>, AgentError> {
        let chain = self.ancestry(*project);
        let overrides: HashMap<(String, String), ToolPermission> = {
            let db = self.db()?;
            let mut stmt =
                db.prepare("SELECT project, tool, allowed, ask FROM tool_permissions")?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        (r.get(0)?, r.get(1)?),
                        ToolPermission {
                            allowed: r.get(2)?,
                            ask: r.get(3)?,
                        },
                    ))
                })?
                .collect::<Result<_, _>>()?;
            rows
        };
        let extra = self.config().extra_tools;
        Ok(self
            .tools
            .all()
            .into_iter()
            .filter(|t| t.only_in.is_none_or(|p| chain.contains(&p)))
            .filter_map(|tool| {
                let nearest = chain
                    .iter()
                    .find_map(|p| overrides.get(&(p.to_string(), tool.name.clone())));
                let approval = match nearest {
                    Some(p) if !p.allowed => return None,
                    Some(p) => match p.ask {
                        Some(true) => ApprovalRule::Always,
                        Some(false) => ApprovalRule::Never,
                        None => ApprovalRule::IfRisky,
                    },
                    None if tool.default_on || extra.iter().any(|x| *x == tool.name) => {
                        ApprovalRule::IfRisky
                    }
                    None => return None,
                };
                Some(PermittedTool { tool, approval })
            })
            .collect())
    }

    /// `project` and its ancestors, nearest first; stops at a missing project, a cycle
    /// (possible after concurrent moves on two replicas) or 64 levels.
    fn ancestry(&self, project: DocId) -> Vec<DocId> {
        let mut chain = vec![project];
        let mut cursor = project;
        while chain.len() <= 64 {
            let Some(parent) = self
                .store
                .get_blocking::<Project>(cursor)
                .ok()
                .and_then(|p| p.value.parent)
            else {
                break;
            };
            if chain.contains(&parent) {
                break;
            }
            chain.push(parent);
            cursor = parent;
        }
        chain
    }

    /// Allows (asking first or not) or forbids `tool` in `project`.
    pub fn set_permission(
        &self,
        project: &DocId,
        tool: &str,
        permission: ToolPermission,
    ) -> Result<(), AgentError> {
        let known = self.tools.get(tool).is_some() || {
            // A plugin's tool stays configurable while its server is down.
            let db = self.db()?;
            db.query_row(
                "SELECT EXISTS(SELECT 1 FROM plugin_tools WHERE name = ?1)",
                [tool],
                |r| r.get::<_, bool>(0),
            )?
        };
        if !known {
            return Err(AgentError::Invalid(format!("unknown tool {tool:?}")));
        }
        self.db()?.execute(
            "INSERT INTO tool_permissions (project, tool, allowed, ask) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(project, tool) DO UPDATE SET allowed = excluded.allowed, ask = excluded.ask",
            params![
                project.to_string(),
                tool,
                permission.allowed,
                permission.ask.filter(|_| permission.allowed)
            ],
        )?;
        Ok(())
    }

    async fn system_prompt(
        &self,
        project: DocId,
        summary: Option<&str>,
        permitted: &[PermittedTool],
        config: &AgentConfig,
    ) -> Result<(String, String), AgentError> {
        let p = self.store.get::<Project>(project).await?;
        let names: Vec<&str> = permitted.iter().map(|t| t.name()).collect();
        // Names only: a tool that takes `secrets` gets the values on the hub.
        let secret_names = {
            let secrets = self.secrets.lock().ok().and_then(|s| s.clone());
            match secrets {
                Some(s) => {
                    tokio::task::spawn_blocking(move || s.names(&format!("project:{project}")))
                        .await
                        .map_err(|e| AgentError::Invalid(e.to_string()))?
                        .unwrap_or_default()
                }
                None => Vec::new(),
            }
        };
        // Named by id: a project's name comes from documents any paired device may edit.
        let dir = config
            .projects_dir
            .as_ref()
            .map(|d| d.join(project.to_string()).display().to_string())
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
            "Project: {} (id {project}). Its instructions:\n{}\n\nDate: {}\nModel: {}\nProject directory: {dir}\nTools: {}\nSkills (read with skills_read): {}\nProject secrets (names only; pass a name to a tool's `secrets`): {}",
            p.value.name,
            if p.value.instructions.is_empty() { "(none)" } else { &p.value.instructions },
            today(),
            config.model,
            names.join(", "),
            if skills.is_empty() { "(none)".to_string() } else { skills.join(", ") },
            if secret_names.is_empty() { "(none)".to_string() } else { secret_names.join(", ") },
        );
        let dynamic = match summary {
            Some(sum) => format!("{dynamic}\n\nConversation so far (summary):\n{sum}"),
            None => dynamic,
        };
        Ok((config.instructions.clone(), dynamic))
    }

    /// Runs one invocation: `message` from the user on `channel`, in `project`.
    pub async fn invoke(
        &self,
        channel: &str,
        project: DocId,
        message: &str,
    ) -> Result<Outcome, AgentError> {
        self.invoke_with(channel, project, message, RunOptions::interactive())
            .await
    }

    /// Runs one invocation as `options` say.
    pub async fn invoke_with(
        &self,
        channel: &str,
        project: DocId,
        message: &str,
        options: RunOptions,
    ) -> Result<Outcome, AgentError> {
        let RunOptions {
            trigger,
            model,
            untrusted_message,
        } = options;
        if self.closing.load(Ordering::SeqCst) {
            return Err(AgentError::Invalid("the hub is shutting down".into()));
        }
        let key: ConvKey = (project, channel.to_string());
        let lock = {
            let mut ch = self
                .conversations
                .lock()
                .map_err(|_| AgentError::Invalid("conversation lock poisoned".into()))?;
            ch.entry(key.clone()).or_default().clone()
        };
        let _serial = lock.lock().await;
        let generation = self.generation(&key);
        self.emit(AgentEvent::Started {
            project,
            channel: channel.into(),
            message: message.into(),
        });
        let mut config = self.config();
        let chosen_provider = model.map(|m| {
            config.model = m.model;
            m.provider
        });
        let approval_timeout = match &trigger {
            Trigger::Interactive => config.approval_timeout,
            Trigger::Scheduled {
                approval_timeout, ..
            } => *approval_timeout,
        };
        let mut usage = super::provider::Usage::default();
        let user = json!([{ "type": "text", "text": message }]);
        // Stored before anything streams, so a crash never loses what the user said.
        self.store_message(&project, channel, "user", &user)?;
        // The permitted tools, read once: offered to the model, named in the prompt, checked per call.
        let permitted = self.permitted(&project)?;
        let (summary, mut messages) = self.history(&project, channel)?;
        let (system, system_dynamic) = self
            .system_prompt(project, summary.as_deref(), &permitted, &config)
            .await?;
        let specs: Vec<ToolSpec> = permitted
            .iter()
            .map(|t| ToolSpec {
                name: t.tool.name.clone(),
                description: t.tool.description.clone(),
                input_schema: t.tool.schema.clone(),
            })
            .collect();
        let offered: HashMap<String, PermittedTool> = permitted
            .iter()
            .map(|t| (t.tool.name.clone(), t.clone()))
            .collect();
        let ctx = self.tool_context(project);
        // Untrusted text already in the conversation (a note read earlier, a page
        // fetched) counts as read in this turn: the model still sees it.
        let mut tainted = untrusted_message || self.history_is_tainted(&messages);
        let mut transcript: Vec<(String, Value)> = Vec::new();
        let mut steps = 0;
        let mut last_text = String::new();
        let reason = loop {
            if self.generation(&key) != generation {
                break "aborted".to_string();
            }
            if steps >= config.max_steps {
                break "step_limit".to_string();
            }
            steps += 1;
            let req = ChatRequest {
                model: config.model.clone(),
                system: system.clone(),
                system_dynamic: system_dynamic.clone(),
                messages: messages.clone(),
                tools: specs.clone(),
                max_tokens: config.max_tokens,
            };
            let ch = channel.to_string();
            let provider = match &chosen_provider {
                Some(p) => p.clone(),
                None => self
                    .provider
                    .lock()
                    .map(|p| p.clone())
                    .map_err(|_| AgentError::Invalid("provider lock poisoned".into()))?,
            };
            let streamed = provider.stream(&req, |ev| match ev {
                StreamEvent::TextDelta(text) => self.emit(AgentEvent::TextDelta {
                    project,
                    channel: ch.clone(),
                    text,
                }),
                StreamEvent::Restart { .. } => self.emit(AgentEvent::Restart {
                    project,
                    channel: ch.clone(),
                }),
                StreamEvent::ToolCall(_) => {}
            });
            // Stop ends the model's answer where it is: the request is dropped, and the
            // provider stops generating (and billing) it.
            let turn = tokio::select! {
                turn = streamed => turn,
                _ = self.moved_from(&key, generation) => break "aborted".to_string(),
            };
            let turn = match turn {
                Ok(t) => t,
                Err(e) => {
                    self.emit(AgentEvent::Finished {
                        project,
                        channel: channel.into(),
                        reason: format!("error: {e}"),
                    });
                    self.save_transcript(&project, channel, &transcript)?;
                    return Err(e.into());
                }
            };
            self.record_usage(&config.model, &project, &turn.usage);
            usage.input_tokens += turn.usage.input_tokens;
            usage.output_tokens += turn.usage.output_tokens;
            usage.cache_read_tokens += turn.usage.cache_read_tokens;
            usage.cache_write_tokens += turn.usage.cache_write_tokens;
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
                if self.generation(&key) != generation {
                    break;
                }
                self.emit(AgentEvent::ToolCall {
                    project,
                    channel: channel.into(),
                    name: c.name.clone(),
                    args: c.input.clone(),
                });
                let (output, is_error) = match offered.get(&c.name) {
                    None => (
                        format!("tool {} is not permitted in this project", c.name),
                        true,
                    ),
                    Some(tool) => {
                        let needs = tool.needs_approval(&ctx, &c.input, tainted).await;
                        let guarded = tainted && tool.tool.effect.is_guarded();
                        let approved = match (&trigger, needs) {
                            (_, false) => Resolution::Approved,
                            (Trigger::Scheduled { auto_approve, .. }, true)
                                if !guarded && auto_approve.contains(&c.name) =>
                            {
                                Resolution::Approved
                            }
                            (_, true) => self.ask(&key, &c.name, &c.input, approval_timeout).await,
                        };
                        match approved {
                            Resolution::Approved => {
                                let ran = tool.tool.handler.call(ctx.clone(), c.input.clone());
                                // A document tool is quick and finishes; a plugin's (a
                                // command, a fetch, an MCP call) is dropped at Stop.
                                let ran = if tool.tool.source == ToolSource::System {
                                    Some(ran.await)
                                } else {
                                    tokio::select! {
                                        ran = ran => Some(ran),
                                        _ = self.moved_from(&key, generation) => None,
                                    }
                                };
                                match ran {
                                    Some(Ok(v)) => {
                                        tainted |= tool.tool.reads_untrusted;
                                        let text = match v {
                                            Value::String(s) => s,
                                            other => other.to_string(),
                                        };
                                        (cap_output(self.redact(text)), false)
                                    }
                                    Some(Err(e)) => {
                                        // An error can quote what the tool read (a
                                        // plugin's message, a page's status text).
                                        tainted |= tool.tool.reads_untrusted;
                                        (self.redact(e.to_string()), true)
                                    }
                                    None => (
                                        "the turn was stopped while the tool ran".to_string(),
                                        true,
                                    ),
                                }
                            }
                            Resolution::Denied => {
                                ("the owner denied this tool call".to_string(), true)
                            }
                            Resolution::TimedOut => (
                                "the owner did not answer in time: the tool call was not run"
                                    .to_string(),
                                true,
                            ),
                            Resolution::Stopped => (
                                "the turn was stopped: the tool call was not run".to_string(),
                                true,
                            ),
                        }
                    }
                };
                self.audit(channel, &project, &c.name, &c.input, &output, is_error);
                self.emit(AgentEvent::ToolResult {
                    project,
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
        self.save_transcript(&project, channel, &transcript)?;
        self.summarize_if_due(channel, &project).await;
        self.emit(AgentEvent::Finished {
            project,
            channel: channel.into(),
            reason: reason.clone(),
        });
        Ok(Outcome {
            text: last_text,
            reason,
            steps,
            usage,
        })
    }

    /// Whether `messages` hold a result of a tool whose output may carry someone
    /// else's words (or of a tool no longer registered: assume it did).
    fn history_is_tainted(&self, messages: &[Message]) -> bool {
        messages
            .iter()
            .flat_map(|m| m.content.iter())
            .any(|c| match c {
                Content::ToolUse { name, .. } => {
                    self.tools.get(name).is_none_or(|t| t.reads_untrusted)
                }
                _ => false,
            })
    }

    fn save_transcript(
        &self,
        project: &DocId,
        channel: &str,
        transcript: &[(String, Value)],
    ) -> Result<(), AgentError> {
        for (role, content) in transcript {
            self.store_message(project, channel, role, content)?;
        }
        Ok(())
    }

    /// Asks the owner about a risky call and waits for the first answer, the turn's stop,
    /// or `timeout`.
    async fn ask(&self, key: &ConvKey, name: &str, args: &Value, timeout: Duration) -> Resolution {
        let id = match approval_id() {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(error = %e, "cannot make an approval id; denying");
                return Resolution::Denied;
            }
        };
        let (tx, rx) = oneshot::channel();
        let args = self.redactor().redact_json(args);
        if let Ok(mut slots) = self.approvals.lock() {
            // Forget the oldest resolved requests beyond the ones kept for late answers.
            let resolved = slots.iter().filter(|s| s.info.resolution.is_some()).count();
            let mut extra = resolved.saturating_sub(KEEP_RESOLVED);
            slots.retain(|s| {
                let drop = extra > 0 && s.info.resolution.is_some();
                if drop {
                    extra -= 1;
                }
                !drop
            });
            slots.push(ApprovalSlot {
                info: Approval {
                    id: id.clone(),
                    project: key.0,
                    conversation: key.1.clone(),
                    tool: name.to_string(),
                    args: args.clone(),
                    asked_at: now_ms(),
                    resolution: None,
                },
                tx: Some(tx),
            });
        }
        self.emit(AgentEvent::ApprovalRequested {
            id: id.clone(),
            project: key.0,
            channel: key.1.clone(),
            name: name.into(),
            args,
        });
        let decided = tokio::time::timeout(timeout, rx).await;
        let resolution = match decided {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Resolution::Stopped,
            Err(_) => Resolution::TimedOut,
        };
        let resolution = match self.approvals.lock() {
            Ok(mut slots) => match slots.iter_mut().find(|s| s.info.id == id) {
                // A decision that raced the timeout: the recorded one stands.
                Some(slot) => match slot.info.resolution {
                    Some(r) => r,
                    None => {
                        slot.info.resolution = Some(resolution);
                        slot.tx = None;
                        resolution
                    }
                },
                None => resolution,
            },
            Err(_) => resolution,
        };
        self.emit(AgentEvent::ApprovalResolved {
            id,
            project: key.0,
            channel: key.1.clone(),
            resolution,
        });
        resolution
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
