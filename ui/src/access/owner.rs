//! The owner's credentials for a Hearth HTTP API: the owner token (a random secret in
//! `owner.token` in the data directory, 0600, created exclusively at first start, sent by
//! the server's own CLI as `Authorization: Bearer`), one-time login links for a browser,
//! and the browser sessions those links open (listed and ended by the owner).
//!
//! Link and session secrets are stored as SHA-256 hashes only, in the tables of
//! [`SESSION_TABLES`] (the hub's `hub.db`, the node's `node.db`: their owners open the
//! connection and migrate it); the token is compared in constant time. A login link lives
//! [`LINK_LIFETIME`] by default and is single use; a session lives [`SESSION_LIFETIME`].
//! This module never logs a secret and knows no HTTP: the guard calls it.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use super::Server;

/// The tables sessions and login links live in, for the database owner's migrations
/// (the hub's `hub.db` has had them since its migration 5).
pub const SESSION_TABLES: &str = "
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
";

/// The token file in the data directory.
pub const TOKEN_FILE: &str = "owner.token";
/// How long a login link may wait to be opened, by default.
pub const LINK_LIFETIME: Duration = Duration::from_secs(120);
/// The longest lifetime a login link may be given.
pub const MAX_LINK_LIFETIME: Duration = Duration::from_secs(600);
/// How long a browser session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Why an owner credential operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerError {
    /// The token file could not be read or made.
    #[error("owner token {path}: {reason}")]
    Token {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The database failed.
    #[error("session storage: {0}")]
    Db(#[from] rusqlite::Error),
    /// No login link has this secret (the server, to name its `open` command).
    #[error("this login link is not valid: run `{}` for a new one", .0.open_command())]
    LinkUnknown(Server),
    /// The link was used already.
    #[error("this login link was already used (links are single use): run `{}` for a new one", .0.open_command())]
    LinkUsed(Server),
    /// The link expired.
    #[error("this login link expired: run `{}` for a new one", .0.open_command())]
    LinkExpired(Server),
    /// No session has this id (or the prefix is ambiguous).
    #[error("no session {0}")]
    NoSession(String),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> Result<String, OwnerError> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).map_err(|e| OwnerError::Invalid(format!("no randomness: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The owner token. Prints masked.
#[derive(Clone)]
pub struct OwnerToken {
    value: String,
    hash: [u8; 32],
}

impl std::fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("********")
    }
}

impl OwnerToken {
    fn from_text(path: &Path, text: &str) -> Result<Self, OwnerError> {
        let value = text.trim().to_string();
        if value.len() < 32 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(OwnerError::Token {
                path: path.to_path_buf(),
                reason: "not a token (expected 64 hex digits); delete it to make a new one".into(),
            });
        }
        Ok(Self {
            hash: sha256(&value),
            value,
        })
    }

    /// Reads `home/owner.token`, creating it (0600, exclusively) on first start. When two
    /// processes create it at once, one wins and the other reads the winner's token.
    pub fn load_or_create(home: &Path) -> Result<Self, OwnerError> {
        let path = home.join(TOKEN_FILE);
        let err = |reason: String| OwnerError::Token {
            path: path.clone(),
            reason,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => return Self::from_text(&path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e.to_string())),
        }
        let fresh = random_hex(32)?;
        match hearth_net::files::create_exclusive(&path, format!("{fresh}\n").as_bytes())
            .map_err(|e| err(e.to_string()))?
        {
            hearth_net::files::Created::Created => Self::from_text(&path, &fresh),
            hearth_net::files::Created::Existed => {
                let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
                Self::from_text(&path, &text)
            }
        }
    }

    /// Reads `home/owner.token` (for the CLI); an absent file means `server` never ran
    /// in `home`.
    pub fn read(home: &Path, server: Server) -> Result<Self, OwnerError> {
        let path = home.join(TOKEN_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| OwnerError::Token {
            path: path.clone(),
            reason: if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "absent: the {} has not run in this data directory yet (start `{}`)",
                    server.noun(),
                    server.start_command()
                )
            } else {
                e.to_string()
            },
        })?;
        Self::from_text(&path, &text)
    }

    /// The token itself, for the CLI's `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// Whether `given` is the token, compared in constant time (over hashes, so the
    /// time does not even depend on the given length).
    pub fn matches(&self, given: &str) -> bool {
        constant_time_eq(&sha256(given.trim()), &self.hash)
    }
}

