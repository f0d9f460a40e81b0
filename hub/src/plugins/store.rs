//! [`PluginStore`]: the plugins the owner installed, in `hub.db` (tables `plugins` and
//! `plugin_tools`, created by `hubdb`'s migration 9). The database is the truth: the API
//! and `hearth-hub plugins …` write here, whether or not the hub runs, and the running
//! hub's supervisor reconciles its servers with what it reads.
//!
//! A plugin has a name (`^[a-z0-9][a-z0-9-]{0,31}$`), an enabled flag, the environment
//! variables it declared ([`EnvBinding`]), its MCP servers ([`ServerSpec`]), free-form
//! settings and an optional bound project. `plugin_tools` caches the tools each server
//! last listed, so permissions and the CLI know them while a server is down.
//!
//! This module never starts a process and never reads a secret's value: a secret binding
//! names a key in the bound project's secrets, resolved only when a server is spawned.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
};

use hearth_sync::DocId;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The built-in computer plugin (files, terminal, web), created enabled at first start.
pub const COMPUTER: &str = "computer";
/// A tool call's default timeout.
pub const DEFAULT_CALL_TIMEOUT_SECS: u64 = 30;
/// The longest tool-call timeout a server may set.
pub const MAX_CALL_TIMEOUT_SECS: u64 = 3600;

/// Why a plugin operation failed. Every variant's text is meant for the owner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The database failed.
    #[error("plugin database: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` cannot be used (e.g. it is from a newer release).
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// No plugin has this name.
    #[error("no plugin {0:?}")]
    NotFound(String),
    /// The name is taken.
    #[error("a plugin named {0:?} exists already")]
    Exists(String),
    /// The built-in plugin cannot be removed or given servers.
    #[error("{0:?} is built in: it can be disabled, not removed or given servers")]
    Builtin(String),
    /// The plugin has no such tool (or it is not running).
    #[error("plugin {plugin:?} has no tool {tool:?} (is it enabled and running?)")]
    NoTool {
        /// The plugin.
        plugin: String,
        /// The tool as asked.
        tool: String,
    },
    /// A stored row could not be read back.
    #[error("plugin {name:?} is stored unreadably ({what}): {reason}")]
    Corrupt {
        /// The plugin.
        name: String,
        /// Which column.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
}

/// Where a declared variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvSource {
    /// The hub's own environment, read when the server is spawned.
    Hub,
    /// This literal value.
    Value(String),
    /// This key of the bound project's secrets, read when the server is spawned; never
    /// shown (the API shows the key only).
    Secret(String),
}

/// A variable (or, for a remote server, an HTTP header) a plugin declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvBinding {
    /// The variable's (or header's) name.
    pub name: String,
    /// Where its value comes from.
    pub source: EnvSource,
}

/// Whether a stdio server is confined (see `sandbox`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Sandboxed where this system can (Linux with bubblewrap).
    #[default]
    Auto,
    /// Never sandboxed.
    Off,
}

/// How the hub reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "lowercase")]
pub enum Transport {
    /// A program the hub spawns, speaking MCP on its standard input and output.
    Stdio {
        /// The program (a name looked up on `PATH`, or a path).
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Where it starts (absolute); default: the bound project's directory, else the
        /// plugin's own directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
    },
    /// A remote server over streamable HTTP.
    Http {
        /// Its endpoint (`http` or `https`).
        url: String,
        /// Headers sent with every request (e.g. `Authorization` from a secret).
        #[serde(default)]
        headers: Vec<EnvBinding>,
    },
}

/// One MCP server of a plugin. (Its transport is flattened in, so unknown fields cannot
/// be refused here: serde does not combine the two.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSpec {
    /// Its name within the plugin (`^[a-z0-9][a-z0-9-]{0,31}$`).
    pub name: String,
    /// How it is reached.
    #[serde(flatten)]
    pub transport: Transport,
    /// Whether a stdio server is sandboxed.
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Seconds a tool call may take before it fails with a timeout.
    #[serde(default = "default_timeout")]
    pub call_timeout_secs: u64,
}

