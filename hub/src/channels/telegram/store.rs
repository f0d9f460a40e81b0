//! The Telegram channel's rows in `hub.db`: the allowed chats (`channel_chats`, channel
//! `telegram`: each bound to a project by id, with its conversation number and whether
//! it takes notifications) and the channel's state (`channel_state` row `telegram`: the
//! owner's `enabled` switch, and as JSON the poll offset, the bot's name, the last error
//! and the chats lately refused).
//!
//! The API, `hearth-hub telegram …` and the running channel all go through here. The
//! state's JSON has one writer, the poller; `enabled` and the chats are the owner's.
//! Blocking calls (rusqlite): callers run them off the async threads. Never holds the
//! token (the secret store does).

use std::{
    path::Path,
    sync::{Mutex, MutexGuard},
};

use hearth_sync::DocId;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::hubdb::now_ms;

/// The channel's name in `channel_chats` and `channel_state`.
pub const CHANNEL: &str = "telegram";

/// How many refused chats the state remembers.
const KEEP_REFUSED: usize = 5;

/// Why the channel's rows could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// `hub.db` failed.
    #[error("hub database: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` could not be opened.
    #[error(transparent)]
    Open(#[from] crate::hubdb::HubDbError),
    /// A stored value is unreadable.
    #[error("stored Telegram state is unreadable: {0}")]
    Corrupt(String),
}

/// A chat the owner allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedChat {
    /// Telegram's chat id.
    pub chat: i64,
    /// The owner's name for it.
    pub label: String,
    /// The project its messages work in (`None`: the hub's general project).
    pub project: Option<DocId>,
    /// The number of its current conversation (`telegram-<chat>-<n>`), bumped by `/new`.
    pub conversation: i64,
    /// Whether it receives notifications.
    pub notify: bool,
    /// When it was allowed, ms.
    pub created_at: i64,
    /// When it last changed, ms.
    pub updated_at: i64,
}

impl AllowedChat {
    /// Its current conversation's name.
    pub fn conversation_name(&self) -> String {
        conversation_name(self.chat, self.conversation)
    }
}

/// The name of chat `chat`'s conversation number `n`.
pub fn conversation_name(chat: i64, n: i64) -> String {
    format!("telegram-{chat}-{n}")
}

/// A chat that wrote and was not answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// Its id (what the owner allows).
    pub chat: i64,
    /// Its title, `@username` or first name, as Telegram gave it.
    pub name: String,
    /// When, ms.
    pub at: i64,
}

/// What the poller keeps between runs (JSON in `channel_state.state`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollState {
    /// The next `getUpdates` offset: every update below it was handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// The bot's `@username` when it last started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_username: Option<String>,
    /// The last error, cleared by the next success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The chats lately refused, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
}

/// The channel's row: the owner's switch and the poller's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelState {
    /// The owner's switch (on until turned off).
    pub enabled: bool,
    /// The poller's state.
    pub poll: PollState,
}

/// The channel's rows in `hub.db`.
pub struct ChannelStore {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for ChannelStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelStore").finish_non_exhaustive()
    }
}

/// A `channel_chats` row as stored: chat, label, project, conversation, notify,
/// created, updated.
type ChatRow = (String, String, Option<String>, i64, bool, i64, i64);

const CHAT_COLUMNS: &str = "chat, label, project, conversation, notify, created_at, updated_at";

fn read_chat(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChatRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn decode_chat(
    (chat, label, project, conversation, notify, created_at, updated_at): ChatRow,
) -> Result<AllowedChat, StoreError> {
    Ok(AllowedChat {
        chat: chat
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("chat id {chat:?}")))?,
        label,
        project: project
            .map(|p| {
                p.parse::<DocId>()
                    .map_err(|_| StoreError::Corrupt(format!("project {p:?}")))
            })
            .transpose()?,
        conversation,
        notify,
        created_at,
        updated_at,
    })
}

