//! Hub settings: the one place configuration is read. Two kinds, each with one home:
//!
//! - **Process settings** (data directory, addresses and ports, relay, mDNS, the HTTP
//!   host allowlist, provider URLs, the Telegram Bot API's URL) are read once at start, here: embedded defaults, then
//!   the file `$HEARTH_HOME/hub.json` ([`SETTINGS_FILE`], optional), then `HEARTH_*`
//!   environment variables, then flags (clap reads those two; see [`ProcessArgs`]).
//! - **Runtime settings** (the chat, summary and embedding models, the agent's
//!   instructions, the approval timeout) live in `hub.db` ([`RuntimeStore`]) and change
//!   through the API while the hub runs. A flag or variable for one of them only seeds
//!   the first start; after that the database wins.
//!
//! Nothing else in the hub reads the environment or these files.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use hearth_net::{NetSettings, RelaySetting};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Deserialize;

use crate::{agent::provider::ModelRef, chat::ProviderUrls};

/// The optional settings file in the data directory.
pub const SETTINGS_FILE: &str = "hub.json";

/// Why settings could not be read or changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The settings file is unreadable or malformed.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A value is invalid.
    #[error("{0}")]
    Invalid(String),
    /// `hub.db` could not be opened.
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// The database failed.
    #[error("settings storage: {0}")]
    Db(#[from] rusqlite::Error),
}

/// Everything the hub needs to start.
#[derive(Debug, Clone)]
pub struct HubSettings {
    /// Data directory: store, identity key, allowlist.
    pub home: PathBuf,
    /// iroh endpoint settings.
    pub net: NetSettings,
    /// HTTP API address; `None` disables it.
    pub http: Option<SocketAddr>,
    /// Host names (with or without a port) besides the loopback names that requests may
    /// address the API by, e.g. the name of a TLS proxy in front of it.
    pub http_hosts: Vec<String>,
    /// Serve the web UI from this directory instead of the compiled-in files.
    pub ui_dir: Option<PathBuf>,
    /// Advertise the hub on the LAN over mDNS.
    pub mdns: bool,
    /// Display name shown to devices.
    pub name: String,
    /// Accept pairing requests only with a pair ticket's secret.
    pub pair_require_ticket: bool,
    /// Where the model providers live.
    pub provider_urls: ProviderUrls,
    /// The Telegram Bot API's base URL (the bot token is appended per request).
    pub telegram_api: String,
    /// Runtime settings to store on the first start (the database wins afterwards).
    pub seeds: RuntimeSeeds,
    /// The `hearth/sync/N` versions served (normally `hearth_protocol::SYNC_VERSIONS`;
    /// tests inject others to play a hub of another release).
    pub sync_versions: Vec<u16>,
    /// The `hearth/pair/N` versions served (normally `hearth_protocol::PAIR_VERSIONS`).
    pub pair_versions: Vec<u16>,
}

impl HubSettings {
    /// Settings for `home` with every default (HTTP on 127.0.0.1:4200).
    pub fn defaults(home: PathBuf) -> Self {
        Self {
            home,
            net: NetSettings {
                bind: SocketAddr::from(([0, 0, 0, 0], 7447)),
                relay: RelaySetting::Disabled,
            },
            http: Some(SocketAddr::from(([127, 0, 0, 1], 4200))),
            http_hosts: Vec::new(),
            ui_dir: None,
            mdns: true,
            name: "hearth".into(),
            pair_require_ticket: false,
            provider_urls: ProviderUrls::default(),
            telegram_api: "https://api.telegram.org".into(),
            seeds: RuntimeSeeds::default(),
            sync_versions: hearth_protocol::SYNC_VERSIONS.to_vec(),
            pair_versions: hearth_protocol::PAIR_VERSIONS.to_vec(),
        }
    }
}

/// The default data directory: `~/.hearth` (`$HEARTH_HOME` is read by the CLI).
pub fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".hearth"),
        None => PathBuf::from(".hearth"),
    }
}