fn default_timeout() -> u64 {
    DEFAULT_CALL_TIMEOUT_SECS
}

/// A stored plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    /// Its name.
    pub name: String,
    /// Built in (the computer plugin): never removed.
    pub builtin: bool,
    /// Whether its servers run and its tools are offered.
    pub enabled: bool,
    /// The variables its servers receive (nothing else of the hub's environment).
    pub env: Vec<EnvBinding>,
    /// Its MCP servers.
    pub servers: Vec<ServerSpec>,
    /// Free-form settings.
    pub settings: Map<String, Value>,
    /// The project it is bound to (its tools are offered only there), or none.
    pub project: Option<DocId>,
    /// When it was added (ms since the epoch).
    pub created_at: i64,
    /// When it last changed (ms since the epoch).
    pub updated_at: i64,
}

/// A plugin to add.
#[derive(Debug, Clone, Default)]
pub struct NewPlugin {
    /// Its name.
    pub name: String,
    /// Enabled at once.
    pub enabled: bool,
    /// Declared variables.
    pub env: Vec<EnvBinding>,
    /// Its servers (at least one).
    pub servers: Vec<ServerSpec>,
    /// Settings.
    pub settings: Map<String, Value>,
    /// Bound project.
    pub project: Option<DocId>,
}

/// A change to a plugin; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct PluginPatch {
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// New declared variables.
    pub env: Option<Vec<EnvBinding>>,
    /// New settings.
    pub settings: Option<Map<String, Value>>,
    /// New bound project (`Some(None)`: none).
    pub project: Option<Option<DocId>>,
    /// New servers.
    pub servers: Option<Vec<ServerSpec>>,
}

/// A tool a server last listed, as registered (`{plugin}_{tool}`).
#[derive(Debug, Clone, PartialEq)]
pub struct CachedTool {
    /// The plugin.
    pub plugin: String,
    /// The server that listed it.
    pub server: String,
    /// The registered name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its argument schema.
    pub schema: Value,
    /// Whether calls wait for approval (unless allowed for the project).
    pub risky: bool,
    /// When it was listed (ms since the epoch).
    pub discovered_at: i64,
}

/// Whether `name` is a valid plugin or server name: `^[a-z0-9][a-z0-9-]{0,31}$`.
pub fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && name.len() <= 32
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'a'..=b'z' | b'_'))
        && name.len() <= 128
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn check_bindings(
    bindings: &[EnvBinding],
    what: &str,
    valid: impl Fn(&str) -> bool,
    project: Option<DocId>,
) -> Result<(), PluginError> {
    let mut seen = std::collections::BTreeSet::new();
    for b in bindings {
        if !valid(&b.name) {
            return Err(PluginError::Invalid(format!(
                "{what} name {:?} is not valid",
                b.name
            )));
        }
        if !seen.insert(b.name.to_ascii_lowercase()) {
            return Err(PluginError::Invalid(format!(
                "{what} {:?} is declared twice",
                b.name
            )));
        }
        match &b.source {
            EnvSource::Hub => {}
            EnvSource::Value(v) if v.contains('\0') => {
                return Err(PluginError::Invalid(format!(
                    "{what} {:?}: a value cannot hold NUL",
                    b.name
                )));
            }
            EnvSource::Value(_) => {}
            EnvSource::Secret(key) if key.is_empty() || key.len() > 200 => {
                return Err(PluginError::Invalid(format!(
                    "{what} {:?}: a secret key is 1-200 characters",
                    b.name
                )));
            }
            EnvSource::Secret(_) if project.is_none() => {
                return Err(PluginError::Invalid(format!(
                    "{what} {:?} reads a project secret: bind the plugin to a project (--project)",
                    b.name
                )));
            }
            EnvSource::Secret(_) => {}
        }
    }
    Ok(())
}

fn valid_header_name(name: &str) -> bool {
    !name.is_empty() && axum::http::HeaderName::from_bytes(name.as_bytes()).is_ok()
}

