//! `hearth-hub schedules add|list|pause|resume|remove|runs|run-now`.
//!
//! A binary edge (anyhow allowed). Every command but `run-now` works on `hub.db`
//! directly, whether or not the hub runs (a running hub picks the change up within a
//! second, when `data_version` moves); `run-now` asks the running hub's API, since only
//! the hub runs the agent. Specs and zones are checked by [`super::timing`], as the API
//! checks them.

use std::path::Path;

use anyhow::{bail, Context};
use chrono::TimeZone;
use chrono_tz::Tz;
use clap::{ArgGroup, Args, Subcommand};

use super::{
    service::{check_model, resume_patch},
    timing::{self, When},
    MissedPolicy, NewSchedule, Schedule, ScheduleFilter, ScheduleKind, SchedulePatch,
    ScheduleStore,
};

/// The `schedules` subcommands.
#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// Add a schedule: the agent gets PROMPT in PROJECT every interval, on a cron
    /// expression, or once.
    Add(Box<AddArgs>),
    /// List schedules with their next due time.
    List,
    /// Pause a schedule: it does not fall due until resumed.
    Pause {
        /// Its id (or a unique prefix).
        id: String,
    },
    /// Resume a schedule: due again from now (what fell due while paused does not run).
    Resume {
        /// Its id (or a unique prefix).
        id: String,
    },
    /// Remove a schedule (its runs stay on record).
    Remove {
        /// Its id (or a unique prefix).
        id: String,
    },
    /// A schedule's runs, newest first.
    Runs {
        /// Its id (or a unique prefix).
        id: String,
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Run a schedule now, through the running hub.
    RunNow {
        /// Its id (or a unique prefix).
        id: String,
    },
}

/// `schedules add`: exactly one of `--every`, `--cron`, `--at`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("when").required(true).args(["every", "cron", "at"])))]
pub struct AddArgs {
    /// What to call it.
    name: String,
    /// The project its runs work in (name or id).
    #[arg(long)]
    project: String,
    /// An interval: 30min, 6h, 1d, 2w (fixed durations: 1d is 24 h, use --cron for
    /// "every day at 9"), 1m, 1y (calendar months and years).
    #[arg(long)]
    every: Option<String>,
    /// A 5-field cron expression (minute hour day-of-month month day-of-week), in
    /// --tz, e.g. "0 9 * * 1-5".
    #[arg(long)]
    cron: Option<String>,
    /// Once, at 2026-12-01T09:00 (in --tz) or an RFC 3339 instant.
    #[arg(long)]
    at: Option<String>,
    /// IANA time zone (default: the hub's, whatever it is when times are computed).
    #[arg(long, default_value = "")]
    tz: String,
    /// What the agent is asked.
    #[arg(long)]
    prompt: String,
    /// provider/model instead of the configured chat model.
    #[arg(long)]
    model: Option<String>,
    /// A tool its runs may use without asking (repeatable).
    #[arg(long = "allow", value_name = "TOOL")]
    allow: Vec<String>,
    /// What happens to due times missed while the hub was down or asleep.
    #[arg(long, default_value = "run_once", value_parser = ["skip", "run_once", "catch_up"])]
    missed: String,
    /// The most runs catch_up starts after a gap.
    #[arg(long, default_value_t = 3)]
    catch_up_max: u32,
    /// How long a run's approval waits for you: 90s, 30min, 24h, 7d.
    #[arg(long, default_value = "24h")]
    approval_wait: String,
}

/// Seconds in `90s`, `30min`, `24h`, `7d`.
fn parse_wait(s: &str) -> anyhow::Result<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = s[..digits]
        .parse()
        .with_context(|| format!("{s:?} is not a duration like 90s, 30min, 24h or 7d"))?;
    let unit = match &s[digits..] {
        "s" => 1,
        "min" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => bail!("{s:?} is not a duration like 90s, 30min, 24h or 7d"),
    };
    Ok(n.saturating_mul(unit))
}

/// `ms` as a local time in `tz`.
fn local(ms: Option<i64>, tz: Tz) -> String {
    match ms.and_then(|t| tz.timestamp_millis_opt(t).single()) {
        Some(t) => t.format("%Y-%m-%d %H:%M %Z").to_string(),
        None => "-".into(),
    }
}

/// The schedule `given` names: its id or a unique prefix of it.
fn find(store: &ScheduleStore, given: &str) -> anyhow::Result<Schedule> {
    if let Some(s) = store.get(given)? {
        return Ok(s);
    }
    let (all, _) = store.list(&ScheduleFilter {
        limit: u32::MAX,
        ..ScheduleFilter::default()
    })?;
    let matches: Vec<Schedule> = all
        .into_iter()
        .filter(|s| given.len() >= 4 && s.id.starts_with(given))
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().context("one match")?),
        0 => bail!("no schedule {given:?} (`hearth-hub schedules list` shows them)"),
        n => bail!("{given:?} matches {n} schedules: give more of the id"),
    }
}

