//! The Telegram channel: the owner talks to the agent from a phone through a bot, over
//! the Bot API with long polling (no public endpoint at home), and hears the hub's
//! notifications there.
//!
//! - [`wire`]: the Bot API's JSON as serde types;
//! - [`client`]: the Bot API client (the token only ever in the request URL);
//! - [`store`]: the allowed chats and the channel's state in `hub.db`;
//! - [`format`]: Markdown to Telegram's HTML, and splitting at 4,096 characters;
//! - `poller`: the `getUpdates` loop (offset kept in `hub.db`, back-off, flood control,
//!   a refused token stops it);
//! - `updates`: what a message does (the allow-list, commands, starting a turn);
//! - `turn`: a turn's events as Telegram messages (one message edited as text streams);
//! - `approvals`: approval buttons and the answers to them;
//! - `deliver`: notifications to the chats that take them;
//! - [`cli`]: `hearth-hub telegram …`.
//!
//! [`Telegram`] is the hub's service: one supervisor task that follows the token (in the
//! [`SecretStore`](crate::secrets::SecretStore), scope `channel`, name `telegram`) and
//! the `enabled` switch — re-read when `hub.db` changes (`PRAGMA data_version`, every
//! second) or at once when the API nudges it — and runs one poller while both say so.
//! Turns run in the [`ChatService`] like every front end's; their consumers (the tasks
//! that turn events into messages) live in a `JoinSet` of this service, ended at
//! shutdown.
//!
//! Architecture Invariant: only allow-listed chats are served. A message or button from
//! any other chat gets no answer (a button press is acknowledged with no text, as
//! Telegram requires) and is logged with the chat's id and name. The list is read from
//! `hub.db` for every update, so a chat taken off it is refused from its next message.
//! The token never leaves the secret store except into the request URL.

pub mod cli;
pub mod client;
pub mod format;
pub mod store;
pub mod wire;

mod approvals;
mod deliver;
mod poller;
mod turn;
mod updates;

#[cfg(test)]
mod tests;

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use hearth_sync::DocId;
use tokio::{
    sync::{mpsc, watch},
    task::{JoinHandle, JoinSet},
};

pub use client::{BotApi, BotError};
pub use store::{AllowedChat, ChannelStore, Refused, StoreError};

use crate::{
    chat::ChatService,
    notify::Notifier,
    secrets::{SecretError, SecretValue},
};

/// The secret store's slot of the bot token.
pub const TOKEN_SCOPE: &str = "channel";
/// See [`TOKEN_SCOPE`].
pub const TOKEN_NAME: &str = "telegram";

/// How often `hub.db` is checked for a changed token, switch or list.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// How long the turns' consumers get at shutdown to send their last messages.
const TURNS_GRACE: Duration = Duration::from_secs(3);

/// Why a channel operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelegramError {
    /// The channel's rows.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Bot API.
    #[error(transparent)]
    Bot(#[from] BotError),
    /// The secret store.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// A blocking task failed.
    #[error("Telegram channel task failed: {0}")]
    Task(String),
}

/// What the channel is doing now (kept in memory; the stored state backs it up).
#[derive(Debug, Clone, Default)]
struct Live {
    running: bool,
    bot_username: Option<String>,
    error: Option<String>,
}

/// A chat's turn in progress.
#[derive(Debug, Clone)]
struct ActiveTurn {
    project: DocId,
    conversation: String,
}

/// What the poller, the consumers and the notifications share.
struct Shared {
    store: Arc<ChannelStore>,
    chat: Arc<ChatService>,
    api_base: String,
    live: Mutex<Live>,
    /// The running poller's client (for notifications); `None` while not polling.
    bot: Mutex<Option<Arc<BotApi>>>,
    /// The turns' consumers; `None` once shutting down.
    turns: Mutex<Option<JoinSet<()>>>,
    /// Each chat's turn in progress.
    active: Mutex<HashMap<i64, ActiveTurn>>,
}

impl Shared {
    /// Runs `f` on the channel's rows off the async threads.
    async fn db<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&ChannelStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, TelegramError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| TelegramError::Task(e.to_string()))?
            .map_err(Into::into)
    }

    fn live(&self, change: impl FnOnce(&mut Live)) {
        if let Ok(mut l) = self.live.lock() {
            change(&mut l);
        }
    }

    fn bot(&self) -> Option<Arc<BotApi>> {
        self.bot.lock().ok().and_then(|b| b.clone())
    }

    fn set_bot(&self, bot: Option<Arc<BotApi>>) {
        if let Ok(mut b) = self.bot.lock() {
            *b = bot;
        }
    }

    /// The project a chat works in.
    fn project_of(&self, chat: &AllowedChat) -> DocId {
        chat.project.unwrap_or(self.chat.general)
    }

    /// Whether `project` is `root` or below it in the project tree.
    async fn within(&self, root: DocId, project: DocId) -> bool {
        if root == project {
            return true;
        }
        let store = self.chat.store.clone();
        tokio::task::spawn_blocking(move || store.scope_blocking(root))
            .await
            .ok()
            .and_then(Result::ok)
            .is_some_and(|scope| scope.contains_project(&project))
    }

    /// A project's name, if it still exists.
    async fn project_name(&self, project: DocId) -> Option<String> {
        project_names(&self.chat.store).await.remove(&project)
    }
}