impl ChannelStore {
    /// Opens the channel's rows in `db` (migrated by `hubdb`).
    pub fn open(db: &Path) -> Result<Self, StoreError> {
        let conn = crate::hubdb::open(db, crate::hubdb::Durability::Full)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock left no half-written state (SQLite rolls back).
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every allowed chat, by id.
    pub fn chats(&self) -> Result<Vec<AllowedChat>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {CHAT_COLUMNS} FROM channel_chats WHERE channel = ?1 ORDER BY chat"
        ))?;
        let rows = stmt
            .query_map([CHANNEL], read_chat)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(decode_chat).collect()
    }

    /// Chat `chat`, if it is allowed.
    pub fn chat(&self, chat: i64) -> Result<Option<AllowedChat>, StoreError> {
        let row = self
            .conn()
            .query_row(
                &format!(
                    "SELECT {CHAT_COLUMNS} FROM channel_chats WHERE channel = ?1 AND chat = ?2"
                ),
                params![CHANNEL, chat.to_string()],
                read_chat,
            )
            .optional()?;
        row.map(decode_chat).transpose()
    }

    /// Allows `chat` in `project` (or changes it). A label or notify flag not given
    /// stays as it was (new: no label, notifications on); the conversation number stays.
    pub fn allow(
        &self,
        chat: i64,
        project: DocId,
        label: Option<&str>,
        notify: Option<bool>,
    ) -> Result<AllowedChat, StoreError> {
        let now = now_ms();
        self.conn().execute(
            "INSERT INTO channel_chats (channel, chat, label, project, notify, created_at, updated_at)
             VALUES (?1, ?2, COALESCE(?3, ''), ?4, COALESCE(?5, 1), ?6, ?6)
             ON CONFLICT(channel, chat) DO UPDATE SET
               label = COALESCE(?3, label), project = ?4, notify = COALESCE(?5, notify),
               updated_at = ?6",
            params![CHANNEL, chat.to_string(), label, project.to_string(), notify, now],
        )?;
        self.chat(chat)?
            .ok_or_else(|| StoreError::Corrupt(format!("chat {chat} vanished")))
    }

    /// Takes `chat` off the list; whether it was on it.
    pub fn deny(&self, chat: i64) -> Result<bool, StoreError> {
        Ok(self.conn().execute(
            "DELETE FROM channel_chats WHERE channel = ?1 AND chat = ?2",
            params![CHANNEL, chat.to_string()],
        )? > 0)
    }

    /// Moves `chat` to a fresh conversation; its new number (`None`: not allowed).
    pub fn next_conversation(&self, chat: i64) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "UPDATE channel_chats SET conversation = conversation + 1, updated_at = ?3
                 WHERE channel = ?1 AND chat = ?2 RETURNING conversation",
                params![CHANNEL, chat.to_string(), now_ms()],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The channel's row (defaults when it has none yet: enabled, nothing kept).
    pub fn state(&self) -> Result<ChannelState, StoreError> {
        let row: Option<(bool, String)> = self
            .conn()
            .query_row(
                "SELECT enabled, state FROM channel_state WHERE channel = ?1",
                [CHANNEL],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match row {
            None => Ok(ChannelState {
                enabled: true,
                poll: PollState::default(),
            }),
            Some((enabled, json)) => Ok(ChannelState {
                enabled,
                poll: serde_json::from_str(&json)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
            }),
        }
    }

    /// Turns the channel on or off.
    pub fn set_enabled(&self, enabled: bool) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO channel_state (channel, enabled, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT(channel) DO UPDATE SET enabled = ?2, updated_at = ?3",
            params![CHANNEL, enabled, now_ms()],
        )?;
        Ok(())
    }

    /// Changes the poller's state with `change` (read and written in one transaction).
    pub fn update_poll(
        &self,
        change: impl FnOnce(&mut PollState),
    ) -> Result<PollState, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let json: Option<String> = tx
            .query_row(
                "SELECT state FROM channel_state WHERE channel = ?1",
                [CHANNEL],
                |r| r.get(0),
            )
            .optional()?;
        // An unreadable state is replaced rather than blocking the channel for good.
        let mut poll: PollState = json
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default();
        change(&mut poll);
        let json = serde_json::to_string(&poll).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        tx.execute(
            "INSERT INTO channel_state (channel, state, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT(channel) DO UPDATE SET state = ?2, updated_at = ?3",
            params![CHANNEL, json, now_ms()],
        )?;
        tx.commit()?;
        Ok(poll)
    }

    /// Remembers that `chat` wrote and was refused (the newest few, one entry per chat).
    pub fn record_refused(&self, refused: Refused) -> Result<(), StoreError> {
        self.update_poll(|p| {
            p.refused.retain(|r| r.chat != refused.chat);
            p.refused.insert(0, refused);
            p.refused.truncate(KEEP_REFUSED);
        })
        .map(|_| ())
    }

    /// A number that changes whenever another connection commits to `hub.db`
    /// (`PRAGMA data_version`): the channel reloads its settings when it moves.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, ChannelStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = ChannelStore::open(&dir.path().join("hub.db")).expect("open");
        (dir, s)
    }

    fn project() -> DocId {
        DocId::random()
    }

    #[test]
    fn chats_are_allowed_changed_and_denied() {
        let (_d, s) = store();
        let (p, q) = (project(), project());
        assert_eq!(s.chat(42).expect("read"), None);
        let c = s.allow(42, p, Some("me"), None).expect("allow");
        assert_eq!(
            (c.label.as_str(), c.project, c.notify, c.conversation),
            ("me", Some(p), true, 1)
        );
        assert_eq!(c.conversation_name(), "telegram-42-1");
        // Rebinding keeps the label, the conversation and (unless given) notify.
        assert_eq!(s.next_conversation(42).expect("bump"), Some(2));
        let c = s.allow(42, q, None, Some(false)).expect("change");
        assert_eq!(
            (c.label.as_str(), c.project, c.notify, c.conversation),
            ("me", Some(q), false, 2)
        );
        s.allow(-1001234, p, None, None).expect("a group");
        let ids: Vec<i64> = s.chats().expect("list").iter().map(|c| c.chat).collect();
        assert_eq!(ids.len(), 2);
        assert!(s.deny(42).expect("deny"));
        assert!(!s.deny(42).expect("again"));
        assert_eq!(s.next_conversation(42).expect("bump"), None);
        assert_eq!(
            s.chat(-1001234).expect("read").map(|c| c.chat),
            Some(-1001234)
        );
    }

    #[test]
    fn state_keeps_offset_switch_and_the_last_refused() {
        let (_d, s) = store();
        assert!(s.state().expect("state").enabled);
        s.update_poll(|p| p.offset = Some(77)).expect("offset");
        s.set_enabled(false).expect("off");
        let st = s.state().expect("state");
        assert_eq!((st.enabled, st.poll.offset), (false, Some(77)));
        for chat in 0..8 {
            s.record_refused(Refused {
                chat: chat % 6,
                name: format!("c{chat}"),
                at: chat,
            })
            .expect("refused");
        }
        let refused = s.state().expect("state").poll.refused;
        assert_eq!(refused.len(), KEEP_REFUSED);
        // Newest first, one entry per chat.
        assert_eq!(
            refused[0],
            Refused {
                chat: 1,
                name: "c7".into(),
                at: 7
            }
        );
        assert_eq!(refused[1].chat, 0);
        assert_eq!(s.state().expect("state").poll.offset, Some(77));
    }
}