/// A session just opened by a login link.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Its public id (for listing and ending).
    pub id: String,
    /// The secret the browser keeps in its cookie.
    pub token: String,
    /// When it ends, ms.
    pub expires_at: i64,
}

/// A session as the owner lists it (no secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Public id.
    pub id: String,
    /// When it was opened, ms.
    pub created_at: i64,
    /// When it was last used (to the minute), ms.
    pub last_used: i64,
    /// When it ends, ms.
    pub expires_at: i64,
    /// The browser's `User-Agent` when it logged in.
    pub user_agent: String,
}

/// Browser sessions and login links, in the tables of [`SESSION_TABLES`].
#[derive(Debug)]
pub struct OwnerSessions {
    conn: Mutex<Connection>,
    server: Server,
}

impl OwnerSessions {
    /// Sessions of `server` on `conn`, a connection to a database its owner opened
    /// (private file, WAL, `synchronous=FULL`) and migrated to [`SESSION_TABLES`].
    pub fn new(conn: Connection, server: Server) -> Self {
        Self {
            conn: Mutex::new(conn),
            server,
        }
    }

    /// Which server these sessions are for.
    pub fn server(&self) -> Server {
        self.server
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a login link secret valid for `ttl` (at most [`MAX_LINK_LIFETIME`]);
    /// returns it and when it expires (ms).
    pub fn create_link(&self, ttl: Duration) -> Result<(String, i64), OwnerError> {
        self.create_link_at(ttl, now_ms())
    }

    /// [`Self::create_link`] at a given time.
    pub fn create_link_at(&self, ttl: Duration, now: i64) -> Result<(String, i64), OwnerError> {
        let ttl = ttl.min(MAX_LINK_LIFETIME).as_millis() as i64;
        let secret = random_hex(32)?;
        let expires = now + ttl;
        let conn = self.lock();
        // Links nobody opened are forgotten a day after they expired.
        conn.execute(
            "DELETE FROM login_links WHERE expires_at < ?1",
            [now - 86_400_000],
        )?;
        conn.execute(
            "INSERT INTO login_links (hash, created_at, expires_at) VALUES (?1, ?2, ?3)",
            params![&sha256(&secret)[..], now, expires],
        )?;
        Ok((secret, expires))
    }

    /// Uses a login link (once) and opens a session.
    pub fn redeem_link(&self, secret: &str, user_agent: &str) -> Result<NewSession, OwnerError> {
        self.redeem_link_at(secret, user_agent, now_ms())
    }

    /// [`Self::redeem_link`] at a given time.
    pub fn redeem_link_at(
        &self,
        secret: &str,
        user_agent: &str,
        now: i64,
    ) -> Result<NewSession, OwnerError> {
        let hash = sha256(secret.trim());
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let row: Option<(i64, Option<i64>)> = tx
            .query_row(
                "SELECT expires_at, used_at FROM login_links WHERE hash = ?1",
                [&hash[..]],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match row {
            None => return Err(OwnerError::LinkUnknown(self.server)),
            Some((_, Some(_))) => return Err(OwnerError::LinkUsed(self.server)),
            Some((expires, None)) if expires <= now => {
                return Err(OwnerError::LinkExpired(self.server))
            }
            Some(_) => {}
        }
        tx.execute(
            "UPDATE login_links SET used_at = ?1 WHERE hash = ?2",
            params![now, &hash[..]],
        )?;
        let id = random_hex(8)?;
        let token = random_hex(32)?;
        let expires_at = now + SESSION_LIFETIME.as_millis() as i64;
        let agent: String = user_agent.chars().take(200).collect();
        tx.execute(
            "INSERT INTO owner_sessions (id, token_hash, created_at, last_used, expires_at, user_agent)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
            params![id, &sha256(&token)[..], now, expires_at, agent],
        )?;
        tx.commit()?;
        Ok(NewSession {
            id,
            token,
            expires_at,
        })
    }

    /// The id of the live session whose cookie secret is `token`, if any.
    pub fn check(&self, token: &str) -> Result<Option<String>, OwnerError> {
        self.check_at(token, now_ms())
    }

    /// [`Self::check`] at a given time.
    pub fn check_at(&self, token: &str, now: i64) -> Result<Option<String>, OwnerError> {
        let hash = sha256(token.trim());
        let conn = self.lock();
        let id: Option<String> = conn
            .query_row(
                "SELECT id FROM owner_sessions WHERE token_hash = ?1 AND expires_at > ?2",
                params![&hash[..], now],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(id) = &id {
            conn.execute(
                "UPDATE owner_sessions SET last_used = ?1 WHERE id = ?2 AND last_used < ?3",
                params![now, id, now - 60_000],
            )?;
        }
        Ok(id)
    }

    /// Live sessions, newest first.
    pub fn list(&self) -> Result<Vec<SessionInfo>, OwnerError> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT id, created_at, last_used, expires_at, user_agent FROM owner_sessions
             WHERE expires_at > ?1 ORDER BY created_at DESC, id",
        )?;
        let rows = stmt
            .query_map([now_ms()], |r| {
                Ok(SessionInfo {
                    id: r.get(0)?,
                    created_at: r.get(1)?,
                    last_used: r.get(2)?,
                    expires_at: r.get(3)?,
                    user_agent: r.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Ends the session with this id (or a unique prefix of at least 4 characters).
    pub fn end(&self, id: &str) -> Result<SessionInfo, OwnerError> {
        let want = id.trim().to_ascii_lowercase();
        let matching: Vec<SessionInfo> = self
            .list()?
            .into_iter()
            .filter(|s| s.id == want || (want.len() >= 4 && s.id.starts_with(&want)))
            .collect();
        let [one] = matching.as_slice() else {
            return Err(OwnerError::NoSession(id.to_string()));
        };
        self.lock()
            .execute("DELETE FROM owner_sessions WHERE id = ?1", [&one.id])?;
        Ok(one.clone())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Sessions on a fresh database file at `path`, as a database owner would open it.
    pub(crate) fn sessions(path: &Path) -> OwnerSessions {
        let conn = Connection::open(path).expect("open");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        conn.execute_batch(SESSION_TABLES).expect("tables");
        OwnerSessions::new(conn, Server::Hub)
    }

    #[test]
    fn token_is_created_once_private_and_compared_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = OwnerToken::load_or_create(dir.path()).expect("create");
        let b = OwnerToken::load_or_create(dir.path()).expect("reload");
        assert_eq!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 64);
        assert!(a.matches(b.expose()));
        assert!(!a.matches(&b.expose()[..63]));
        assert!(!a.matches(""));
        assert!(!format!("{a:?}").contains(a.expose()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn login_links_are_single_use_and_expire_and_sessions_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = sessions(&dir.path().join("owner.db"));
        let now = now_ms();
        let (link, expires) = s
            .create_link_at(Duration::from_secs(60), now)
            .expect("link");
        assert_eq!(expires, now + 60_000);
        let session = s.redeem_link_at(&link, "test", now + 1).expect("redeem");
        assert!(matches!(
            s.redeem_link_at(&link, "test", now + 2),
            Err(OwnerError::LinkUsed(Server::Hub))
        ));
        assert!(matches!(
            s.redeem_link_at("nope", "test", now + 2),
            Err(OwnerError::LinkUnknown(Server::Hub))
        ));
        let (late, _) = s.create_link_at(Duration::from_secs(1), now).expect("link");
        assert!(matches!(
            s.redeem_link_at(&late, "test", now + 1_000),
            Err(OwnerError::LinkExpired(Server::Hub))
        ));
        // A lifetime beyond the maximum is cut to it.
        let (_, capped) = s
            .create_link_at(Duration::from_secs(86_400), now)
            .expect("link");
        assert_eq!(capped, now + MAX_LINK_LIFETIME.as_millis() as i64);

        assert_eq!(
            s.check_at(&session.token, now + 5).expect("check"),
            Some(session.id.clone())
        );
        assert_eq!(s.check_at("wrong", now + 5).expect("check"), None);
        assert_eq!(
            s.check_at(&session.token, session.expires_at)
                .expect("check"),
            None,
            "expired"
        );
        let listed = s.list().expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].user_agent, "test");
        s.end(&session.id[..6]).expect("end");
        assert_eq!(s.check_at(&session.token, now + 5).expect("check"), None);
        assert!(matches!(s.end(&session.id), Err(OwnerError::NoSession(_))));
        // Only hashes are stored.
        let raw = std::fs::read(dir.path().join("owner.db")).expect("read");
        let wal = std::fs::read(dir.path().join("owner.db-wal")).unwrap_or_default();
        for secret in [&link, &session.token] {
            for bytes in [&raw, &wal] {
                assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
            }
        }
    }
}
