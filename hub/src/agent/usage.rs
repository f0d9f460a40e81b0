//! Daily usage rollups: input, output and cached tokens, requests and estimated cost,
//! per day, model and project, in `hub.db` (table `usage_daily`, created by `hubdb`).

use rusqlite::{params, Connection};

use super::provider::Usage;

/// USD per million tokens (input, output, cached input) for models whose price is known.
fn price(model: &str) -> (f64, f64, f64) {
    let m = model.to_ascii_lowercase();
    if m.contains("opus") {
        (15.0, 75.0, 1.5)
    } else if m.contains("sonnet") {
        (3.0, 15.0, 0.3)
    } else if m.contains("haiku") {
        (0.8, 4.0, 0.08)
    } else if m.contains("gpt-4o-mini") {
        (0.15, 0.6, 0.075)
    } else if m.contains("gpt-4o") {
        (2.5, 10.0, 1.25)
    } else {
        // Local and unknown models: no estimate rather than a wrong one.
        (0.0, 0.0, 0.0)
    }
}

/// Estimated cost of one request, in millionths of a dollar.
pub fn cost_micro_usd(model: &str, u: &Usage) -> i64 {
    let (i, o, c) = price(model);
    (u.input_tokens as f64 * i + u.output_tokens as f64 * o + u.cache_read_tokens as f64 * c)
        .round() as i64
}

/// Adds one request to today's rollup.
pub fn record(
    conn: &Connection,
    day: &str,
    model: &str,
    project: &str,
    u: &Usage,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO usage_daily (day, model, project, input_tokens, output_tokens, cached_tokens, requests, cost_micro_usd)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)
         ON CONFLICT(day, model, project) DO UPDATE SET
           input_tokens = input_tokens + excluded.input_tokens,
           output_tokens = output_tokens + excluded.output_tokens,
           cached_tokens = cached_tokens + excluded.cached_tokens,
           requests = requests + 1,
           cost_micro_usd = cost_micro_usd + excluded.cost_micro_usd",
        params![
            day,
            model,
            project,
            u.input_tokens as i64,
            u.output_tokens as i64,
            u.cache_read_tokens as i64,
            cost_micro_usd(model, u)
        ],
    )?;
    Ok(())
}

/// One row of the rollup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyUsage {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// Model id.
    pub model: String,
    /// Project id.
    pub project: String,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Cached input tokens.
    pub cached_tokens: i64,
    /// Requests.
    pub requests: i64,
    /// Estimated cost, millionths of a dollar.
    pub cost_micro_usd: i64,
}

/// Every rollup row, newest day first.
pub fn daily(conn: &Connection) -> rusqlite::Result<Vec<DailyUsage>> {
    let mut stmt = conn.prepare(
        "SELECT day, model, project, input_tokens, output_tokens, cached_tokens, requests, cost_micro_usd
         FROM usage_daily ORDER BY day DESC, model, project",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(DailyUsage {
                day: r.get(0)?,
                model: r.get(1)?,
                project: r.get(2)?,
                input_tokens: r.get(3)?,
                output_tokens: r.get(4)?,
                cached_tokens: r.get(5)?,
                requests: r.get(6)?,
                cost_micro_usd: r.get(7)?,
            })
        })?
        .collect();
    rows
}