/// Process settings as flags and `HEARTH_*` variables (a flag wins over its variable,
/// which wins over `hub.json`, which wins over the default).
#[derive(Debug, Default, Clone, clap::Args)]
pub struct ProcessArgs {
    /// UDP address of the iroh endpoint [default: 0.0.0.0:7447].
    #[arg(long, env = "HEARTH_BIND")]
    pub bind: Option<SocketAddr>,
    /// Relays: `off`, `default` (public relays) or the URL of your own iroh-relay
    /// [default: off].
    #[arg(long, env = "HEARTH_RELAY")]
    pub relay: Option<RelaySetting>,
    /// HTTP API address, or `off` [default: 127.0.0.1:4200]. An address beyond loopback
    /// also needs --http-allow-remote.
    #[arg(long, env = "HEARTH_HTTP")]
    pub http: Option<String>,
    /// Allow the HTTP API on an address beyond loopback. It must then sit behind a TLS
    /// proxy: the API speaks plain HTTP.
    #[arg(long, env = "HEARTH_HTTP_ALLOW_REMOTE")]
    pub http_allow_remote: bool,
    /// Another host name requests may address the API by (besides localhost, 127.0.0.1
    /// and [::1] with the API's port), e.g. your TLS proxy's; repeat or comma-separate.
    #[arg(long = "http-host", env = "HEARTH_HTTP_HOSTS", value_delimiter = ',')]
    pub http_hosts: Vec<String>,
    /// Serve the web UI from this directory instead of the compiled-in files (for
    /// working on the UI without rebuilding).
    #[arg(long, env = "HEARTH_UI_DIR", hide = true)]
    pub ui_dir: Option<PathBuf>,
    /// Advertise the hub on the LAN over mDNS: `on` or `off` [default: on].
    #[arg(long, env = "HEARTH_MDNS")]
    pub mdns: Option<String>,
    /// The hub's display name [default: hearth].
    #[arg(long, env = "HEARTH_NAME")]
    pub name: Option<String>,
    /// Pair only devices that present a pair ticket (`hearth-hub ticket`).
    #[arg(long, env = "HEARTH_PAIR_REQUIRE_TICKET")]
    pub pair_require_ticket: bool,
    /// Anthropic's base URL [default: https://api.anthropic.com].
    #[arg(long, env = "HEARTH_ANTHROPIC_URL")]
    pub anthropic_url: Option<String>,
    /// OpenAI's base URL [default: https://api.openai.com/v1].
    #[arg(long, env = "HEARTH_OPENAI_URL")]
    pub openai_url: Option<String>,
    /// An OpenAI-compatible local server (Ollama, llama.cpp, vLLM)
    /// [default: http://127.0.0.1:11434/v1].
    #[arg(long, env = "HEARTH_OLLAMA_URL")]
    pub ollama_url: Option<String>,
    /// The Telegram Bot API's base URL [default: https://api.telegram.org].
    #[arg(long, env = "HEARTH_TELEGRAM_API")]
    pub telegram_api: Option<String>,
    /// First start only (then change it through the API): the chat model,
    /// `provider:model` (anthropic, openai or ollama) [default: anthropic:claude-sonnet-4-5].
    #[arg(long, env = "HEARTH_CHAT_MODEL")]
    pub chat_model: Option<ModelRef>,
    /// First start only: the model for rolling summaries (same provider as the chat
    /// model) [default: the chat model].
    #[arg(long, env = "HEARTH_SUMMARY_MODEL")]
    pub summary_model: Option<ModelRef>,
    /// First start only: the embedding model (an OpenAI-compatible provider: openai or
    /// ollama) [default: ollama:nomic-embed-text].
    #[arg(long, env = "HEARTH_EMBEDDING_MODEL")]
    pub embedding_model: Option<ModelRef>,
    /// First start only: how long a risky tool call waits for the owner, in seconds
    /// [default: 300].
    #[arg(long, env = "HEARTH_APPROVAL_TIMEOUT")]
    pub approval_timeout: Option<u64>,
    /// Test hook: the `hearth/sync/N` versions to serve instead of this build's own
    /// (comma-separated), to play a hub of another release.
    #[arg(long, env = "HEARTH_SYNC_VERSIONS", value_delimiter = ',', hide = true)]
    pub sync_versions: Vec<u16>,
    /// Test hook: the `hearth/pair/N` versions to serve instead of this build's own
    /// (comma-separated), to play a hub of another release.
    #[arg(long, env = "HEARTH_PAIR_VERSIONS", value_delimiter = ',', hide = true)]
    pub pair_versions: Vec<u16>,
}

