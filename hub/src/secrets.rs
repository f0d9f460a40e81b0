//! Secrets at rest: provider keys and project secrets, encrypted with AES-256-GCM.
//!
//! The key is derived (HKDF-SHA256) from a 32-byte server secret in
//! `$HEARTH_HOME/server.secret` (mode 0600, created on first start, never logged). Each
//! value has its own random 96-bit nonce, and its slot (`scope`, `name`) is bound in as
//! associated data, so a ciphertext copied into another slot does not decrypt.
//! [`SecretValue`] prints as `********`; [`Redactor`] scrubs known values out of text
//! (tool output, and every log line through [`RedactingStderr`]) before it goes anywhere.
//! This module never logs a value.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
};

use aes_gcm::{
    aead::{Aead, KeyInit, Payload},
    Aes256Gcm, Nonce,
};
use rusqlite::{params, Connection, OptionalExtension};

/// What a masked secret shows.
pub const MASK: &str = "********";

/// Why a secret operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The server secret file could not be read or created.
    #[error("server secret {path}: {reason}")]
    ServerSecret {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `hub.db` could not be opened.
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// The database failed.
    #[error("secret storage: {0}")]
    Db(#[from] rusqlite::Error),
    /// Decryption failed: wrong server secret or tampered data.
    #[error("secret {scope}/{name} cannot be decrypted (was server.secret replaced?)")]
    Decrypt {
        /// Its scope.
        scope: String,
        /// Its name.
        name: String,
    },
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
}

/// A secret value: shown masked, revealed only on purpose.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value itself, for the one place that needs it (an HTTP header, say).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(MASK)
    }
}

impl std::fmt::Display for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(MASK)
    }
}

/// Reads the server secret, creating it (0600, exclusively) on first start. When two
/// processes create it at once, one wins and the other reads the winner's secret, so
/// both derive the same key.
fn load_or_create_server_secret(path: &Path) -> Result<[u8; 32], SecretError> {
    let err = |reason: String| SecretError::ServerSecret {
        path: path.to_path_buf(),
        reason,
    };
    let read = || match fs::read(path) {
        Ok(bytes) => bytes
            .as_slice()
            .try_into()
            .map(Some)
            .map_err(|_| err(format!("{} bytes, expected 32", bytes.len()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(err(e.to_string())),
    };
    if let Some(secret) = read()? {
        return Ok(secret);
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| err(e.to_string()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        hearth_net::files::ensure_private_dir(dir).map_err(|e| err(e.to_string()))?;
    }
    match hearth_net::files::create_exclusive(path, &secret).map_err(|e| err(e.to_string()))? {
        hearth_net::files::Created::Created => Ok(secret),
        // Lost a race with another process: its secret is the one.
        hearth_net::files::Created::Existed => {
            read()?.ok_or_else(|| err("vanished right after it was created".into()))
        }
    }
}

/// Encrypted secrets in `hub.db`.
pub struct SecretStore {
    cipher: Aes256Gcm,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretStore")
    }
}

fn aad(scope: &str, name: &str) -> Vec<u8> {
    format!("hearth-secret/1\0{scope}\0{name}").into_bytes()
}

impl SecretStore {
    /// Opens the store in `db`, keyed by the server secret at `secret_file`.
    pub fn open(db: &Path, secret_file: &Path) -> Result<Self, SecretError> {
        let server_secret = load_or_create_server_secret(secret_file)?;
        let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"hearth"), &server_secret);
        let mut key = [0u8; 32];
        hk.expand(b"secrets/aes-256-gcm/1", &mut key)
            .map_err(|e| SecretError::Invalid(format!("key derivation: {e}")))?;
        let cipher =
            Aes256Gcm::new_from_slice(&key).map_err(|e| SecretError::Invalid(e.to_string()))?;
        let conn = crate::hubdb::open(db, crate::hubdb::Durability::Full)?;
        Ok(Self {
            cipher,
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores (or replaces) a secret.
    pub fn set(&self, scope: &str, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        if name.is_empty() || name.len() > 128 {
            return Err(SecretError::Invalid(
                "a secret name is 1-128 characters".into(),
            ));
        }
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce)
            .map_err(|e| SecretError::Invalid(format!("randomness: {e}")))?;
        let ciphertext = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: value.expose().as_bytes(),
                    aad: &aad(scope, name),
                },
            )
            .map_err(|_| SecretError::Invalid("encryption failed".into()))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        self.lock().execute(
            "INSERT INTO secrets (scope, name, nonce, ciphertext, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(scope, name) DO UPDATE SET nonce = excluded.nonce,
               ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
            params![scope, name, &nonce[..], ciphertext, now],
        )?;
        Ok(())
    }

    /// Reads a secret.
    pub fn get(&self, scope: &str, name: &str) -> Result<Option<SecretValue>, SecretError> {
        let row: Option<(Vec<u8>, Vec<u8>)> = self
            .lock()
            .query_row(
                "SELECT nonce, ciphertext FROM secrets WHERE scope = ?1 AND name = ?2",
                params![scope, name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((nonce, ciphertext)) = row else {
            return Ok(None);
        };
        let fail = || SecretError::Decrypt {
            scope: scope.to_string(),
            name: name.to_string(),
        };
        if nonce.len() != 12 {
            return Err(fail());
        }
        let plain = self
            .cipher
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &ciphertext,
                    aad: &aad(scope, name),
                },
            )
            .map_err(|_| fail())?;
        String::from_utf8(plain)
            .map(|s| Some(SecretValue(s)))
            .map_err(|_| fail())
    }

    /// Names of the secrets in `scope` (values stay hidden).
    pub fn names(&self, scope: &str) -> Result<Vec<String>, SecretError> {
        let conn = self.lock();
        let mut stmt = conn.prepare("SELECT name FROM secrets WHERE scope = ?1 ORDER BY name")?;
        let names = stmt
            .query_map([scope], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(names)
    }

    /// Deletes a secret; returns whether it existed.
    pub fn delete(&self, scope: &str, name: &str) -> Result<bool, SecretError> {
        Ok(self.lock().execute(
            "DELETE FROM secrets WHERE scope = ?1 AND name = ?2",
            params![scope, name],
        )? > 0)
    }

    /// A redactor knowing every stored value (of every scope).
    pub fn redactor(&self) -> Result<Redactor, SecretError> {
        let slots: Vec<(String, String)> = {
            let conn = self.lock();
            let mut stmt = conn.prepare("SELECT scope, name FROM secrets")?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            rows
        };
        let mut values = Vec::new();
        for (scope, name) in slots {
            if let Some(v) = self.get(&scope, &name)? {
                values.push(v);
            }
        }
        Ok(Redactor::new(values))
    }
}

/// Replaces known secret values in text with `[REDACTED]`.
#[derive(Clone, Default)]
pub struct Redactor {
    values: Vec<SecretValue>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} values)", self.values.len())
    }
}