/// Every live project's name, by id.
pub async fn project_names(store: &hearth_sync::DocumentStore) -> HashMap<DocId, String> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || crate::projects::all_projects_blocking(&store))
        .await
        .ok()
        .and_then(Result::ok)
        .map(|all| all.into_iter().map(|p| (p.id, p.title)).collect())
        .unwrap_or_default()
}

/// Asks Telegram who the bot of `token` is (`getMe`): how a token is checked before
/// it is stored.
pub async fn verify_token(api_base: &str, token: &str) -> Result<wire::User, BotError> {
    BotApi::new(api_base, SecretValue::new(token))?
        .get_me()
        .await
}

/// The channel as the API and the CLI show it.
#[derive(Debug, Clone)]
pub struct Status {
    /// A token is stored.
    pub token_set: bool,
    /// The owner's switch.
    pub enabled: bool,
    /// The poller is running with a token Telegram accepted.
    pub running: bool,
    /// The bot's `@username` (as last seen).
    pub bot_username: Option<String>,
    /// What is wrong, if anything (a refused token, Telegram out of reach).
    pub error: Option<String>,
    /// The allowed chats.
    pub chats: Vec<AllowedChat>,
    /// The chats lately refused, newest first.
    pub refused: Vec<Refused>,
}

/// The hub's Telegram service.
pub struct Telegram {
    shared: Arc<Shared>,
    nudges: mpsc::Sender<()>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telegram").finish_non_exhaustive()
    }
}

impl Telegram {
    /// Starts the service over `hub_db` with the Bot API at `api_base`, and registers it
    /// with `notifier`. It polls only while a token is stored and the channel is enabled;
    /// it follows both from then on.
    pub fn start(
        api_base: &str,
        hub_db: &Path,
        chat: Arc<ChatService>,
        notifier: &Notifier,
    ) -> Result<Arc<Self>, TelegramError> {
        let store = Arc::new(ChannelStore::open(hub_db)?);
        // A connection of its own, so commits by every other (the API's, the CLI's, the
        // poller's) move its `data_version`.
        let watcher = ChannelStore::open(hub_db)?;
        let shared = Arc::new(Shared {
            store,
            chat,
            api_base: api_base.trim_end_matches('/').to_string(),
            live: Mutex::new(Live::default()),
            bot: Mutex::new(None),
            turns: Mutex::new(Some(JoinSet::new())),
            active: Mutex::new(HashMap::new()),
        });
        notifier.add_channel(Arc::new(deliver::Notifications(shared.clone())));
        let (nudges, nudged) = mpsc::channel(1);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(supervise(shared.clone(), watcher, nudged, stopped));
        Ok(Arc::new(Self {
            shared,
            nudges,
            stop,
            task: Mutex::new(Some(task)),
        }))
    }

    /// The channel's rows (blocking calls).
    pub fn store(&self) -> &Arc<ChannelStore> {
        &self.shared.store
    }

    /// The Bot API's base URL.
    pub fn api_base(&self) -> &str {
        &self.shared.api_base
    }

    /// Re-reads the token and the switch now rather than within the second.
    pub fn nudge(&self) {
        let _ = self.nudges.try_send(());
    }

    /// Checks `token` with Telegram, stores it, and starts polling with it; the bot's
    /// `@username`. A token Telegram refuses is not stored.
    pub async fn set_token(&self, token: &str) -> Result<Option<String>, TelegramError> {
        let me = verify_token(&self.shared.api_base, token).await?;
        let chat = self.shared.chat.clone();
        let value = SecretValue::new(token);
        tokio::task::spawn_blocking(move || {
            chat.secrets.set(TOKEN_SCOPE, TOKEN_NAME, &value)?;
            // Logs and the agent's outputs hide it from now on.
            chat.refresh_redactor();
            Ok::<_, SecretError>(())
        })
        .await
        .map_err(|e| TelegramError::Task(e.to_string()))??;
        self.nudge();
        Ok(me.username)
    }

    /// Turns the channel on or off.
    pub async fn set_enabled(&self, enabled: bool) -> Result<(), TelegramError> {
        self.shared.db(move |s| s.set_enabled(enabled)).await?;
        self.nudge();
        Ok(())
    }

    /// What the channel is doing, with its chats.
    pub async fn status(&self) -> Result<Status, TelegramError> {
        let secrets = self.shared.chat.secrets.clone();
        let token_set = tokio::task::spawn_blocking(move || secrets.names(TOKEN_SCOPE))
            .await
            .map_err(|e| TelegramError::Task(e.to_string()))??
            .iter()
            .any(|n| n == TOKEN_NAME);
        let (state, chats) = self.shared.db(|s| Ok((s.state()?, s.chats()?))).await?;
        let live = self
            .shared
            .live
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        Ok(Status {
            token_set,
            enabled: state.enabled,
            running: live.running,
            bot_username: live.bot_username.or(state.poll.bot_username),
            error: live.error.or(state.poll.error),
            chats,
            refused: state.poll.refused,
        })
    }