/// `hub.json`: the process settings, every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    bind: Option<SocketAddr>,
    relay: Option<String>,
    http: Option<String>,
    http_allow_remote: Option<bool>,
    http_hosts: Option<Vec<String>>,
    mdns: Option<bool>,
    name: Option<String>,
    pair_require_ticket: Option<bool>,
    anthropic_url: Option<String>,
    openai_url: Option<String>,
    ollama_url: Option<String>,
    telegram_api: Option<String>,
}

fn read_file(home: &Path) -> Result<FileSettings, SettingsError> {
    let path = home.join(SETTINGS_FILE);
    let err = |reason: String| SettingsError::File {
        path: path.clone(),
        reason,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| err(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileSettings::default()),
        Err(e) => Err(err(e.to_string())),
    }
}

fn parse_http(value: &str) -> Result<Option<SocketAddr>, SettingsError> {
    match value {
        "off" => Ok(None),
        addr => addr.parse().map(Some).map_err(|_| {
            SettingsError::Invalid(format!("http {addr:?} is not an address or `off`"))
        }),
    }
}

/// Resolves the process settings for `home`: defaults, then `hub.json`, then the
/// variables and flags in `args`. Refuses an HTTP address beyond loopback unless
/// `http_allow_remote` is set anywhere.
pub fn load(home: PathBuf, args: ProcessArgs) -> Result<HubSettings, SettingsError> {
    let file = read_file(&home)?;
    let mut s = HubSettings::defaults(home);
    if let Some(bind) = args.bind.or(file.bind) {
        s.net.bind = bind;
    }
    match (args.relay, file.relay) {
        (Some(r), _) => s.net.relay = r,
        (None, Some(r)) => {
            s.net.relay = r.parse().map_err(|_| {
                SettingsError::Invalid(format!("relay {r:?}: use off, default or a URL"))
            })?
        }
        (None, None) => {}
    }
    if let Some(http) = args.http.as_deref().or(file.http.as_deref()) {
        s.http = parse_http(http)?;
    }
    let allow_remote = args.http_allow_remote || file.http_allow_remote.unwrap_or(false);
    if let Some(addr) = s.http.filter(|a| !a.ip().is_loopback()) {
        if !allow_remote {
            return Err(SettingsError::Invalid(format!(
                "the HTTP API would listen on {addr}, beyond loopback: pass --http-allow-remote \
                 (HEARTH_HTTP_ALLOW_REMOTE=true) to mean it, and put a TLS proxy in front of it; \
                 people on other machines are better served through their paired node"
            )));
        }
    }
    s.http_hosts = if args.http_hosts.is_empty() {
        file.http_hosts.unwrap_or_default()
    } else {
        args.http_hosts
    };
    s.ui_dir = args.ui_dir;
    s.http_hosts = s
        .http_hosts
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    match args.mdns.as_deref() {
        Some("on" | "true" | "1") => s.mdns = true,
        Some("off" | "false" | "0") => s.mdns = false,
        Some(other) => {
            return Err(SettingsError::Invalid(format!(
                "mdns {other:?}: use on or off"
            )))
        }
        None => s.mdns = file.mdns.unwrap_or(s.mdns),
    }
    if let Some(name) = args.name.or(file.name) {
        s.name = name;
    }
    s.pair_require_ticket = args.pair_require_ticket || file.pair_require_ticket.unwrap_or(false);
    if let Some(u) = args.anthropic_url.or(file.anthropic_url) {
        s.provider_urls.anthropic = u;
    }
    if let Some(u) = args.openai_url.or(file.openai_url) {
        s.provider_urls.openai = u;
    }
    if let Some(u) = args.ollama_url.or(file.ollama_url) {
        s.provider_urls.ollama = u;
    }
    if let Some(u) = args.telegram_api.or(file.telegram_api) {
        s.telegram_api = u.trim_end_matches('/').to_string();
    }
    s.seeds = RuntimeSeeds {
        chat_model: args.chat_model,
        summary_model: args.summary_model,
        embedding_model: args.embedding_model,
        instructions: None,
        approval_timeout_secs: args.approval_timeout,
    };
    if !args.sync_versions.is_empty() {
        s.sync_versions = args.sync_versions;
    }
    if !args.pair_versions.is_empty() {
        s.pair_versions = args.pair_versions;
    }
    Ok(s)
}

