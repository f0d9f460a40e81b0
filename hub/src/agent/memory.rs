//! Rolling per-conversation summaries, keyed by (project, conversation): a conversation
//! belongs to one project, and nothing of one project's conversation reaches another's
//! prompt.
//!
//! Once about [`SUMMARIZE_AFTER_TOKENS`] tokens (estimated at four characters each) have
//! accumulated since the last summary, everything but the most recent
//! [`KEEP_RECENT`] messages is folded into the conversation's summary, which is capped at
//! [`MAX_SUMMARY_CHARS`]. The model then sees the summary in its system prompt and only
//! the messages after it. The cut never separates a tool call from its result: the kept
//! part starts at a user's own message. Summarising is best effort; a failure is logged
//! and the turn it follows has already succeeded.

use rusqlite::{params, Connection, OptionalExtension};

/// Summarise once this many tokens accumulated since the last summary.
pub const SUMMARIZE_AFTER_TOKENS: usize = 4_000;
/// Messages always kept verbatim.
pub const KEEP_RECENT: usize = 20;
/// Longest summary kept.
pub const MAX_SUMMARY_CHARS: usize = 8_000;

/// The conversation's summary and the id of the last message it covers.
pub fn summary(
    conn: &Connection,
    project: &str,
    conversation: &str,
) -> rusqlite::Result<Option<(String, i64)>> {
    conn.query_row(
        "SELECT summary, covered_until FROM conversation_summaries
         WHERE project = ?1 AND conversation = ?2",
        [project, conversation],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// The id of the newest message that existed when the summary was last made: tokens
/// accumulate from there.
pub fn seen_until(conn: &Connection, project: &str, conversation: &str) -> rusqlite::Result<i64> {
    Ok(conn
        .query_row(
            "SELECT seen_until FROM conversation_summaries WHERE project = ?1 AND conversation = ?2",
            [project, conversation],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// Stores a new summary, capped.
pub fn store(
    conn: &Connection,
    project: &str,
    conversation: &str,
    text: &str,
    covered_until: i64,
    seen_until: i64,
    now: i64,
) -> rusqlite::Result<()> {
    let capped: String = text.chars().take(MAX_SUMMARY_CHARS).collect();
    conn.execute(
        "INSERT INTO conversation_summaries
           (project, conversation, summary, covered_until, seen_until, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(project, conversation) DO UPDATE SET summary = excluded.summary,
           covered_until = excluded.covered_until, seen_until = excluded.seen_until,
           updated_at = excluded.updated_at",
        params![
            project,
            conversation,
            capped,
            covered_until,
            seen_until,
            now
        ],
    )?;
    Ok(())
}

/// A stored message: id, role and raw JSON content.
pub type Row = (i64, String, String);

/// What to fold into the summary now, if it is due: the rows to summarise and the id
/// the new summary will cover up to. `rows` are the messages after the current summary;
/// only those newer than `since` (the newest message when it was made) count as
/// accumulated.
pub fn due(rows: &[Row], since: i64) -> Option<(Vec<Row>, i64)> {
    let tokens: usize = rows
        .iter()
        .filter(|(id, _, _)| *id > since)
        .map(|(_, _, c)| c.chars().count() / 4)
        .sum();
    if tokens < SUMMARIZE_AFTER_TOKENS || rows.len() <= KEEP_RECENT {
        return None;
    }
    // Keep at least the last KEEP_RECENT, starting at a user's own message (not a tool
    // result), so no tool call loses its answer.
    let mut cut = rows.len() - KEEP_RECENT;
    while cut > 0 && !is_user_text(&rows[cut]) {
        cut -= 1;
    }
    if cut == 0 {
        return None;
    }
    Some((rows[..cut].to_vec(), rows[cut - 1].0))
}

fn is_user_text(row: &Row) -> bool {
    row.1 == "user" && row.2.contains("\"type\":\"text\"")
}

/// The prompt that asks the model to update a summary.
pub fn prompt(previous: Option<&str>, rows: &[Row]) -> String {
    let mut p = String::from(
        "Update the running summary of this conversation. Keep facts, decisions, open \
         questions and anything the user asked to remember; drop chit-chat. Answer with the \
         summary only.\n\n",
    );
    if let Some(prev) = previous {
        p.push_str("Summary so far:\n");
        p.push_str(prev);
        p.push_str("\n\n");
    }
    p.push_str("New messages:\n");
    for (_, role, content) in rows {
        p.push_str(role);
        p.push_str(": ");
        p.push_str(&content.chars().take(4_000).collect::<String>());
        p.push('\n');
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: i64, len: usize) -> Row {
        (
            id,
            "user".into(),
            format!("[{{\"type\":\"text\",\"text\":\"{}\"}}]", "x".repeat(len)),
        )
    }
    fn tool_result(id: i64) -> Row {
        (
            id,
            "user".into(),
            "[{\"type\":\"tool_result\",\"id\":\"t\",\"content\":\"ok\"}]".into(),
        )
    }
    fn assistant(id: i64) -> Row {
        (
            id,
            "assistant".into(),
            "[{\"type\":\"tool_use\",\"id\":\"t\"}]".into(),
        )
    }

    #[test]
    fn not_due_until_enough_tokens_and_messages() {
        let few: Vec<Row> = (1..=10).map(|i| user(i, 4_000)).collect();
        assert!(due(&few, 0).is_none(), "10 messages are all recent");
        let small: Vec<Row> = (1..=40).map(|i| user(i, 10)).collect();
        assert!(due(&small, 0).is_none(), "not enough tokens");
    }

    #[test]
    fn the_cut_keeps_twenty_and_never_splits_a_tool_round() {
        let mut rows: Vec<Row> = (1..=30).map(|i| user(i, 800)).collect();
        let (old, covered) = due(&rows, 0).expect("due");
        assert_eq!((old.len(), covered), (10, 10));
        // Make 10 a tool call and 11 its result: the kept part now starts at user
        // message 9, so the summary covers up to 8.
        rows[9] = assistant(10);
        rows[10] = tool_result(11);
        let (old, covered) = due(&rows, 0).expect("due");
        assert_eq!((old.len(), covered), (8, 8));
        assert!(prompt(Some("earlier"), &old).contains("Summary so far:\nearlier"));
        // Right after a summary, nothing new has accumulated.
        assert!(due(&rows, 30).is_none());
    }
}