/// Checks a plugin's declared variables and servers.
fn check(
    builtin: bool,
    env: &[EnvBinding],
    servers: &[ServerSpec],
    project: Option<DocId>,
) -> Result<(), PluginError> {
    check_bindings(env, "variable", valid_env_name, project)?;
    if servers.is_empty() && !builtin {
        return Err(PluginError::Invalid(
            "a plugin needs at least one MCP server (a command, or --url)".into(),
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for s in servers {
        if !valid_name(&s.name) {
            return Err(PluginError::Invalid(format!(
                "server name {:?}: 1-32 of a-z, 0-9 and '-', starting with a letter or digit",
                s.name
            )));
        }
        if !names.insert(s.name.as_str()) {
            return Err(PluginError::Invalid(format!(
                "two servers are named {:?}",
                s.name
            )));
        }
        if !(1..=MAX_CALL_TIMEOUT_SECS).contains(&s.call_timeout_secs) {
            return Err(PluginError::Invalid(format!(
                "server {:?}: call_timeout_secs is 1-{MAX_CALL_TIMEOUT_SECS}",
                s.name
            )));
        }
        match &s.transport {
            Transport::Stdio { command, args, cwd } => {
                if command.trim().is_empty() {
                    return Err(PluginError::Invalid(format!(
                        "server {:?} has no command",
                        s.name
                    )));
                }
                if command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
                    return Err(PluginError::Invalid(format!(
                        "server {:?}: NUL in its command line",
                        s.name
                    )));
                }
                if cwd.as_ref().is_some_and(|c| !c.is_absolute()) {
                    return Err(PluginError::Invalid(format!(
                        "server {:?}: cwd must be an absolute path",
                        s.name
                    )));
                }
            }
            Transport::Http { url, headers } => {
                let ok = (url.starts_with("http://") || url.starts_with("https://"))
                    && url.len() > "https://".len()
                    && !url.chars().any(|c| c.is_whitespace() || c.is_control());
                if !ok {
                    return Err(PluginError::Invalid(format!(
                        "server {:?}: url must be an http:// or https:// address",
                        s.name
                    )));
                }
                check_bindings(headers, "header", valid_header_name, project)?;
            }
        }
    }
    Ok(())
}

use crate::hubdb::now_ms;

fn to_json<T: Serialize>(v: &T) -> Result<String, PluginError> {
    serde_json::to_string(v).map_err(|e| PluginError::Invalid(e.to_string()))
}

/// Plugins in `hub.db`.
#[derive(Debug)]
pub struct PluginStore {
    conn: Mutex<Connection>,
}

const COLUMNS: &str =
    "name, builtin, enabled, env, servers, settings, project, created_at, updated_at";

type Row = (
    String,
    bool,
    bool,
    String,
    String,
    String,
    Option<String>,
    i64,
    i64,
);

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn decode(row: Row) -> Result<Plugin, PluginError> {
    let (name, builtin, enabled, env, servers, settings, project, created_at, updated_at) = row;
    let corrupt = |what, reason: String| PluginError::Corrupt {
        name: name.clone(),
        what,
        reason,
    };
    let env = serde_json::from_str(&env).map_err(|e| corrupt("env", e.to_string()))?;
    let servers = serde_json::from_str(&servers).map_err(|e| corrupt("servers", e.to_string()))?;
    let settings =
        serde_json::from_str(&settings).map_err(|e| corrupt("settings", e.to_string()))?;
    let project = project
        .map(|p| p.parse::<DocId>())
        .transpose()
        .map_err(|e| corrupt("project", e.to_string()))?;
    Ok(Plugin {
        name,
        builtin,
        enabled,
        env,
        servers,
        settings,
        project,
        created_at,
        updated_at,
    })
}

impl PluginStore {
    /// Opens the plugins of `db` (migrated by `hubdb`).
    pub fn open(db: &Path) -> Result<Self, PluginError> {
        let conn = crate::hubdb::open(db, crate::hubdb::Durability::Full)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock left no half-written state (SQLite rolls back).
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the built-in `computer` plugin, enabled, unless it exists (a disabled one
    /// stays disabled).
    pub fn ensure_builtin(&self) -> Result<(), PluginError> {
        let now = now_ms();
        self.conn().execute(
            "INSERT INTO plugins (name, builtin, enabled, settings, created_at, updated_at)
             VALUES (?1, 1, 1, ?2, ?3, ?3) ON CONFLICT(name) DO NOTHING",
            params![COMPUTER, r#"{"allow_private_network":false}"#, now],
        )?;
        Ok(())
    }

    /// Every plugin, by name.
    pub fn list(&self) -> Result<Vec<Plugin>, PluginError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM plugins ORDER BY name"))?;
        let rows = stmt
            .query_map([], read_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(decode).collect()
    }

    /// The plugin named `name`.
    pub fn get(&self, name: &str) -> Result<Plugin, PluginError> {
        let row = self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM plugins WHERE name = ?1"),
                [name],
                read_row,
            )
            .optional()?
            .ok_or_else(|| PluginError::NotFound(name.to_string()))?;
        decode(row)
    }

    /// Adds a plugin.
    pub fn create(&self, new: NewPlugin) -> Result<Plugin, PluginError> {
        if !valid_name(&new.name) {
            return Err(PluginError::Invalid(format!(
                "plugin name {:?}: 1-32 of a-z, 0-9 and '-', starting with a letter or digit",
                new.name
            )));
        }
        check(false, &new.env, &new.servers, new.project)?;
        let now = now_ms();
        let inserted = self.conn().execute(
            "INSERT INTO plugins (name, builtin, enabled, env, servers, settings, project, created_at, updated_at)
             VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7, ?7) ON CONFLICT(name) DO NOTHING",
            params![
                new.name,
                new.enabled,
                to_json(&new.env)?,
                to_json(&new.servers)?,
                to_json(&new.settings)?,
                new.project.map(|p| p.to_string()),
                now
            ],
        )?;
        if inserted == 0 {
            return Err(PluginError::Exists(new.name));
        }
        self.get(&new.name)
    }

    /// Changes a plugin; the running hub's supervisor applies it within a second.
    pub fn update(&self, name: &str, patch: PluginPatch) -> Result<Plugin, PluginError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row = tx
            .query_row(
                &format!("SELECT {COLUMNS} FROM plugins WHERE name = ?1"),
                [name],
                read_row,
            )
            .optional()?
            .ok_or_else(|| PluginError::NotFound(name.to_string()))?;
        let mut p = decode(row)?;
        if p.builtin && patch.servers.is_some() {
            return Err(PluginError::Builtin(p.name));
        }
        if let Some(enabled) = patch.enabled {
            p.enabled = enabled;
        }
        if let Some(env) = patch.env {
            p.env = env;
        }
        if let Some(settings) = patch.settings {
            p.settings = settings;
        }
        if let Some(project) = patch.project {
            p.project = project;
        }
        if let Some(servers) = patch.servers {
            p.servers = servers;
        }
        check(p.builtin, &p.env, &p.servers, p.project)?;
        p.updated_at = now_ms().max(p.updated_at + 1);
        tx.execute(
            "UPDATE plugins SET enabled = ?2, env = ?3, servers = ?4, settings = ?5, project = ?6,
                 updated_at = ?7 WHERE name = ?1",
            params![
                p.name,
                p.enabled,
                to_json(&p.env)?,
                to_json(&p.servers)?,
                to_json(&p.settings)?,
                p.project.map(|d| d.to_string()),
                p.updated_at
            ],
        )?;
        // Tools of servers that are gone no longer exist (a built-in has no servers: its
        // tools are cached under its own name).
        let names: Vec<&str> = p.servers.iter().map(|s| s.name.as_str()).collect();
        if !p.builtin {
            tx.execute(
                "DELETE FROM plugin_tools WHERE plugin = ?1
               AND server NOT IN (SELECT value FROM json_each(?2))",
                params![p.name, to_json(&names)?],
            )?;
        }
        tx.commit()?;
        Ok(p)
    }

    /// Removes a plugin and its cached tools (the built-in one cannot be removed).
    pub fn remove(&self, name: &str) -> Result<(), PluginError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let builtin: Option<bool> = tx
            .query_row("SELECT builtin FROM plugins WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        match builtin {
            None => return Err(PluginError::NotFound(name.to_string())),
            Some(true) => return Err(PluginError::Builtin(name.to_string())),
            Some(false) => {}
        }
        tx.execute("DELETE FROM plugins WHERE name = ?1", [name])?;
        tx.execute("DELETE FROM plugin_tools WHERE plugin = ?1", [name])?;
        tx.commit()?;
        Ok(())
    }

    /// Replaces the cached tools of one server with `tools` (as just listed).
    pub fn cache_tools(
        &self,
        plugin: &str,
        server: &str,
        tools: &[CachedTool],
    ) -> Result<(), PluginError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // A plugin removed meanwhile keeps no cache.
        let exists: bool = tx
            .query_row("SELECT 1 FROM plugins WHERE name = ?1", [plugin], |_| {
                Ok(true)
            })
            .optional()?
            .unwrap_or(false);
        tx.execute(
            "DELETE FROM plugin_tools WHERE plugin = ?1 AND server = ?2",
            params![plugin, server],
        )?;
        if exists {
            let mut insert = tx.prepare(
                "INSERT OR REPLACE INTO plugin_tools
                   (plugin, server, name, description, schema, risky, discovered_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for t in tools {
                insert.execute(params![
                    plugin,
                    server,
                    t.name,
                    t.description,
                    to_json(&t.schema)?,
                    t.risky,
                    t.discovered_at
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The cached tools of a plugin, by name.
    pub fn cached_tools(&self, plugin: &str) -> Result<Vec<CachedTool>, PluginError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT plugin, server, name, description, schema, risky, discovered_at
               FROM plugin_tools WHERE plugin = ?1 ORDER BY name",
        )?;
        let rows = stmt
            .query_map([plugin], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, bool>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows
            .into_iter()
            .map(
                |(plugin, server, name, description, schema, risky, discovered_at)| CachedTool {
                    plugin,
                    server,
                    name,
                    description,
                    // A schema that no longer parses is shown as none rather than failing the list.
                    schema: serde_json::from_str(&schema).unwrap_or(Value::Null),
                    risky,
                    discovered_at,
                },
            )
            .collect())
    }

    /// A number that changes whenever another connection commits to `hub.db`
    /// (`PRAGMA data_version`): the supervisor reloads the plugins when it moves.
    pub fn data_version(&self) -> Result<i64, PluginError> {
        Ok(self
            .conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(name: &str, command: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: vec!["--flag".into()],
                cwd: None,
            },
            sandbox: SandboxMode::Auto,
            call_timeout_secs: DEFAULT_CALL_TIMEOUT_SECS,
        }
    }

    fn store() -> (tempfile::TempDir, PluginStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PluginStore::open(&dir.path().join("hub.db")).expect("open");
        (dir, store)
    }

    #[test]
    fn names() {
        for ok in ["a", "files", "0x", "my-plugin-2", &"a".repeat(32)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "A",
            "a_b",
            "a b",
            "é",
            &"a".repeat(33),
            "a/b",
            "..",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn round_trip_and_patch() {
        let (_dir, store) = store();
        let project = DocId::random();
        let new = NewPlugin {
            name: "files".into(),
            enabled: false,
            env: vec![
                EnvBinding {
                    name: "HOME_TOKEN".into(),
                    source: EnvSource::Hub,
                },
                EnvBinding {
                    name: "MODE".into(),
                    source: EnvSource::Value("fast".into()),
                },
                EnvBinding {
                    name: "API_KEY".into(),
                    source: EnvSource::Secret("api".into()),
                },
            ],
            servers: vec![
                stdio("main", "npx"),
                ServerSpec {
                    name: "remote".into(),
                    transport: Transport::Http {
                        url: "https://example.test/mcp".into(),
                        headers: vec![EnvBinding {
                            name: "Authorization".into(),
                            source: EnvSource::Secret("token".into()),
                        }],
                    },
                    sandbox: SandboxMode::Off,
                    call_timeout_secs: 5,
                },
            ],
            settings: serde_json::json!({"a": 1})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            project: Some(project),
        };
        let created = store.create(new.clone()).expect("create");
        assert_eq!(created.servers, new.servers);
        assert_eq!(created.env, new.env);
        assert_eq!(created.project, Some(project));
        assert!(!created.enabled && !created.builtin);
        assert_eq!(store.get("files").expect("get"), created);
        assert!(matches!(store.create(new), Err(PluginError::Exists(_))));

        let patched = store
            .update(
                "files",
                PluginPatch {
                    enabled: Some(true),
                    servers: Some(vec![stdio("main", "node")]),
                    ..PluginPatch::default()
                },
            )
            .expect("patch");
        assert!(patched.enabled);
        assert_eq!(patched.servers.len(), 1);
        assert!(patched.updated_at > created.updated_at);
        assert_eq!(store.get("files").expect("get"), patched);
        // Unbinding a plugin whose bindings read project secrets is refused.
        let e = store
            .update(
                "files",
                PluginPatch {
                    project: Some(None),
                    ..PluginPatch::default()
                },
            )
            .expect_err("secret without project");
        assert!(e.to_string().contains("project"), "{e}");
        assert!(matches!(store.get("nope"), Err(PluginError::NotFound(_))));
    }

    #[test]
    fn the_stored_json_is_the_documented_shape() {
        let json = serde_json::to_value(stdio("main", "npx")).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"name": "main", "transport": "stdio", "command": "npx",
                "args": ["--flag"], "sandbox": "auto", "call_timeout_secs": 30})
        );
        let spec: ServerSpec = serde_json::from_value(
            serde_json::json!({"name": "r", "transport": "http", "url": "http://127.0.0.1:1/mcp"}),
        )
        .expect("defaults");
        assert_eq!(spec.call_timeout_secs, 30);
        assert_eq!(spec.sandbox, SandboxMode::Auto);
        let b: EnvBinding =
            serde_json::from_value(serde_json::json!({"name": "K", "source": {"secret": "k"}}))
                .expect("binding");
        assert_eq!(b.source, EnvSource::Secret("k".into()));
        let b: EnvBinding =
            serde_json::from_value(serde_json::json!({"name": "K", "source": "hub"})).expect("hub");
        assert_eq!(b.source, EnvSource::Hub);
    }

    #[test]
    fn invalid_plugins_are_refused() {
        let (_dir, store) = store();
        let base = NewPlugin {
            name: "p".into(),
            servers: vec![stdio("main", "srv")],
            ..NewPlugin::default()
        };
        let cases = [
            NewPlugin {
                name: "Bad".into(),
                ..base.clone()
            },
            NewPlugin {
                servers: vec![],
                ..base.clone()
            },
            NewPlugin {
                servers: vec![stdio("main", "a"), stdio("main", "b")],
                ..base.clone()
            },
            NewPlugin {
                servers: vec![stdio("main", " ")],
                ..base.clone()
            },
            NewPlugin {
                servers: vec![stdio("Main", "a")],
                ..base.clone()
            },
            NewPlugin {
                servers: vec![ServerSpec {
                    call_timeout_secs: 0,
                    ..stdio("main", "a")
                }],
                ..base.clone()
            },
            NewPlugin {
                env: vec![EnvBinding {
                    name: "1X".into(),
                    source: EnvSource::Hub,
                }],
                ..base.clone()
            },
            NewPlugin {
                env: vec![EnvBinding {
                    name: "X=Y".into(),
                    source: EnvSource::Hub,
                }],
                ..base.clone()
            },
            NewPlugin {
                env: vec![EnvBinding {
                    name: "K".into(),
                    source: EnvSource::Secret("k".into()),
                }],
                ..base.clone()
            },
            NewPlugin {
                servers: vec![ServerSpec {
                    transport: Transport::Http {
                        url: "ftp://x".into(),
                        headers: vec![],
                    },
                    ..stdio("main", "a")
                }],
                ..base.clone()
            },
            NewPlugin {
                servers: vec![ServerSpec {
                    transport: Transport::Stdio {
                        command: "a".into(),
                        args: vec![],
                        cwd: Some("relative".into()),
                    },
                    ..stdio("main", "a")
                }],
                ..base.clone()
            },
        ];
        for case in cases {
            let name = case.name.clone();
            assert!(
                matches!(store.create(case), Err(PluginError::Invalid(_))),
                "{name} accepted"
            );
        }
        store.create(base).expect("the base case is valid");
    }

    #[test]
    fn the_builtin_plugin_stays() {
        let (_dir, store) = store();
        store.ensure_builtin().expect("builtin");
        let c = store.get(COMPUTER).expect("computer");
        assert!(c.builtin && c.enabled && c.servers.is_empty());
        store
            .update(
                COMPUTER,
                PluginPatch {
                    enabled: Some(false),
                    ..PluginPatch::default()
                },
            )
            .expect("disable");
        // A second start keeps it disabled.
        store.ensure_builtin().expect("again");
        assert!(!store.get(COMPUTER).expect("computer").enabled);
        assert!(matches!(
            store.remove(COMPUTER),
            Err(PluginError::Builtin(_))
        ));
        let e = store
            .update(
                COMPUTER,
                PluginPatch {
                    servers: Some(vec![stdio("x", "y")]),
                    ..PluginPatch::default()
                },
            )
            .expect_err("no servers for the builtin");
        assert!(matches!(e, PluginError::Builtin(_)));
    }

    #[test]
    fn tool_cache_follows_servers_and_removal() {
        let (_dir, store) = store();
        store
            .create(NewPlugin {
                name: "p".into(),
                servers: vec![stdio("a", "x"), stdio("b", "y")],
                ..NewPlugin::default()
            })
            .expect("create");
        let tool = |server: &str, name: &str| CachedTool {
            plugin: "p".into(),
            server: server.into(),
            name: name.into(),
            description: "d".into(),
            schema: serde_json::json!({"type": "object"}),
            risky: true,
            discovered_at: 1,
        };
        store
            .cache_tools("p", "a", &[tool("a", "p_one"), tool("a", "p_two")])
            .expect("a");
        store
            .cache_tools("p", "b", &[tool("b", "p_three")])
            .expect("b");
        assert_eq!(store.cached_tools("p").expect("cached").len(), 3);
        // A re-listing replaces the server's tools.
        store
            .cache_tools("p", "a", &[tool("a", "p_two")])
            .expect("again");
        let names: Vec<String> = store
            .cached_tools("p")
            .expect("cached")
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["p_three", "p_two"]);
        assert_eq!(store.cached_tools("p").expect("c")[0], tool("b", "p_three"));
        // Dropping server b drops its tools.
        store
            .update(
                "p",
                PluginPatch {
                    servers: Some(vec![stdio("a", "x")]),
                    ..PluginPatch::default()
                },
            )
            .expect("drop b");
        assert_eq!(store.cached_tools("p").expect("cached").len(), 1);
        store.remove("p").expect("remove");
        assert!(store.cached_tools("p").expect("cached").is_empty());
        // A late listing of a removed plugin leaves nothing behind.
        store
            .cache_tools("p", "a", &[tool("a", "p_two")])
            .expect("late");
        assert!(store.cached_tools("p").expect("cached").is_empty());
        assert!(matches!(store.remove("p"), Err(PluginError::NotFound(_))));
    }

    #[test]
    fn data_version_moves_on_other_connections_commits() {
        let (dir, store) = store();
        let other = PluginStore::open(&dir.path().join("hub.db")).expect("other");
        let before = store.data_version().expect("version");
        other
            .create(NewPlugin {
                name: "p".into(),
                servers: vec![stdio("a", "x")],
                ..NewPlugin::default()
            })
            .expect("create");
        assert_ne!(store.data_version().expect("version"), before);
    }
}