/// What the hub says at start, in plain words, about reaching it away from home: whether
/// paired laptops can reach it from anywhere, through which relay, and how to change that.
pub fn away_from_home_notice(relay: &RelaySetting) -> String {
    const PRIVACY: &str = "a relay sees only addresses and keys, never content";
    match relay {
        RelaySetting::Disabled => format!(
            "Away from home: off. Laptops reach this hub only on the same network. To let them \
             reach it from anywhere, start the hub with `--relay default` (iroh's public relays) \
             or `--relay <URL of your own iroh-relay>`; {PRIVACY}."
        ),
        RelaySetting::Default => format!(
            "Away from home: on, through iroh's public relays. Paired laptops reach this hub \
             from anywhere through them, and move to a direct path when there is one; {PRIVACY}. \
             Laptops paired before learn the relay when they run `hearth pair` again. \
             `--relay off` keeps the hub reachable only on the same network."
        ),
        RelaySetting::Custom(url) => format!(
            "Away from home: on, through your relay {url}. Paired laptops reach this hub from \
             anywhere through it, and move to a direct path when there is one; {PRIVACY}. \
             Laptops paired before learn the relay when they run `hearth pair` again. \
             `--relay off` keeps the hub reachable only on the same network."
        ),
    }
}

/// Runtime settings: kept in `hub.db`, changed through the API while the hub runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// The agent's chat model.
    pub chat_model: ModelRef,
    /// The model for rolling summaries; the chat model when `None`.
    pub summary_model: Option<ModelRef>,
    /// The embedding model (OpenAI-compatible provider), for semantic search.
    pub embedding_model: ModelRef,
    /// The agent's own instructions.
    pub instructions: String,
    /// How long a risky tool call waits for the owner.
    pub approval_timeout_secs: u64,
    /// The hub's time zone (IANA name): schedules without their own, date-only due
    /// dates, quiet hours.
    pub timezone: String,
    /// When notifications come without sound, in the hub's zone.
    pub quiet_hours: Option<QuietHours>,
}

/// A daily stretch of quiet, `start` to `end` (`HH:MM`, in the hub's zone); it may span
/// midnight (`22:00` to `07:00`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuietHours {
    /// When quiet begins.
    pub start: String,
    /// When it ends.
    pub end: String,
}

impl QuietHours {
    /// Minutes after midnight of an `HH:MM` time.
    fn minutes(s: &str) -> Option<u32> {
        let (h, m) = s.split_once(':')?;
        if h.len() != 2 || m.len() != 2 {
            return None;
        }
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        (h < 24 && m < 60).then_some(h * 60 + m)
    }

    /// Checks both times.
    pub fn validate(&self) -> Result<(), SettingsError> {
        for t in [&self.start, &self.end] {
            if Self::minutes(t).is_none() {
                return Err(SettingsError::Invalid(format!(
                    "quiet hours take HH:MM times (22:00), not {t:?}"
                )));
            }
        }
        Ok(())
    }

    /// Whether `minute` (after midnight, local) falls in the quiet stretch.
    pub fn contains(&self, minute: u32) -> bool {
        match (Self::minutes(&self.start), Self::minutes(&self.end)) {
            (Some(a), Some(b)) if a <= b => (a..b).contains(&minute),
            (Some(a), Some(b)) => minute >= a || minute < b,
            _ => false,
        }
    }
}