    /// Stops taking updates: the poller ends (an update not yet confirmed stays with
    /// Telegram for the next start). Called before the chat service stops its turns,
    /// so no message is taken that could not be answered.
    pub fn stop_intake(&self) {
        let _ = self.stop.send(true);
    }

    /// Ends the service: the supervisor and its poller, then the turns' consumers (their
    /// turns already stopped by the chat service: they get a moment to send their last
    /// edit, then are aborted).
    pub async fn shutdown(&self) {
        self.stop_intake();
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
        let turns = self.shared.turns.lock().ok().and_then(|mut t| t.take());
        if let Some(mut turns) = turns {
            let drained = tokio::time::timeout(TURNS_GRACE, async {
                while turns.join_next().await.is_some() {}
            })
            .await;
            if drained.is_err() {
                tracing::warn!(
                    left = turns.len(),
                    "Telegram replies did not finish in time; dropping them"
                );
            }
            turns.shutdown().await;
        }
    }
}

/// The poller the supervisor runs, and the token it runs with.
struct Current {
    token: SecretValue,
    stop: watch::Sender<bool>,
    /// `None` when the token could not even make a client.
    task: Option<JoinHandle<()>>,
}

impl Current {
    async fn stop(self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}

/// Follows the token and the switch; runs one poller while both allow it.
async fn supervise(
    shared: Arc<Shared>,
    watcher: ChannelStore,
    mut nudged: mpsc::Receiver<()>,
    mut stopped: watch::Receiver<bool>,
) {
    let watcher = Arc::new(watcher);
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen: Option<i64> = None;
    let mut current: Option<Current> = None;
    loop {
        // `Some(nudged)`: look again (nudged by the owner's API call, or hub.db moved).
        let check = tokio::select! {
            _ = stopped.changed() => break,
            n = nudged.recv() => match n {
                Some(()) => Some(true),
                None => break,
            },
            _ = tick.tick() => {
                let w = watcher.clone();
                match tokio::task::spawn_blocking(move || w.data_version()).await {
                    Ok(Ok(v)) if seen == Some(v) => None,
                    Ok(Ok(v)) => {
                        seen = Some(v);
                        Some(false)
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "cannot check the Telegram settings");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "Telegram settings check failed");
                        None
                    }
                }
            }
        };
        if let Some(nudged) = check {
            current = reconcile(&shared, current, nudged).await;
        }
    }
    if let Some(c) = current {
        c.stop().await;
    }
    shared.set_bot(None);
    shared.live(|l| l.running = false);
}

/// Starts, stops or restarts the poller to match the stored token and switch. A poller
/// that ended (its token refused) starts again only when the owner acts (`nudged`: the
/// token stored again, the channel switched), never on its own.
async fn reconcile(
    shared: &Arc<Shared>,
    current: Option<Current>,
    nudged: bool,
) -> Option<Current> {
    let secrets = shared.chat.secrets.clone();
    let store = shared.store.clone();
    let read = tokio::task::spawn_blocking(move || {
        let token = secrets.get(TOKEN_SCOPE, TOKEN_NAME)?;
        let enabled = store.state()?.enabled;
        Ok::<_, TelegramError>(token.filter(|_| enabled))
    })
    .await;
    let wanted = match read {
        Ok(Ok(w)) => w,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read the Telegram settings");
            return current;
        }
        Err(e) => {
            tracing::warn!(error = %e, "Telegram settings read failed");
            return current;
        }
    };
    let same = match (&current, &wanted) {
        (Some(c), Some(t)) => {
            let ended = c.task.as_ref().is_none_or(JoinHandle::is_finished);
            c.token.expose() == t.expose() && !(nudged && ended)
        }
        (None, None) => true,
        _ => false,
    };
    if same {
        return current;
    }
    if let Some(c) = current {
        c.stop().await;
        tracing::info!("Telegram polling stopped");
    }
    shared.set_bot(None);
    let Some(token) = wanted else {
        shared.live(|l| *l = Live::default());
        return None;
    };
    // A token stored by the CLI: logs hide it from now on.
    let chat = shared.chat.clone();
    let _ = tokio::task::spawn_blocking(move || chat.refresh_redactor()).await;
    let (stop, stopped) = watch::channel(false);
    let task = match BotApi::new(&shared.api_base, token.clone()) {
        Ok(bot) => Some(tokio::spawn(poller::run(
            shared.clone(),
            Arc::new(bot),
            stopped,
        ))),
        Err(e) => {
            tracing::warn!(error = %e, "the stored Telegram token is unusable");
            shared.live(|l| {
                l.running = false;
                l.error = Some(e.to_string());
            });
            None
        }
    };
    Some(Current { token, stop, task })
}