/// Runs a `schedules` command on the hub in `home`.
pub async fn run(home: &Path, cmd: SchedulesCommand) -> anyhow::Result<()> {
    let hub_db = home.join("hub.db");
    crate::hubdb::check(&hub_db)?;
    if let SchedulesCommand::RunNow { id } = cmd {
        let store = ScheduleStore::open(&hub_db).context("opening the schedules")?;
        let s = find(&store, &id)?;
        let hub = crate::hub_client::HubClient::connect(home)
            .context("run-now goes through the running hub")?;
        let answer: serde_json::Value = hub
            .post(&format!("/schedules/{}/run", s.id), &serde_json::json!({}))
            .await
            .context("run-now needs the running hub (start `hearth-hub`)")?
            .json()
            .await
            .context("reading the hub's answer")?;
        println!(
            "run {} of {} started: `hearth-hub schedules runs {}` shows how it ends",
            answer["run"], s.name, s.id
        );
        return Ok(());
    }
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || offline(&home, cmd)).await?
}

/// The commands that work on `hub.db` directly.
fn offline(home: &Path, cmd: SchedulesCommand) -> anyhow::Result<()> {
    let hub_db = home.join("hub.db");
    let store = ScheduleStore::open(&hub_db).context("opening the schedules")?;
    let hub_tz = crate::settings::RuntimeStore::open(&hub_db)?.load()?.tz();
    let now = crate::hubdb::now_ms();
    match cmd {
        SchedulesCommand::Add(add) => {
            let AddArgs {
                name,
                project,
                every,
                cron,
                at,
                tz,
                prompt,
                model,
                allow,
                missed,
                catch_up_max,
                approval_wait,
            } = *add;
            let (kind, spec) = match (every, cron, at) {
                (Some(s), _, _) => (ScheduleKind::Interval, s),
                (_, Some(s), _) => (ScheduleKind::Cron, s),
                (_, _, Some(s)) => (ScheduleKind::Once, s),
                _ => bail!("give --every, --cron or --at"),
            };
            let when = When::parse(kind, &spec)?;
            let zone = timing::zone(&tz, hub_tz)?;
            let (anchor, first) = timing::first_due(&when, zone, now)?;
            if let Some(m) = &model {
                check_model(m)?;
            }
            let project = crate::cli::resolve_project(home, &project)?
                .parse()
                .context("a project id")?;
            let s = store.create(NewSchedule {
                id: None,
                name,
                project,
                task: None,
                kind,
                spec: spec.trim().to_string(),
                tz: tz.trim().to_string(),
                prompt,
                model,
                auto_approve: allow,
                missed: missed.parse::<MissedPolicy>()?,
                catch_up_max,
                approval_wait_secs: parse_wait(&approval_wait)?,
                anchor,
                next_due: Some(first),
            })?;
            println!(
                "{}  {}: {}, next at {}",
                s.id,
                s.name,
                when.describe(zone),
                local(s.next_due, zone)
            );
        }
        SchedulesCommand::List => {
            let (all, _) = store.list(&ScheduleFilter {
                limit: u32::MAX,
                ..ScheduleFilter::default()
            })?;
            if all.is_empty() {
                println!("no schedules (add one with `hearth-hub schedules add`)");
            }
            for s in all {
                let zone = timing::zone(&s.tz, hub_tz).unwrap_or(hub_tz);
                let what = match When::parse(s.kind, &s.spec) {
                    Ok(w) => w.describe(zone),
                    Err(e) => format!("not valid: {e}"),
                };
                let state = if s.paused { "  [paused]" } else { "" };
                println!(
                    "{}  {}  next {}  last {}  {}{state}",
                    s.id,
                    s.name,
                    local(s.next_due.filter(|_| !s.paused), zone),
                    local(s.last_run_at, zone),
                    what
                );
            }
        }
        SchedulesCommand::Pause { id } => {
            let s = find(&store, &id)?;
            store.update(
                &s.id,
                SchedulePatch {
                    paused: Some(true),
                    ..SchedulePatch::default()
                },
            )?;
            println!("{} paused", s.name);
        }
        SchedulesCommand::Resume { id } => {
            let s = find(&store, &id)?;
            let zone = timing::zone(&s.tz, hub_tz)?;
            let s = store.update(&s.id, resume_patch(&s, hub_tz, now)?)?;
            println!("{} resumed, next at {}", s.name, local(s.next_due, zone));
        }
        SchedulesCommand::Remove { id } => {
            let s = find(&store, &id)?;
            store.delete(&s.id)?;
            println!("{} removed (its runs stay on record)", s.name);
        }
        SchedulesCommand::Runs { id, limit } => {
            let s = find(&store, &id)?;
            let zone = timing::zone(&s.tz, hub_tz).unwrap_or(hub_tz);
            let (runs, total) = store.runs(&s.id, limit, 0)?;
            println!("{}: {total} runs", s.name);
            for r in runs {
                let text = r.answer.as_deref().or(r.error.as_deref()).unwrap_or("");
                println!(
                    "#{}  {}  ->  {}  {}  {}  in {} / out {} tokens  {}",
                    r.id,
                    local(Some(r.started_at), zone),
                    local(r.ended_at, zone),
                    r.status.as_str(),
                    r.reason.as_str(),
                    r.input_tokens,
                    r.output_tokens,
                    text.lines().next().unwrap_or("")
                );
            }
        }
        SchedulesCommand::RunNow { .. } => bail!("run-now goes through the running hub"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_waits_read_as_seconds() {
        assert_eq!(parse_wait("90s").expect("s"), 90);
        assert_eq!(parse_wait("30min").expect("min"), 1_800);
        assert_eq!(parse_wait("24h").expect("h"), 86_400);
        assert_eq!(parse_wait("7d").expect("d"), 604_800);
        assert!(parse_wait("soon").is_err());
        assert!(parse_wait("3w").is_err());
    }
}