/// The machine's own time zone, or `UTC` when it cannot be read or is unknown.
pub fn system_timezone() -> String {
    iana_time_zone::get_timezone()
        .ok()
        .filter(|z| z.parse::<chrono_tz::Tz>().is_ok())
        .unwrap_or_else(|| "UTC".into())
}

impl RuntimeSettings {
    /// The hub's zone (valid: checked whenever it is stored).
    pub fn tz(&self) -> chrono_tz::Tz {
        self.timezone.parse().unwrap_or(chrono_tz::Tz::UTC)
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        let agent = crate::agent::runner::AgentConfig::default();
        Self {
            chat_model: ModelRef {
                provider: "anthropic".into(),
                model: "claude-sonnet-4-5".into(),
            },
            summary_model: None,
            embedding_model: ModelRef {
                provider: "ollama".into(),
                model: "nomic-embed-text".into(),
            },
            instructions: agent.instructions,
            approval_timeout_secs: agent.approval_timeout.as_secs(),
            timezone: system_timezone(),
            quiet_hours: None,
        }
    }
}

impl RuntimeSettings {
    /// Checks that the values fit together.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if !crate::chat::PROVIDERS.contains(&self.chat_model.provider.as_str()) {
            return Err(SettingsError::Invalid(format!(
                "unknown provider {:?}: use anthropic, openai or ollama",
                self.chat_model.provider
            )));
        }
        if self.embedding_model.provider == "anthropic"
            || !crate::chat::PROVIDERS.contains(&self.embedding_model.provider.as_str())
        {
            return Err(SettingsError::Invalid(
                "the embedding model needs an OpenAI-compatible provider (openai or ollama)".into(),
            ));
        }
        if let Some(m) = &self.summary_model {
            if m.provider != self.chat_model.provider {
                return Err(SettingsError::Invalid(format!(
                    "the summary model {m} must use the chat model's provider ({})",
                    self.chat_model.provider
                )));
            }
        }
        if !(1..=86_400).contains(&self.approval_timeout_secs) {
            return Err(SettingsError::Invalid(
                "the approval timeout is 1 to 86400 seconds".into(),
            ));
        }
        if self.timezone.parse::<chrono_tz::Tz>().is_err() {
            return Err(SettingsError::Invalid(format!(
                "unknown time zone {:?}: use an IANA name such as Europe/Paris",
                self.timezone
            )));
        }
        if let Some(q) = &self.quiet_hours {
            q.validate()?;
        }
        if self.instructions.chars().count() > 100_000 {
            return Err(SettingsError::Invalid(
                "the instructions are at most 100,000 characters".into(),
            ));
        }
        Ok(())
    }

    /// The approval timeout as a duration.
    pub fn approval_timeout(&self) -> Duration {
        Duration::from_secs(self.approval_timeout_secs)
    }
}

/// Values from flags that seed the runtime settings on the first start only.
#[derive(Debug, Clone, Default)]
pub struct RuntimeSeeds {
    /// Chat model.
    pub chat_model: Option<ModelRef>,
    /// Summary model.
    pub summary_model: Option<ModelRef>,
    /// Embedding model.
    pub embedding_model: Option<ModelRef>,
    /// The agent's instructions.
    pub instructions: Option<String>,
    /// Approval timeout, seconds.
    pub approval_timeout_secs: Option<u64>,
}

/// A change to the runtime settings; absent fields stay. `summary_model: Some(None)`
/// clears it (the chat model summarises).
#[derive(Debug, Clone, Default)]
pub struct RuntimePatch {
    /// Chat model.
    pub chat_model: Option<ModelRef>,
    /// Summary model.
    pub summary_model: Option<Option<ModelRef>>,
    /// Embedding model.
    pub embedding_model: Option<ModelRef>,
    /// Instructions.
    pub instructions: Option<String>,
    /// Approval timeout, seconds.
    pub approval_timeout_secs: Option<u64>,
    /// Time zone.
    pub timezone: Option<String>,
    /// Quiet hours (`Some(None)` turns them off).
    pub quiet_hours: Option<Option<QuietHours>>,
}

