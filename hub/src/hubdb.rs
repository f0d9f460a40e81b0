//! Opening `hub.db`, the hub's relational database, safely: the file is private (0600,
//! with its `-wal` and `-shm`), every connection waits on locks, and a database whose
//! schema version (`PRAGMA user_version`) is newer than this code knows is refused with a
//! message naming both versions, before any module reads or migrates it. Also the hub's
//! small key-value table (`hub_meta`), which remembers e.g. the `general` project's id.
//!
//! Every module that opens `hub.db` goes through [`open`] (or [`check`] before a module
//! that opens it itself, `devices`). This module never migrates another module's tables
//! and never lowers `user_version`.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use rusqlite::{Connection, OptionalExtension};

/// The highest `hub.db` schema version (`PRAGMA user_version`) this code knows: the
/// number of numbered migrations (today those of `devices`). A test checks that it
/// matches what a fresh database ends with, so a new migration must bump it.
pub const HUB_DB_VERSION: i64 = crate::devices::MIGRATIONS.len() as i64;

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

/// Opens `path` (creating it private), in WAL mode, refusing a newer schema version.
pub fn open(path: &Path, durability: Durability) -> Result<Connection, HubDbError> {
    hearth_net::files::secure_db_files(path).map_err(|source| HubDbError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    check_version(&conn, path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS hub_meta (
            key TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        );",
    )?;
    Ok(conn)
}

/// Checks `path` before a module that opens it itself (the device registry): the file is
/// made private and a newer schema version is refused.
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
        let _reg = crate::devices::DeviceRegistry::open(&path).expect("registry");
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
        let (found, known) = (HUB_DB_VERSION + 1, HUB_DB_VERSION);
        assert!(msg.contains(&format!("schema version {found}")), "{msg}");
        assert!(msg.contains(&format!("versions up to {known}")), "{msg}");
        assert!(msg.contains("newer release"), "{msg}");
        let e = open(&path, Durability::Normal).expect_err("open refuses");
        assert!(
            matches!(
                e,
                HubDbError::TooNew { found: f, known: k, .. } if f == found && k == known
            ),
            "{e}"
        );
        let e = crate::agent::tools::UpdateLog::open(&path).expect_err("update log refuses");
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
    fn meta_is_set_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = open(&dir.path().join("hub.db"), Durability::Full).expect("open");
        assert_eq!(get_meta(&c, "k").expect("get"), None);
        assert_eq!(set_meta_once(&c, "k", "a").expect("set"), "a");
        assert_eq!(set_meta_once(&c, "k", "b").expect("set"), "a");
        assert_eq!(get_meta(&c, "k").expect("get").as_deref(), Some("a"));
    }
}
