//! A plugin's key-value store, scoped to the plugin and one project (`plugin_kv` in
//! `hub.db`).
//!
//! A [`PluginKv`] is bound to its plugin when it is made; the project is named on every
//! call by the host (the project the tool runs for), never by the plugin, so a plugin
//! cannot read another plugin's keys nor another project's. The empty project id is the
//! plugin's own global space. Values are JSON. Blocking: call off the async threads.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvError {
    /// `hub.db` failed.
    #[error("plugin store: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` could not be opened.
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// A stored value is not JSON (written by something else).
    #[error("plugin store: key {key:?} holds a value that is not JSON")]
    Corrupt {
        /// The key.
        key: String,
    },
    /// A key or value over the limits.
    #[error("plugin store: {0}")]
    TooLarge(&'static str),
}

/// Longest key, in bytes.
pub const MAX_KEY: usize = 512;
/// Largest value, serialised, in bytes.
pub const MAX_VALUE: usize = 256 * 1024;

/// One plugin's store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PluginKv {
    plugin: String,
    conn: Arc<Mutex<Connection>>,
}

use crate::hubdb::now_ms;

impl PluginKv {
    /// The store of `plugin` in `db`.
    pub fn open(db: &Path, plugin: &str) -> Result<Self, KvError> {
        let conn = crate::hubdb::open(db, crate::hubdb::Durability::Normal)?;
        Ok(Self {
            plugin: plugin.to_string(),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        match self.conn.lock() {
            Ok(c) => c,
            Err(e) => e.into_inner(),
        }
    }

    /// The value of `key` in `project`'s space.
    pub fn get(&self, project: &str, key: &str) -> Result<Option<Value>, KvError> {
        let raw: Option<String> = self
            .conn()
            .query_row(
                "SELECT value FROM plugin_kv WHERE plugin = ?1 AND project = ?2 AND key = ?3",
                params![self.plugin, project, key],
                |r| r.get(0),
            )
            .optional()?;
        raw.map(|r| serde_json::from_str(&r).map_err(|_| KvError::Corrupt { key: key.into() }))
            .transpose()
    }

    /// Sets `key` in `project`'s space.
    pub fn set(&self, project: &str, key: &str, value: &Value) -> Result<(), KvError> {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(KvError::TooLarge("a key is 1 to 512 bytes"));
        }
        let raw = value.to_string();
        if raw.len() > MAX_VALUE {
            return Err(KvError::TooLarge("a value is at most 256 KiB"));
        }
        self.conn().execute(
            "INSERT INTO plugin_kv (plugin, project, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(plugin, project, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            params![self.plugin, project, key, raw, now_ms()],
        )?;
        Ok(())
    }

    /// Removes `key`; whether it was there.
    pub fn delete(&self, project: &str, key: &str) -> Result<bool, KvError> {
        let n = self.conn().execute(
            "DELETE FROM plugin_kv WHERE plugin = ?1 AND project = ?2 AND key = ?3",
            params![self.plugin, project, key],
        )?;
        Ok(n > 0)
    }

    /// Keys starting with `prefix` in `project`'s space, in key order, with their values.
    pub fn list(
        &self,
        project: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Value)>, KvError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT key, value FROM plugin_kv
             WHERE plugin = ?1 AND project = ?2 AND substr(key, 1, length(?3)) = ?3
             ORDER BY key LIMIT ?4",
        )?;
        let rows = stmt
            .query_map(params![self.plugin, project, prefix, limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(k, v)| match serde_json::from_str(&v) {
                Ok(v) => Ok((k, v)),
                Err(_) => Err(KvError::Corrupt { key: k }),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plugin_sees_only_its_own_keys_in_the_project_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("hub.db");
        let a = PluginKv::open(&db, "alpha").expect("open");
        let b = PluginKv::open(&db, "beta").expect("open");
        a.set("p1", "k", &json!({"n": 1})).expect("set");
        a.set("p1", "k2", &json!(2)).expect("set");
        a.set("p2", "k", &json!("other project")).expect("set");
        assert_eq!(a.get("p1", "k").expect("get"), Some(json!({"n": 1})));
        assert_eq!(a.get("p2", "k").expect("get"), Some(json!("other project")));
        assert_eq!(b.get("p1", "k").expect("get"), None, "another plugin's key");
        assert_eq!(
            a.list("p1", "k", 10).expect("list").len(),
            2,
            "prefix listing stays in the project"
        );
        a.set("p1", "k", &json!(3)).expect("overwrite");
        assert_eq!(a.get("p1", "k").expect("get"), Some(json!(3)));
        assert!(a.delete("p1", "k").expect("delete"));
        assert!(!a.delete("p1", "k").expect("delete twice"));
        assert!(matches!(
            a.set("p1", "", &json!(1)),
            Err(KvError::TooLarge(_))
        ));
        assert!(matches!(
            a.set("p1", "big", &json!("x".repeat(MAX_VALUE))),
            Err(KvError::TooLarge(_))
        ));
    }
}