const CHAT_MODEL: &str = "chat_model";
const SUMMARY_MODEL: &str = "summary_model";
const EMBEDDING_MODEL: &str = "embedding_model";
const INSTRUCTIONS: &str = "instructions";
const APPROVAL_TIMEOUT: &str = "approval_timeout_secs";
const TIMEZONE: &str = "timezone";
const QUIET_HOURS: &str = "quiet_hours";

use crate::hubdb::now_ms;

/// The runtime settings in `hub.db` (table `settings`).
#[derive(Debug)]
pub struct RuntimeStore {
    conn: Mutex<Connection>,
}

impl RuntimeStore {
    /// Opens them in `hub_db`.
    pub fn open(hub_db: &Path) -> Result<Self, SettingsError> {
        Ok(Self {
            conn: Mutex::new(crate::hubdb::open(hub_db, crate::hubdb::Durability::Full)?),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores each seeded value that is not stored yet; an invalid combination is
    /// refused before anything is written.
    pub fn seed(&self, seeds: &RuntimeSeeds) -> Result<RuntimeSettings, SettingsError> {
        let mut wanted = self.load()?;
        let stored = |key: &str| -> Result<bool, SettingsError> {
            Ok(self
                .lock()
                .query_row("SELECT 1 FROM settings WHERE key = ?1", [key], |_| Ok(()))
                .optional()?
                .is_some())
        };
        let mut writes: Vec<(&str, String)> = Vec::new();
        if let Some(m) = seeds
            .chat_model
            .as_ref()
            .filter(|_| !stored(CHAT_MODEL).unwrap_or(true))
        {
            wanted.chat_model = m.clone();
            writes.push((CHAT_MODEL, m.to_string()));
        }
        if let Some(m) = seeds
            .summary_model
            .as_ref()
            .filter(|_| !stored(SUMMARY_MODEL).unwrap_or(true))
        {
            wanted.summary_model = Some(m.clone());
            writes.push((SUMMARY_MODEL, m.to_string()));
        }
        if let Some(m) = seeds
            .embedding_model
            .as_ref()
            .filter(|_| !stored(EMBEDDING_MODEL).unwrap_or(true))
        {
            wanted.embedding_model = m.clone();
            writes.push((EMBEDDING_MODEL, m.to_string()));
        }
        if let Some(i) = seeds
            .instructions
            .as_ref()
            .filter(|_| !stored(INSTRUCTIONS).unwrap_or(true))
        {
            wanted.instructions = i.clone();
            writes.push((INSTRUCTIONS, i.clone()));
        }
        if let Some(t) = seeds
            .approval_timeout_secs
            .filter(|_| !stored(APPROVAL_TIMEOUT).unwrap_or(true))
        {
            wanted.approval_timeout_secs = t;
            writes.push((APPROVAL_TIMEOUT, t.to_string()));
        }
        wanted.validate()?;
        let conn = self.lock();
        for (key, value) in writes {
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO NOTHING",
                params![key, value, now_ms()],
            )?;
        }
        drop(conn);
        self.load()
    }

    /// The settings in force: stored values over the defaults.
    pub fn load(&self) -> Result<RuntimeSettings, SettingsError> {
        let rows: Vec<(String, String)> = {
            let conn = self.lock();
            let mut stmt = conn.prepare("SELECT key, value FROM settings")?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            rows
        };
        let mut s = RuntimeSettings::default();
        let model = |v: &str| {
            v.parse::<ModelRef>()
                .map_err(|e| SettingsError::Invalid(format!("stored model: {e}")))
        };
        for (key, value) in rows {
            match key.as_str() {
                CHAT_MODEL => s.chat_model = model(&value)?,
                SUMMARY_MODEL if value.is_empty() => s.summary_model = None,
                SUMMARY_MODEL => s.summary_model = Some(model(&value)?),
                EMBEDDING_MODEL => s.embedding_model = model(&value)?,
                INSTRUCTIONS => s.instructions = value,
                APPROVAL_TIMEOUT => {
                    s.approval_timeout_secs = value.parse().map_err(|_| {
                        SettingsError::Invalid(format!("stored approval timeout {value:?}"))
                    })?
                }
                TIMEZONE => s.timezone = value,
                QUIET_HOURS if value.is_empty() => s.quiet_hours = None,
                QUIET_HOURS => {
                    s.quiet_hours = Some(serde_json::from_str(&value).map_err(|_| {
                        SettingsError::Invalid(format!("stored quiet hours {value:?}"))
                    })?)
                }
                _ => {}
            }
        }
        Ok(s)
    }

    /// Applies `patch` (checked as a whole first) and returns the settings now in force.
    pub fn update(&self, patch: RuntimePatch) -> Result<RuntimeSettings, SettingsError> {
        let mut s = self.load()?;
        let mut writes: Vec<(&str, String)> = Vec::new();
        if let Some(m) = patch.chat_model {
            writes.push((CHAT_MODEL, m.to_string()));
            s.chat_model = m;
        }
        if let Some(m) = patch.summary_model {
            writes.push((
                SUMMARY_MODEL,
                m.as_ref().map(ToString::to_string).unwrap_or_default(),
            ));
            s.summary_model = m;
        }
        if let Some(m) = patch.embedding_model {
            writes.push((EMBEDDING_MODEL, m.to_string()));
            s.embedding_model = m;
        }
        if let Some(i) = patch.instructions {
            writes.push((INSTRUCTIONS, i.clone()));
            s.instructions = i;
        }
        if let Some(t) = patch.approval_timeout_secs {
            writes.push((APPROVAL_TIMEOUT, t.to_string()));
            s.approval_timeout_secs = t;
        }
        if let Some(z) = patch.timezone {
            writes.push((TIMEZONE, z.clone()));
            s.timezone = z;
        }
        if let Some(q) = patch.quiet_hours {
            writes.push((
                QUIET_HOURS,
                q.as_ref()
                    .and_then(|q| serde_json::to_string(q).ok())
                    .unwrap_or_default(),
            ));
            s.quiet_hours = q;
        }
        s.validate()?;
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        for (key, value) in writes {
            tx.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                params![key, value, now_ms()],
            )?;
        }
        tx.commit()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_hours_may_span_midnight_and_a_zone_must_exist() {
        let night = QuietHours {
            start: "22:00".into(),
            end: "07:00".into(),
        };
        assert!(night.contains(23 * 60) && night.contains(0) && night.contains(6 * 60 + 59));
        assert!(!night.contains(7 * 60) && !night.contains(12 * 60));
        let lunch = QuietHours {
            start: "12:00".into(),
            end: "13:30".into(),
        };
        assert!(lunch.contains(12 * 60 + 5) && !lunch.contains(13 * 60 + 30));
        let bad = QuietHours {
            start: "25:00".into(),
            end: "7".into(),
        };
        assert!(bad.validate().is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let store = RuntimeStore::open(&dir.path().join("hub.db")).expect("open");
        let e = store
            .update(RuntimePatch {
                timezone: Some("Mars/Olympus".into()),
                ..Default::default()
            })
            .expect_err("unknown zone");
        assert!(e.to_string().contains("Mars/Olympus"), "{e}");
        let s = store
            .update(RuntimePatch {
                timezone: Some("Europe/Paris".into()),
                quiet_hours: Some(Some(night.clone())),
                ..Default::default()
            })
            .expect("set");
        assert_eq!(s.tz(), chrono_tz::Europe::Paris);
        let again = store.load().expect("load");
        assert_eq!(
            (again.timezone.as_str(), again.quiet_hours),
            ("Europe/Paris", Some(night))
        );
        let off = store
            .update(RuntimePatch {
                quiet_hours: Some(None),
                ..Default::default()
            })
            .expect("off");
        assert_eq!(off.quiet_hours, None);
    }

    #[test]
    fn file_then_variables_and_flags_and_loopback_by_default() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = load(dir.path().into(), ProcessArgs::default()).expect("defaults");
        assert_eq!(s.http, Some("127.0.0.1:4200".parse().expect("addr")));
        assert!(s.mdns);
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            r#"{"name": "from-file", "mdns": false, "http": "127.0.0.1:4300"}"#,
        )
        .expect("write");
        let s = load(dir.path().into(), ProcessArgs::default()).expect("file");
        assert_eq!((s.name.as_str(), s.mdns), ("from-file", false));
        assert_eq!(s.http, Some("127.0.0.1:4300".parse().expect("addr")));
        let args = ProcessArgs {
            name: Some("from-flag".into()),
            mdns: Some("on".into()),
            ..Default::default()
        };
        let s = load(dir.path().into(), args).expect("flags");
        assert_eq!((s.name.as_str(), s.mdns), ("from-flag", true));
        // Beyond loopback only on purpose.
        let remote = ProcessArgs {
            http: Some("0.0.0.0:4200".into()),
            ..Default::default()
        };
        let e = load(dir.path().into(), remote.clone()).expect_err("refused");
        assert!(e.to_string().contains("--http-allow-remote"), "{e}");
        let s = load(
            dir.path().into(),
            ProcessArgs {
                http_allow_remote: true,
                ..remote
            },
        )
        .expect("allowed");
        assert_eq!(s.http, Some("0.0.0.0:4200".parse().expect("addr")));
        std::fs::write(dir.path().join(SETTINGS_FILE), r#"{"nmae": "typo"}"#).expect("write");
        assert!(load(dir.path().into(), ProcessArgs::default()).is_err());
    }

    #[test]
    fn the_away_from_home_notice_says_whether_laptops_reach_the_hub_and_how_to_change_it() {
        let off = away_from_home_notice(&RelaySetting::Disabled);
        assert!(off.contains("only on the same network"), "{off}");
        assert!(
            off.contains("--relay default") && off.contains("--relay <URL"),
            "{off}"
        );
        let mine: RelaySetting = "https://relay.example.org".parse().expect("url");
        let on = away_from_home_notice(&mine);
        assert!(
            on.contains("through your relay https://relay.example.org"),
            "{on}"
        );
        assert!(
            on.contains("from anywhere") && on.contains("never content"),
            "{on}"
        );
        assert!(on.contains("--relay off"), "{on}");
        let public = away_from_home_notice(&RelaySetting::Default);
        assert!(public.contains("iroh's public relays") && public.contains("from anywhere"));
        // The relay comes from hub.json too, and the pairing version hook like the sync one.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            r#"{"relay": "http://10.0.0.1:3340"}"#,
        )
        .expect("write");
        let args = ProcessArgs {
            pair_versions: vec![1],
            ..Default::default()
        };
        let s = load(dir.path().into(), args).expect("file");
        assert_eq!(s.net.relay.to_string(), "http://10.0.0.1:3340/");
        assert_eq!(s.pair_versions, [1]);
    }

    #[test]
    fn runtime_settings_are_seeded_once_and_changed_in_the_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = RuntimeStore::open(&dir.path().join("hub.db")).expect("open");
        let seeds = RuntimeSeeds {
            chat_model: Some("openai:gpt-4o".parse().expect("model")),
            ..Default::default()
        };
        let s = store.seed(&seeds).expect("seed");
        assert_eq!(s.chat_model.to_string(), "openai:gpt-4o");
        let s = store
            .update(RuntimePatch {
                instructions: Some("Be brief.".into()),
                chat_model: Some("ollama:llama3.2".parse().expect("model")),
                ..Default::default()
            })
            .expect("update");
        assert_eq!(s.instructions, "Be brief.");
        // A later start with another flag value does not override the database.
        let s = store.seed(&seeds).expect("seed again");
        assert_eq!(s.chat_model.to_string(), "ollama:llama3.2");
        // An invalid combination changes nothing.
        let e = store
            .update(RuntimePatch {
                summary_model: Some(Some("anthropic:claude".parse().expect("model"))),
                ..Default::default()
            })
            .expect_err("mismatched providers");
        assert!(e.to_string().contains("chat model's provider"), "{e}");
        assert_eq!(store.load().expect("load").summary_model, None);
    }
}