impl Redactor {
    /// A redactor for these values; values shorter than 4 characters are ignored (they
    /// would match ordinary text).
    pub fn new(values: Vec<SecretValue>) -> Self {
        let mut values: Vec<SecretValue> = values
            .into_iter()
            .filter(|v| v.0.chars().count() >= 4)
            .collect();
        // Longest first, so a value containing another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.0.len()));
        Self { values }
    }

    /// `text` with every known value replaced, in its plain form and in its
    /// JSON-escaped form (a value with a quote, backslash or control character is
    /// written differently inside a JSON string).
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            let plain = v.expose();
            if out.contains(plain) {
                out = out.replace(plain, "[REDACTED]");
            }
            let escaped = json_escaped(plain);
            if escaped != plain && out.contains(&escaped) {
                out = out.replace(&escaped, "[REDACTED]");
            }
        }
        out
    }

    /// `value` with every string in it (keys included) redacted.
    pub fn redact_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        if self.values.is_empty() {
            return value.clone();
        }
        match value {
            Value::String(s) => Value::String(self.redact(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.redact_json(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (self.redact(k), self.redact_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// `s` as it appears inside a JSON string literal (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(s)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn racing_hub_processes_derive_the_same_server_secret() {
        for _round in 0..20 {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("home").join("server.secret");
            let barrier = std::sync::Barrier::new(8);
            let secrets: Vec<[u8; 32]> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            load_or_create_server_secret(&path)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread").expect("secret"))
                    .collect()
            });
            assert!(secrets.windows(2).all(|w| w[0] == w[1]));
            assert_eq!(
                load_or_create_server_secret(&path).expect("reload"),
                secrets[0]
            );
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
                assert_eq!(mode, 0o600);
            }
        }
    }

    fn store(dir: &tempfile::TempDir) -> SecretStore {
        SecretStore::open(
            &dir.path().join("hub.db"),
            &dir.path().join("server.secret"),
        )
        .expect("open")
    }

    #[test]
    fn round_trip_masking_and_file_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(&dir);
        let key = SecretValue::new("sk-ant-very-secret-123");
        s.set("provider", "anthropic", &key).expect("set");
        assert_eq!(
            s.get("provider", "anthropic").expect("get"),
            Some(key.clone())
        );
        assert_eq!(format!("{key:?} {key}"), "******** ********");
        assert_eq!(s.names("provider").expect("names"), ["anthropic"]);
        // Stored encrypted: the plaintext is nowhere in the database file.
        let raw = std::fs::read(dir.path().join("hub.db")).expect("read");
        assert!(!raw
            .windows(key.expose().len())
            .any(|w| w == key.expose().as_bytes()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("server.secret"))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Reopening with the same server secret reads it back.
        drop(s);
        assert_eq!(
            store(&dir).get("provider", "anthropic").expect("get"),
            Some(key)
        );
    }

    #[test]
    fn tampering_moving_or_a_new_server_secret_fail_clearly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(&dir);
        s.set("provider", "openai", &SecretValue::new("sk-openai-abc"))
            .expect("set");
        // Copy the ciphertext into another slot: associated data no longer matches.
        s.lock()
            .execute(
                "INSERT INTO secrets SELECT 'project-x', name, nonce, ciphertext, updated_at FROM secrets",
                [],
            )
            .expect("copy");
        assert!(matches!(
            s.get("project-x", "openai"),
            Err(SecretError::Decrypt { .. })
        ));
        drop(s);
        std::fs::remove_file(dir.path().join("server.secret")).expect("rm");
        let s = store(&dir);
        let err = s.get("provider", "openai").expect_err("new server secret");
        assert!(err.to_string().contains("cannot be decrypted"), "{err}");
        assert!(s.delete("provider", "openai").expect("delete"));
        assert_eq!(s.get("provider", "openai").expect("get"), None);
    }

    #[test]
    fn redaction_of_text_and_log_lines() {
        let r = Redactor::new(vec![
            SecretValue::new("hunter2hunter2"),
            SecretValue::new("abc"),
        ]);
        assert_eq!(
            r.redact("token=hunter2hunter2; abc stays"),
            "token=[REDACTED]; abc stays"
        );
    }

    #[test]
    fn redaction_covers_json_escaped_values_and_json_trees() {
        let secret = "pa\"ss\\word\n42";
        let r = Redactor::new(vec![SecretValue::new(secret)]);
        let as_json = serde_json::json!({ "password": secret }).to_string();
        assert!(!as_json.contains(secret), "escaped differently in JSON");
        let clean = r.redact(&as_json);
        assert!(clean.contains("[REDACTED]"), "{clean}");
        assert!(!clean.contains("ss\\\\word"), "{clean}");
        let tree = serde_json::json!({ "args": [{ "text": format!("key {secret} end") }], "n": 1 });
        let clean = r.redact_json(&tree);
        assert_eq!(clean["args"][0]["text"], "key [REDACTED] end");
        assert_eq!(clean["n"], 1);
    }
}

/// The redactor every log line passes through (see [`RedactingStderr`]).
fn log_redactor() -> &'static std::sync::RwLock<Redactor> {
    static LOG: std::sync::OnceLock<std::sync::RwLock<Redactor>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| std::sync::RwLock::new(Redactor::default()))
}

/// Sets the values scrubbed from log lines.
pub fn set_log_redactor(r: Redactor) {
    if let Ok(mut l) = log_redactor().write() {
        *l = r;
    }
}

/// A `tracing` writer: each log line goes to stderr with known secret values redacted.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedactingStderr;

/// One log line being written; redacted and written out when dropped.
#[derive(Debug, Default)]
pub struct RedactingLine {
    buf: Vec<u8>,
}

impl std::io::Write for RedactingLine {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactingLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.buf);
        let clean = log_redactor()
            .read()
            .map(|r| r.redact(&text))
            .unwrap_or_else(|_| text.into_owned());
        let _ = std::io::stderr().write_all(clean.as_bytes());
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingLine;
    fn make_writer(&'a self) -> Self::Writer {
        RedactingLine::default()
    }
}
