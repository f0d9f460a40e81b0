//! The one owner of `hub.db`, the hub's relational database: every connection to it is
//! opened here, with one set of pragmas (private file with its `-wal` and `-shm`, WAL,
//! a busy timeout, foreign keys on), and one numbered migration list ([`MIGRATIONS`])
//! creates every hub table: devices and pairing, messages and summaries, the audit log,
//! tool permissions, usage, project updates, secrets, owner sessions and login links,
//! runtime settings, archived conversations, admin devices, plugins, schedules and
//! their runs, task reminders, notifications, channel chats. A database whose schema version (`PRAGMA user_version`) is newer
//! than this code knows is refused with a message naming both versions, before anything
//! reads or migrates it. Also the small key-value table `hub_meta` (e.g. the `general`
//! project's id).
//!
//! Modules keep their own connection (each behind its own mutex) but never create a
//! table or set a pragma themselves. This module never lowers `user_version`.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use rusqlite::{Connection, OptionalExtension};

/// Numbered migrations of `hub.db`, in order; `PRAGMA user_version` counts those applied.
/// Append only: a released migration is never edited.
pub const MIGRATIONS: &[&str] = &[
    // 1: devices and pairing.
    "
CREATE TABLE IF NOT EXISTS devices (
    node_id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    scope TEXT,
    paired_at INTEGER NOT NULL,
    last_seen INTEGER,
    revoked_at INTEGER,
    online INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS pair_requests (
    code TEXT PRIMARY KEY NOT NULL,
    node_id TEXT NOT NULL,
    device_name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    scope TEXT,
    ticket BLOB
);
CREATE INDEX IF NOT EXISTS pair_requests_node ON pair_requests(node_id, created_at);
CREATE TABLE IF NOT EXISTS tickets (
    secret BLOB PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
CREATE TABLE IF NOT EXISTS approve_attempts (
    at INTEGER NOT NULL,
    ok INTEGER NOT NULL
);
",
    // 2: pairing limits per address, ticket reservation.
    "
ALTER TABLE pair_requests ADD COLUMN origin TEXT;
CREATE INDEX IF NOT EXISTS pair_requests_origin ON pair_requests(origin, created_at);
ALTER TABLE tickets ADD COLUMN reserved_by TEXT;
",
    // 3: the tables that modules used to create outside the numbering, adopted as they
    // were (IF NOT EXISTS: an older hub.db already has some of them).
    "
CREATE TABLE IF NOT EXISTS hub_meta (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
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
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TABLE IF NOT EXISTS tool_permissions (
    project TEXT NOT NULL,
    tool TEXT NOT NULL,
    allowed INTEGER NOT NULL,
    PRIMARY KEY (project, tool)
);
CREATE TABLE IF NOT EXISTS channel_summaries (
    channel TEXT PRIMARY KEY NOT NULL,
    summary TEXT NOT NULL,
    covered_until INTEGER NOT NULL,
    seen_until INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS usage_daily (
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    project TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0,
    cost_micro_usd INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, model, project)
);
CREATE TABLE IF NOT EXISTS updates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    task TEXT,
    text TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS updates_project ON updates(project, id);
CREATE TABLE IF NOT EXISTS secrets (
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope, name)
);
",
    // 4: conversations belong to a project: messages and summaries are keyed by
    // (project, conversation). Messages from before have no project ('') and are never
    // read again; summaries keyed by channel alone are dropped (they mixed projects).
    "
ALTER TABLE messages ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE messages RENAME COLUMN channel TO conversation;
DROP INDEX IF EXISTS messages_channel;
CREATE INDEX messages_conversation ON messages(project, conversation, id);
DROP TABLE channel_summaries;
CREATE TABLE conversation_summaries (
    project TEXT NOT NULL,
    conversation TEXT NOT NULL,
    summary TEXT NOT NULL,
    covered_until INTEGER NOT NULL,
    seen_until INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (project, conversation)
);
ALTER TABLE audit_log RENAME COLUMN channel TO conversation;
",
    // 5: the owner's browser sessions and one-time login links (secrets stored as
    // SHA-256 hashes only), and runtime settings changed through the API.
    "
CREATE TABLE owner_sessions (
    id TEXT PRIMARY KEY NOT NULL,
    token_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    last_used INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    user_agent TEXT NOT NULL DEFAULT ''
);
CREATE TABLE login_links (
    hash BLOB PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
CREATE TABLE settings (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
",
    // 6: archived conversations, and the indexes the API's filters read (the audit log
    // by project and by time, usage by project).
    "
CREATE TABLE conversation_state (
    project TEXT NOT NULL,
    conversation TEXT NOT NULL,
    archived_at INTEGER,
    PRIMARY KEY (project, conversation)
);
CREATE INDEX audit_log_project ON audit_log(project, id);
CREATE INDEX audit_log_at ON audit_log(at);
CREATE INDEX usage_daily_project ON usage_daily(project, day);
",
    // 7: admin devices: a device the owner trusts to widen power (approve devices, set
    // provider keys and tool permissions) through the relay.
    "
ALTER TABLE devices ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
",
    // 8: a tool the owner allows in a project but wants to be asked about first, each
    // time (as risky tools always are).
    "
ALTER TABLE tool_permissions ADD COLUMN ask INTEGER NOT NULL DEFAULT 0;
",
    // 9: plugins (MCP servers and built-ins), the tools last discovered per server, and
    // each plugin's key-value store per project. `tool_permissions.ask` becomes
    // three-valued: NULL asks when the call is risky (what every row meant before), 1
    // asks every call, 0 never asks (the owner allowed the tool outright).
    "
CREATE TABLE plugins (
  name TEXT PRIMARY KEY NOT NULL,
  builtin INTEGER NOT NULL DEFAULT 0,
  enabled INTEGER NOT NULL DEFAULT 0,
  env TEXT NOT NULL DEFAULT '[]',
  servers TEXT NOT NULL DEFAULT '[]',
  settings TEXT NOT NULL DEFAULT '{}',
  project TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE plugin_tools (
  plugin TEXT NOT NULL,
  server TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  schema TEXT NOT NULL,
  risky INTEGER NOT NULL,
  discovered_at INTEGER NOT NULL,
  PRIMARY KEY (plugin, name)
);
CREATE TABLE plugin_kv (
  plugin TEXT NOT NULL,
  project TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (plugin, project, key)
);
CREATE TABLE tool_permissions_v9 (
  project TEXT NOT NULL,
  tool TEXT NOT NULL,
  allowed INTEGER NOT NULL,
  ask INTEGER,
  PRIMARY KEY (project, tool)
);
INSERT INTO tool_permissions_v9 (project, tool, allowed, ask)
  SELECT project, tool, allowed, CASE WHEN ask = 1 THEN 1 ELSE NULL END FROM tool_permissions;
DROP TABLE tool_permissions;
ALTER TABLE tool_permissions_v9 RENAME TO tool_permissions;
",
    // 10: the scheduler (schedules — a task's agent job is one, keyed by the task —,
    // their runs, the reminders sent for people's tasks), notifications, and the chats
    // of message channels (Telegram: who may talk to the agent, bound to which
    // project) with each channel's own state (its update offset).
    "
CREATE TABLE schedules (
  id TEXT PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  project TEXT NOT NULL,
  task TEXT UNIQUE,
  kind TEXT NOT NULL,
  spec TEXT NOT NULL,
  tz TEXT NOT NULL,
  prompt TEXT NOT NULL,
  model TEXT,
  auto_approve TEXT NOT NULL DEFAULT '[]',
  missed TEXT NOT NULL DEFAULT 'run_once',
  catch_up_max INTEGER NOT NULL DEFAULT 3,
  approval_wait_secs INTEGER NOT NULL DEFAULT 86400,
  paused INTEGER NOT NULL DEFAULT 0,
  anchor INTEGER,
  next_due INTEGER,
  last_run_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX schedules_next_due ON schedules (next_due) WHERE next_due IS NOT NULL;
CREATE TABLE schedule_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  schedule TEXT NOT NULL,
  project TEXT NOT NULL,
  conversation TEXT NOT NULL,
  reason TEXT NOT NULL,
  due_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  status TEXT NOT NULL,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  answer TEXT,
  error TEXT
);
CREATE INDEX schedule_runs_by_schedule ON schedule_runs (schedule, id);
CREATE TABLE task_reminders (
  task TEXT NOT NULL,
  due TEXT NOT NULL,
  reminded_at INTEGER NOT NULL,
  PRIMARY KEY (task, due)
);
CREATE TABLE notifications (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  project TEXT,
  refs TEXT NOT NULL DEFAULT '{}',
  quiet INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  read_at INTEGER
);
CREATE INDEX notifications_unread ON notifications (id) WHERE read_at IS NULL;
CREATE TABLE channel_chats (
  channel TEXT NOT NULL,
  chat TEXT NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  project TEXT,
  conversation INTEGER NOT NULL DEFAULT 1,
  notify INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (channel, chat)
);
CREATE TABLE channel_state (
  channel TEXT PRIMARY KEY NOT NULL,
  enabled INTEGER NOT NULL DEFAULT 1,
  state TEXT NOT NULL DEFAULT '{}',
  updated_at INTEGER NOT NULL
);
",
];

/// Milliseconds since the Unix epoch: the timestamp every `hub.db` row carries (0 if
/// the clock is before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The highest `hub.db` schema version (`PRAGMA user_version`) this code knows: the
/// number of [`MIGRATIONS`].
pub const HUB_DB_VERSION: i64 = MIGRATIONS.len() as i64;

/// Why `hub.db` could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubDbError {
    /// The database was written by a newer release.
    #[error("{path} has schema version {found}, but this hearth-hub knows versions up to {known}: it was written by a newer release. Run that release (or newer), or restore a backup made by this one")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// [`HUB_DB_VERSION`].
        known: i64,
    },
    /// The file's mode could not be set.
    #[error("{path}: {source}")]
    Io {
        /// The database file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("hub database: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// How durable each commit on a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: survives a crash of the process, not of the machine.
    Normal,
    /// `synchronous=FULL`: survives a power cut.
    Full,
}

/// Opens `path` (creating it private), in WAL mode with foreign keys on, refusing a
/// newer schema version and applying the migrations this code knows that it lacks.
pub fn open(path: &Path, durability: Durability) -> Result<Connection, HubDbError> {
    hearth_net::files::secure_db_files(path).map_err(|source| HubDbError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    check_version(&conn, path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Applies the migrations `conn` lacks, in one immediate transaction (so two processes
/// opening a fresh `hub.db` at once migrate it once).
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), HubDbError> {
    let applied: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if applied == HUB_DB_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Read again under the write lock: another process may have migrated meanwhile.
    let applied: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    check_version(&tx, path)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied.max(0) as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}

/// Checks `path` before anything else touches it: the file is made private, a newer
/// schema version is refused, and missing migrations are applied.
pub fn check(path: &Path) -> Result<(), HubDbError> {
    open(path, Durability::Full).map(drop)
}

/// Refuses a database whose `user_version` is above [`HUB_DB_VERSION`].
pub fn check_version(conn: &Connection, path: &Path) -> Result<(), HubDbError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > HUB_DB_VERSION {
        tracing::error!(path = %path.display(), found, known = HUB_DB_VERSION, "hub.db is from a newer release; refusing to open it");
        return Err(HubDbError::TooNew {
            path: path.to_path_buf(),
            found,
            known: HUB_DB_VERSION,
        });
    }
    Ok(())
}

/// Reads a `hub_meta` value.
pub fn get_meta(conn: &Connection, key: &str) -> Result<Option<String>, HubDbError> {
    Ok(conn
        .query_row("SELECT value FROM hub_meta WHERE key = ?1", [key], |r| {
            r.get(0)
        })
        .optional()?)
}

/// Sets a `hub_meta` value if it is not set yet; returns the value now stored (the one
/// already there if another process set it first).
pub fn set_meta_once(conn: &Connection, key: &str, value: &str) -> Result<String, HubDbError> {
    conn.execute(
        "INSERT INTO hub_meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO NOTHING",
        [key, value],
    )?;
    Ok(
        conn.query_row("SELECT value FROM hub_meta WHERE key = ?1", [key], |r| {
            r.get(0)
        })?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bump(path: &Path, to: i64) {
        let c = Connection::open(path).expect("raw open");
        c.pragma_update(None, "user_version", to).expect("bump");
    }

    #[test]
    fn known_version_matches_the_migrations() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hub.db");
        check(&path).expect("open");
        let c = Connection::open(&path).expect("raw open");
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(
            v, HUB_DB_VERSION,
            "a hub.db migration was added: bump HUB_DB_VERSION"
        );
    }

    #[test]
    fn newer_hub_db_is_refused_by_every_opener() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hub.db");
        check(&path).expect("fresh");
        bump(&path, HUB_DB_VERSION + 1);
        let msg = check(&path).expect_err("too new").to_string();
        assert!(
            msg.contains(&format!("schema version {}", HUB_DB_VERSION + 1)),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("versions up to {HUB_DB_VERSION}")),
            "{msg}"
        );
        assert!(msg.contains("newer release"), "{msg}");
        let e = open(&path, Durability::Normal).expect_err("open refuses");
        assert!(
            matches!(
                e,
                HubDbError::TooNew { found, known, .. } if found == HUB_DB_VERSION + 1 && known == HUB_DB_VERSION
            ),
            "{e}"
        );
        let e = crate::agent::tools::UpdateLog::open(&path).expect_err("update log refuses");
        assert!(e.to_string().contains("newer release"), "{e}");
        let e = crate::devices::DeviceRegistry::open(&path).expect_err("registry refuses");
        assert!(e.to_string().contains("newer release"), "{e}");
        let e = crate::secrets::SecretStore::open(&path, &dir.path().join("server.secret"))
            .expect_err("secret store refuses");
        assert!(e.to_string().contains("newer release"), "{e}");
        // Nothing was migrated or lowered.
        let c = Connection::open(&path).expect("raw open");
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(v, HUB_DB_VERSION + 1);
    }

    #[test]
    fn tool_permissions_keep_their_meaning_across_migration_9() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hub.db");
        {
            let c = Connection::open(&path).expect("raw open");
            for sql in &MIGRATIONS[..8] {
                c.execute_batch(sql).expect("old migration");
            }
            c.pragma_update(None, "user_version", 8).expect("version");
            // Before 9, "allowed, not ask" still asked for a risky call.
            c.execute_batch(
                "INSERT INTO tool_permissions (project, tool, allowed, ask) VALUES
                   ('p', 'notes_delete', 1, 0), ('p', 'notes_create', 1, 1), ('p', 'tasks_delete', 0, 0);",
            )
            .expect("old rows");
        }
        let c = open(&path, Durability::Normal).expect("migrates");
        let rows: Vec<(String, bool, Option<bool>)> = c
            .prepare("SELECT tool, allowed, ask FROM tool_permissions ORDER BY tool")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(
            rows,
            vec![
                ("notes_create".to_string(), true, Some(true)),
                ("notes_delete".to_string(), true, None),
                ("tasks_delete".to_string(), false, None),
            ],
            "nothing becomes allowed outright by the migration"
        );
    }

    #[test]
    fn a_hub_db_from_before_the_numbering_migrates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hub.db");
        {
            // What an older hub left: devices at version 2, the other tables made ad hoc.
            let c = Connection::open(&path).expect("raw open");
            for sql in &MIGRATIONS[..2] {
                c.execute_batch(sql).expect("old migration");
            }
            c.pragma_update(None, "user_version", 2).expect("version");
            c.execute_batch(
                "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
                   role TEXT NOT NULL, content TEXT NOT NULL, created_at INTEGER NOT NULL);
                 INSERT INTO messages (channel, role, content, created_at) VALUES ('cli', 'user', '[]', 1);
                 CREATE TABLE channel_summaries (channel TEXT PRIMARY KEY NOT NULL, summary TEXT NOT NULL,
                   covered_until INTEGER NOT NULL, seen_until INTEGER NOT NULL DEFAULT 0,
                   updated_at INTEGER NOT NULL);
                 INSERT INTO channel_summaries VALUES ('cli', 'mixed projects', 1, 1, 1);",
            )
            .expect("ad hoc tables");
        }
        let c = open(&path, Durability::Normal).expect("migrates");
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(v, HUB_DB_VERSION);
        // Old messages belong to no project; summaries keyed by channel alone are gone.
        let (project, conversation): (String, String) = c
            .query_row("SELECT project, conversation FROM messages", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("message kept");
        assert_eq!((project.as_str(), conversation.as_str()), ("", "cli"));
        let n: i64 = c
            .query_row("SELECT count(*) FROM conversation_summaries", [], |r| {
                r.get(0)
            })
            .expect("summaries");
        assert_eq!(n, 0);
        // Reopening changes nothing.
        drop(c);
        check(&path).expect("again");
    }

    #[test]
    fn meta_is_set_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = open(&dir.path().join("hub.db"), Durability::Full).expect("open");
        assert_eq!(get_meta(&c, "k").expect("get"), None);
        assert_eq!(set_meta_once(&c, "k", "a").expect("set"), "a");
        assert_eq!(set_meta_once(&c, "k", "b").expect("set"), "a");
        assert_eq!(get_meta(&c, "k").expect("get").as_deref(), Some("a"));
    }
}
