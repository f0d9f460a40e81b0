//! Daily usage rollups: input, output and cached tokens, requests and estimated cost,
//! per day, model and project, in `hub.db` (table `usage_daily`, created by `hubdb`).
//! The cost is an estimate from a small table of list prices; a model missing from it
//! is reported as unpriced (see [`priced`]), never as free.

use rusqlite::{params, Connection};

use super::provider::Usage;

/// USD per million tokens (input, output, cached input), from the providers' list
/// prices: an estimate, never a bill. `None` for a model the table does not know (local
/// models, names newer than this table): its cost is unknown, not zero.
fn price(model: &str) -> Option<(f64, f64, f64)> {
    let m = model.to_ascii_lowercase();
    if m.contains("opus") {
        Some((15.0, 75.0, 1.5))
    } else if m.contains("sonnet") {
        Some((3.0, 15.0, 0.3))
    } else if m.contains("haiku") {
        Some((0.8, 4.0, 0.08))
    } else if m.contains("gpt-4o-mini") {
        Some((0.15, 0.6, 0.075))
    } else if m.contains("gpt-4o") {
        Some((2.5, 10.0, 1.25))
    } else {
        None
    }
}

/// Whether the price table knows `model`, so that its `cost_micro_usd` is an estimate
/// rather than an unknown counted as 0.
pub fn priced(model: &str) -> bool {
    price(model).is_some()
}

/// Estimated cost of one request, in millionths of a dollar (0 for an unpriced model).
pub fn cost_micro_usd(model: &str, u: &Usage) -> i64 {
    let (i, o, c) = price(model).unwrap_or((0.0, 0.0, 0.0));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cached: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }

    #[test]
    fn known_models_are_priced_per_million_tokens() {
        assert!(priced("claude-sonnet-4-5"));
        // A million input tokens at $3, a million output at $15, a million cached at $0.30.
        assert_eq!(
            cost_micro_usd("claude-sonnet-4-5", &usage(1_000_000, 1_000_000, 1_000_000)),
            18_300_000
        );
        assert_eq!(cost_micro_usd("gpt-4o-mini", &usage(2_000, 1_000, 0)), 900);
        // The longer name wins: gpt-4o-mini is not priced as gpt-4o.
        assert_ne!(
            cost_micro_usd("gpt-4o-mini", &usage(1_000, 0, 0)),
            cost_micro_usd("gpt-4o", &usage(1_000, 0, 0))
        );
    }

    #[test]
    fn unknown_models_are_unpriced_not_free() {
        for model in ["llama3.1", "nomic-embed-text", "gpt"] {
            assert!(!priced(model), "{model}");
            assert_eq!(cost_micro_usd(model, &usage(1_000, 1_000, 0)), 0);
        }
    }
}
