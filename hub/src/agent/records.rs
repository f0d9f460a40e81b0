//! What the agent has recorded in `hub.db`, read back for the API: conversations and
//! their messages per project (and whether one is archived), the audit log, daily usage,
//! project updates. Plain functions over a connection (see `Agent::records`), each list
//! returning one bounded page with the total it was cut from.
//!
//! Everything here was redacted when it was written (messages, audit rows); nothing is
//! decrypted or re-derived on the way out.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

/// One page of rows and the number of rows the filter matches.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPage<T> {
    /// The rows.
    pub rows: Vec<T>,
    /// How many rows match in all.
    pub total: u64,
}

/// `LIMIT`/`OFFSET` of a page, already bounded by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u32,
}

/// A conversation of a project.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// Its name within the project.
    pub name: String,
    /// Stored messages.
    pub messages: u64,
    /// First message, ms.
    pub started_at: i64,
    /// Last message, ms.
    pub last_at: i64,
    /// When it was archived, ms.
    pub archived_at: Option<i64>,
    /// The content parts of its first user message (as stored), which is what people
    /// recognise a conversation by.
    pub opening: Option<Value>,
}

/// The conversations of `project`, most recent first; archived ones only if `archived`,
/// else only the others.
pub fn conversations(
    conn: &Connection,
    project: &str,
    archived: bool,
    w: Window,
) -> rusqlite::Result<RowPage<Conversation>> {
    let from = "FROM (SELECT m.conversation AS name, count(*) AS n, min(m.created_at) AS first,
                       max(m.created_at) AS last, s.archived_at AS archived_at
                 FROM messages m LEFT JOIN conversation_state s
                   ON s.project = m.project AND s.conversation = m.conversation
                 WHERE m.project = ?1 GROUP BY m.conversation)
         WHERE (archived_at IS NOT NULL) = ?2";
    let total: i64 = conn.query_row(
        &format!("SELECT count(*) {from}"),
        params![project, archived],
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare(&format!(
        "SELECT name, n, first, last, archived_at,
                (SELECT o.content FROM messages o
                  WHERE o.project = ?1 AND o.conversation = name AND o.role = 'user'
                  ORDER BY o.id LIMIT 1)
         {from} ORDER BY last DESC, name LIMIT ?3 OFFSET ?4"
    ))?;
    let rows = stmt
        .query_map(params![project, archived, w.limit, w.offset], |r| {
            Ok(Conversation {
                name: r.get(0)?,
                messages: r.get::<_, i64>(1)? as u64,
                started_at: r.get(2)?,
                last_at: r.get(3)?,
                archived_at: r.get(4)?,
                opening: r
                    .get::<_, Option<String>>(5)?
                    .map(|raw| serde_json::from_str(&raw).unwrap_or(Value::String(raw))),
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(RowPage {
        rows,
        total: total as u64,
    })
}

/// Whether `project` has a conversation called `name`.
pub fn conversation_exists(conn: &Connection, project: &str, name: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM messages WHERE project = ?1 AND conversation = ?2 LIMIT 1",
            params![project, name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Archives (`true`) or restores a conversation. Its messages stay.
pub fn set_archived(
    conn: &Connection,
    project: &str,
    name: &str,
    archived: bool,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO conversation_state (project, conversation, archived_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(project, conversation) DO UPDATE SET archived_at = excluded.archived_at",
        params![project, name, archived.then_some(now)],
    )?;
    Ok(())
}

/// A stored message.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Row id, increasing.
    pub id: i64,
    /// `user` or `assistant`.
    pub role: String,
    /// The content parts as stored (JSON), or the raw text if it is not JSON.
    pub content: Value,
    /// When it was stored, ms.
    pub created_at: i64,
}

/// A conversation's messages, newest first (page backwards through the history).
pub fn messages(
    conn: &Connection,
    project: &str,
    name: &str,
    w: Window,
) -> rusqlite::Result<RowPage<StoredMessage>> {
    let total: i64 = conn.query_row(
        "SELECT count(*) FROM messages WHERE project = ?1 AND conversation = ?2",
        params![project, name],
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare(
        "SELECT id, role, content, created_at FROM messages
         WHERE project = ?1 AND conversation = ?2 ORDER BY id DESC LIMIT ?3 OFFSET ?4",
    )?;
    let rows = stmt
        .query_map(params![project, name, w.limit, w.offset], |r| {
            let raw: String = r.get(2)?;
            Ok(StoredMessage {
                id: r.get(0)?,
                role: r.get(1)?,
                content: serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
                created_at: r.get(3)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(RowPage {
        rows,
        total: total as u64,
    })
}

/// Which audit rows to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this project (id).
    pub project: Option<String>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only at or after, ms.
    pub since: Option<i64>,
    /// Only before, ms.
    pub until: Option<i64>,
}

/// One audit row.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// Row id, increasing.
    pub id: i64,
    /// When, ms.
    pub at: i64,
    /// Conversation.
    pub conversation: String,
    /// Project id.
    pub project: String,
    /// Tool name.
    pub tool: String,
    /// Arguments (redacted JSON).
    pub args: Value,
    /// What it returned (redacted).
    pub outcome: String,
    /// Whether it failed.
    pub is_error: bool,
}

/// The audit log, newest first.
pub fn audit(conn: &Connection, f: &AuditFilter, w: Window) -> rusqlite::Result<RowPage<AuditRow>> {
    let filter = "WHERE (?1 IS NULL OR project = ?1) AND (?2 IS NULL OR tool = ?2)
                  AND (?3 IS NULL OR at >= ?3) AND (?4 IS NULL OR at < ?4)";
    let args = params![f.project, f.tool, f.since, f.until];
    let total: i64 = conn.query_row(
        &format!("SELECT count(*) FROM audit_log {filter}"),
        args,
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare(&format!(
        "SELECT id, at, conversation, project, tool, args, outcome, is_error FROM audit_log
         {filter} ORDER BY id DESC LIMIT ?5 OFFSET ?6"
    ))?;
    let rows = stmt
        .query_map(
            params![f.project, f.tool, f.since, f.until, w.limit, w.offset],
            |r| {
                let raw: String = r.get(5)?;
                Ok(AuditRow {
                    id: r.get(0)?,
                    at: r.get(1)?,
                    conversation: r.get(2)?,
                    project: r.get(3)?,
                    tool: r.get(4)?,
                    args: serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
                    outcome: r.get(6)?,
                    is_error: r.get(7)?,
                })
            },
        )?
        .collect::<Result<_, _>>()?;
    Ok(RowPage {
        rows,
        total: total as u64,
    })
}

/// Which usage rows to read; days are `YYYY-MM-DD`, both ends included.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFilter {
    /// Only this project (id).
    pub project: Option<String>,
    /// Only this model.
    pub model: Option<String>,
    /// From this day.
    pub since: Option<String>,
    /// To this day.
    pub until: Option<String>,
}

/// Daily usage by model and project, newest day first.
pub fn usage(
    conn: &Connection,
    f: &UsageFilter,
    w: Window,
) -> rusqlite::Result<RowPage<super::usage::DailyUsage>> {
    let filter = "WHERE (?1 IS NULL OR project = ?1) AND (?2 IS NULL OR model = ?2)
                  AND (?3 IS NULL OR day >= ?3) AND (?4 IS NULL OR day <= ?4)";
    let total: i64 = conn.query_row(
        &format!("SELECT count(*) FROM usage_daily {filter}"),
        params![f.project, f.model, f.since, f.until],
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare(&format!(
        "SELECT day, model, project, input_tokens, output_tokens, cached_tokens, requests,
                cost_micro_usd
         FROM usage_daily {filter} ORDER BY day DESC, model, project LIMIT ?5 OFFSET ?6"
    ))?;
    let rows = stmt
        .query_map(
            params![f.project, f.model, f.since, f.until, w.limit, w.offset],
            |r| {
                Ok(super::usage::DailyUsage {
                    day: r.get(0)?,
                    model: r.get(1)?,
                    project: r.get(2)?,
                    input_tokens: r.get(3)?,
                    output_tokens: r.get(4)?,
                    cached_tokens: r.get(5)?,
                    requests: r.get(6)?,
                    cost_micro_usd: r.get(7)?,
                })
            },
        )?
        .collect::<Result<_, _>>()?;
    Ok(RowPage {
        rows,
        total: total as u64,
    })
}

/// A project update ("what happened").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// Row id, increasing.
    pub id: i64,
    /// Project id.
    pub project: String,
    /// The task it is about, if any.
    pub task: Option<String>,
    /// The text.
    pub text: String,
    /// When, ms.
    pub created_at: i64,
}

/// Project updates, newest first, of one project or all.
pub fn updates(
    conn: &Connection,
    project: Option<&str>,
    w: Window,
) -> rusqlite::Result<RowPage<Update>> {
    let total: i64 = conn.query_row(
        "SELECT count(*) FROM updates WHERE (?1 IS NULL OR project = ?1)",
        params![project],
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare(
        "SELECT id, project, task, text, created_at FROM updates
         WHERE (?1 IS NULL OR project = ?1) ORDER BY id DESC LIMIT ?2 OFFSET ?3",
    )?;
    let rows = stmt
        .query_map(params![project, w.limit, w.offset], |r| {
            Ok(Update {
                id: r.get(0)?,
                project: r.get(1)?,
                task: r.get(2)?,
                text: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(RowPage {
        rows,
        total: total as u64,
    })
}
