//! The one owner of `node.db`, the node's small relational database beside its replica:
//! so far the owner's browser sessions and login links for the node's API. Every
//! connection to it is opened here (private file with its `-wal` and `-shm`, WAL,
//! `synchronous=FULL`, a busy timeout) and migrated by one numbered list
//! ([`MIGRATIONS`]); a database whose schema version (`PRAGMA user_version`) is newer
//! than this code knows is refused with a message naming both versions, before anything
//! reads or migrates it.
//!
//! Documents never live here (they are in the replica, `hearth.db`); this module never
//! lowers `user_version`.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use hearth_ui::access::{owner::SESSION_TABLES, OwnerSessions, Server};
use rusqlite::Connection;

/// The database file in the node's data directory.
pub const FILE: &str = "node.db";

/// Numbered migrations of `node.db`, in order; append only.
pub const MIGRATIONS: &[&str] = &[
    // 1: the owner's browser sessions and one-time login links (hashes only).
    SESSION_TABLES,
];

/// The highest schema version this code knows.
pub const NODE_DB_VERSION: i64 = MIGRATIONS.len() as i64;

/// Why `node.db` could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeDbError {
    /// The database was written by a newer release.
    #[error("{path} has schema version {found}, but this hearth knows versions up to {known}: it was written by a newer release. Run that release (or newer), or delete the file (it holds only browser sessions)")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// [`NODE_DB_VERSION`].
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
    #[error("node database: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

fn version(conn: &Connection) -> Result<i64, NodeDbError> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

fn check_version(conn: &Connection, path: &Path) -> Result<(), NodeDbError> {
    let found = version(conn)?;
    if found > NODE_DB_VERSION {
        return Err(NodeDbError::TooNew {
            path: path.to_path_buf(),
            found,
            known: NODE_DB_VERSION,
        });
    }
    Ok(())
}

/// Opens `path` (creating it private), refusing a newer schema and applying the
/// migrations it lacks in one immediate transaction.
pub fn open(path: &Path) -> Result<Connection, NodeDbError> {
    hearth_net::files::secure_db_files(path).map_err(|source| NodeDbError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    check_version(&conn, path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // A session opened or ended is reported to the owner: it survives a power cut.
    conn.pragma_update(None, "synchronous", "FULL")?;
    if version(&conn)? < NODE_DB_VERSION {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Read again under the write lock: another process may have migrated meanwhile.
        let applied = version(&tx)?;
        check_version(&tx, path)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied.max(0) as usize) {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        }
        tx.commit()?;
    }
    Ok(conn)
}

/// The owner's browser sessions of the node whose data directory is `home`.
pub fn open_sessions(home: &Path) -> Result<OwnerSessions, NodeDbError> {
    Ok(OwnerSessions::new(open(&home.join(FILE))?, Server::Node))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_db_is_private_migrated_once_and_a_newer_one_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sessions = open_sessions(dir.path()).expect("open");
        let (link, _) = sessions.create_link(Duration::from_secs(60)).expect("link");
        sessions.redeem_link(&link, "t").expect("redeem");
        let used = sessions.redeem_link(&link, "t").expect_err("single use");
        assert!(used.to_string().contains("`hearth open`"), "{used}");
        drop(sessions);
        let path = dir.path().join(FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Reopening keeps the session.
        assert_eq!(
            open_sessions(dir.path())
                .expect("again")
                .list()
                .expect("list")
                .len(),
            1
        );
        let raw = Connection::open(&path).expect("raw");
        raw.pragma_update(None, "user_version", NODE_DB_VERSION + 1)
            .expect("bump");
        let e = open(&path).expect_err("too new");
        assert!(
            matches!(e, NodeDbError::TooNew { found, .. } if found == NODE_DB_VERSION + 1),
            "{e}"
        );
        assert!(e.to_string().contains("newer release"), "{e}");
    }
}
