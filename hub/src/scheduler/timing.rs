//! When schedules fall due: parsing a schedule's spec ([`When::parse`]), the next due
//! instant after a given one ([`When::next_after`]), a sentence for people
//! ([`When::describe`]), and the planner ([`plan`]) that turns a due time the scheduler
//! has reached into the runs to start now under the schedule's missed-run policy.
//!
//! Pure: no I/O and no clock of its own. Every instant is ms since the epoch (UTC), and
//! the caller says what "now" is, so tests drive it with any clock. Local times are
//! resolved the same way everywhere: a local time skipped by a daylight-saving change
//! means the first instant after the change, a repeated one its first occurrence.
//!
//! Intervals in `min`, `h`, `d` and `w` are fixed durations (`1d` is 24 h, so "every day"
//! drifts by an hour across a daylight-saving change; a cron expression such as
//! `0 9 * * *` is the way to say "every day at 9"). Intervals in `m` and `y` are calendar
//! months and years in the schedule's zone, counted from the anchor each time, so the
//! 31st stays the 31st where the month has one.

use std::str::FromStr;

use chrono::{DateTime, Duration, Months, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike};
use chrono_tz::Tz;
use croner::{parser::CronParser, Cron};

use super::store::{MissedPolicy, RunReason, ScheduleError, ScheduleKind};

/// How late a due time may be seen and still count as on time (2 min); later, it was
/// missed (the hub was down, the machine slept, or a run of the same schedule was going).
pub const MISSED_GRACE_MS: i64 = 120_000;

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;
/// The longest interval: a century, so instants never overflow.
const MAX_MONTHS: u32 = 1_200;
const MAX_FIXED_MS: i64 = 36_525 * DAY_MS;

/// A parsed when-spec.
#[derive(Debug, Clone)]
pub enum When {
    /// Every `every` from the anchor.
    Interval(Interval),
    /// A 5-field cron expression, read in the schedule's zone.
    Cron(Box<Cron>),
    /// Once.
    Once(OnceAt),
}

/// An interval: a fixed duration or a number of calendar months.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// How many units.
    pub count: u32,
    /// Which unit.
    pub unit: IntervalUnit,
}

/// The unit of an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalUnit {
    /// `min`: 60 s.
    Minutes,
    /// `h`: 3,600 s.
    Hours,
    /// `d`: 24 h exactly (not a calendar day).
    Days,
    /// `w`: 7 × 24 h.
    Weeks,
    /// `m`: a calendar month in the schedule's zone.
    Months,
    /// `y`: a calendar year in the schedule's zone.
    Years,
}

/// The instant of a one-shot schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnceAt {
    /// An RFC 3339 instant.
    Instant(i64),
    /// `YYYY-MM-DDTHH:MM[:SS]` without an offset: a local time in the schedule's zone.
    Local(NaiveDateTime),
}

impl Interval {
    /// The fixed length in ms, or `None` for calendar months and years.
    fn fixed_ms(self) -> Option<i64> {
        let unit = match self.unit {
            IntervalUnit::Minutes => MINUTE_MS,
            IntervalUnit::Hours => HOUR_MS,
            IntervalUnit::Days => DAY_MS,
            IntervalUnit::Weeks => 7 * DAY_MS,
            IntervalUnit::Months | IntervalUnit::Years => return None,
        };
        Some(i64::from(self.count) * unit)
    }

    fn months(self) -> u32 {
        match self.unit {
            IntervalUnit::Years => self.count.saturating_mul(12),
            _ => self.count,
        }
    }

    fn parse(spec: &str) -> Result<Self, ScheduleError> {
        let bad = || {
            ScheduleError::Invalid(format!(
                "interval {spec:?} is not a number and a unit like 30min, 6h, 1d, 2w, 1m or 1y"
            ))
        };
        let s = spec.trim();
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let count: u32 = s[..digits].parse().map_err(|_| bad())?;
        let unit = match &s[digits..] {
            "min" => IntervalUnit::Minutes,
            "h" => IntervalUnit::Hours,
            "d" => IntervalUnit::Days,
            "w" => IntervalUnit::Weeks,
            "m" => IntervalUnit::Months,
            "y" => IntervalUnit::Years,
            _ => return Err(bad()),
        };
        if count == 0 {
            return Err(ScheduleError::Invalid(format!(
                "interval {spec:?} is zero: an interval is at least 1min"
            )));
        }
        let interval = Self { count, unit };
        let too_long = match interval.fixed_ms() {
            Some(ms) => ms > MAX_FIXED_MS,
            None => interval.months() > MAX_MONTHS,
        };
        if too_long {
            return Err(ScheduleError::Invalid(format!(
                "interval {spec:?} is longer than a hundred years"
            )));
        }
        Ok(interval)
    }

    /// The `k`-th due time from `anchor` (k ≥ 0), or `None` past the calendar's end.
    fn nth(self, tz: Tz, anchor: i64, k: i64) -> Option<i64> {
        match self.fixed_ms() {
            Some(step) => anchor.checked_add(step.checked_mul(k)?),
            None => {
                let local = tz.timestamp_millis_opt(anchor).single()?.naive_local();
                let months = u32::try_from(k.checked_mul(i64::from(self.months()))?).ok()?;
                resolve_local(tz, local.checked_add_months(Months::new(months))?)
            }
        }
    }

    /// The index of the last due time at or before `t` (`None` before the anchor).
    fn index_at_or_before(self, tz: Tz, anchor: i64, t: i64) -> Option<i64> {
        if t < anchor {
            return None;
        }
        match self.fixed_ms() {
            Some(step) => Some((t - anchor) / step),
            None => {
                // Calendar months: an estimate from the mean month, then corrected, so a
                // long gap costs a few steps, not one per period.
                let per = i64::from(self.months());
                let mut k = (t - anchor) / (per * 2_629_746_000).max(1);
                while k > 0 && self.nth(tz, anchor, k).is_none_or(|d| d > t) {
                    k -= 1;
                }
                while self.nth(tz, anchor, k + 1).is_some_and(|d| d <= t) {
                    k += 1;
                }
                Some(k)
            }
        }
    }
}

/// The instant of a local time in `tz`: a time skipped by a daylight-saving change is
/// the first instant after the change, a repeated one its first occurrence.
fn resolve_local(tz: Tz, local: NaiveDateTime) -> Option<i64> {
    match tz.from_local_datetime(&local) {
        chrono::LocalResult::Single(t) => Some(t.timestamp_millis()),
        chrono::LocalResult::Ambiguous(first, _) => Some(first.timestamp_millis()),
        chrono::LocalResult::None => {
            // In a gap: the first whole minute that exists is the change itself (gaps
            // are whole minutes long in every zone in use).
            let start = local.with_second(0)?.with_nanosecond(0)?;
            (1..=240).find_map(|m| {
                let t = start.checked_add_signed(Duration::minutes(m))?;
                tz.from_local_datetime(&t)
                    .earliest()
                    .map(|t| t.timestamp_millis())
            })
        }
    }
}

fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
}

/// A reference instant (2024-01-01 UTC) to check that a cron expression ever matches.
const CRON_CHECK_FROM: i64 = 1_704_067_200_000;

impl When {
    /// Parses `spec` as a `kind` schedule; the error says what is wrong with it.
    pub fn parse(kind: ScheduleKind, spec: &str) -> Result<When, ScheduleError> {
        match kind {
            ScheduleKind::Interval => Ok(When::Interval(Interval::parse(spec)?)),
            ScheduleKind::Cron => {
                let fields = spec.split_whitespace().count();
                if fields != 5 {
                    return Err(ScheduleError::Invalid(format!(
                        "cron expression {spec:?} has {fields} fields: it needs 5 \
                         (minute hour day-of-month month day-of-week), like \"0 9 * * 1-5\""
                    )));
                }
                let cron = cron_parser().parse(spec).map_err(|e| {
                    ScheduleError::Invalid(format!("cron expression {spec:?} is not valid: {e}"))
                })?;
                let when = When::Cron(Box::new(cron));
                if when
                    .next_after(Tz::UTC, CRON_CHECK_FROM, CRON_CHECK_FROM)
                    .is_none()
                {
                    return Err(ScheduleError::Invalid(format!(
                        "cron expression {spec:?} never falls due"
                    )));
                }
                Ok(when)
            }
            ScheduleKind::Once => {
                let s = spec.trim();
                if let Ok(t) = DateTime::parse_from_rfc3339(s) {
                    return Ok(When::Once(OnceAt::Instant(t.timestamp_millis())));
                }
                ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
                    .iter()
                    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
                    .map(|t| When::Once(OnceAt::Local(t)))
                    .ok_or_else(|| {
                        ScheduleError::Invalid(format!(
                            "{spec:?} is not a time like 2026-12-01T09:00 (in the schedule's \
                             zone) or 2026-12-01T09:00:00+01:00"
                        ))
                    })
            }
        }
    }

    /// The first due instant strictly after `after` (ms), counting an interval from
    /// `anchor`. `None`: never (a one-shot time passed, or past the calendar's end).
    pub fn next_after(&self, tz: Tz, anchor: i64, after: i64) -> Option<i64> {
        match self {
            When::Interval(i) => {
                let k = match i.index_at_or_before(tz, anchor, after) {
                    None => return Some(anchor),
                    Some(k) => k + 1,
                };
                i.nth(tz, anchor, k)
            }
            When::Cron(cron) => cron_next(cron, tz, after),
            When::Once(at) => at.instant(tz).filter(|&t| t > after),
        }
    }

    /// The last due instant at or before `t`, not before `from` (which is a due time
    /// itself: the stored next due). Used to look back over a gap.
    fn last_at_or_before(&self, tz: Tz, anchor: i64, from: i64, t: i64) -> Option<i64> {
        if t < from {
            return None;
        }
        let grid = match self {
            When::Interval(i) => i
                .index_at_or_before(tz, anchor, t)
                .and_then(|k| i.nth(tz, anchor, k)),
            When::Cron(cron) => cron_last_at_or_before(cron, tz, t),
            When::Once(at) => at.instant(tz).filter(|&x| x <= t),
        };
        Some(grid.filter(|&g| g > from).unwrap_or(from))
    }

    /// "every 3 days (72 h apart)", "at 09:00 on Mon–Fri (Europe/Paris)", "once at
    /// 2026-12-01 09:00 (Europe/Paris)".
    pub fn describe(&self, tz: Tz) -> String {
        match self {
            When::Interval(i) => describe_interval(*i),
            When::Cron(cron) => format!("{} ({})", describe_cron(cron.pattern.as_str()), tz),
            When::Once(at) => match at.instant(tz) {
                Some(t) => format!("once at {} ({tz})", local_text(tz, t)),
                None => "once, at a time that does not exist".into(),
            },
        }
    }
}

impl OnceAt {
    fn instant(self, tz: Tz) -> Option<i64> {
        match self {
            OnceAt::Instant(t) => Some(t),
            OnceAt::Local(local) => resolve_local(tz, local),
        }
    }
}

/// The next cron time after `after`. Croner searches in local time; in a repeated hour
/// it may answer the first occurrence of a local time while `after` is already in the
/// second, so answers not after `after` are stepped over.
fn cron_next(cron: &Cron, tz: Tz, after: i64) -> Option<i64> {
    // Croner keeps the sub-second part of its start: search from the whole second.
    let mut cursor = tz
        .timestamp_millis_opt(after.div_euclid(1_000) * 1_000)
        .single()?;
    for _ in 0..4 {
        let found = cron.find_next_occurrence(&cursor, false).ok()?;
        let t = found.timestamp_millis();
        if t > after {
            return Some(t);
        }
        if cron.determine_job_type() == croner::JobType::IntervalWildcard {
            // Already in the second pass of a repeated hour: a repeating pattern goes on
            // there (each local time still fires once: croner answered its first pass,
            // which is behind us).
            if let Some(later) = tz.from_local_datetime(&found.naive_local()).latest() {
                if later.timestamp_millis() > after {
                    return Some(later.timestamp_millis());
                }
            }
        }
        cursor = found;
    }
    None
}

/// The last cron time at or before `t`, found by searching forward from ever earlier
/// starts (so gaps and repeated hours are read exactly as [`cron_next`] reads them).
fn cron_last_at_or_before(cron: &Cron, tz: Tz, t: i64) -> Option<i64> {
    for back in [HOUR_MS, DAY_MS, 32 * DAY_MS, 367 * DAY_MS, 5 * 367 * DAY_MS] {
        let mut found = None;
        let mut cursor = t.checked_sub(back)?;
        while let Some(next) = cron_next(cron, tz, cursor).filter(|&n| n <= t) {
            found = Some(next);
            cursor = next;
        }
        if found.is_some() {
            return found;
        }
    }
    None
}

fn describe_interval(i: Interval) -> String {
    let n = i.count;
    let plural = |one: &str, many: &str| {
        if n == 1 {
            format!("every {one}")
        } else {
            format!("every {n} {many}")
        }
    };
    match i.unit {
        IntervalUnit::Minutes => plural("minute", "minutes"),
        IntervalUnit::Hours => plural("hour", "hours"),
        IntervalUnit::Days => format!("{} ({} h apart)", plural("day", "days"), n * 24),
        IntervalUnit::Weeks => format!("{} ({} h apart)", plural("week", "weeks"), n * 168),
        IntervalUnit::Months => format!("{} (same day of the month)", plural("month", "months")),
        IntervalUnit::Years => plural("year", "years"),
    }
}

const DAY_NAMES: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// A day-of-week field in words ("Mon–Fri", "Mon, Wed"), or `None` when it is not a
/// plain list of days and ranges.
fn describe_weekdays(field: &str) -> Option<String> {
    let day = |s: &str| -> Option<&'static str> {
        let n: usize = s.parse().ok()?;
        DAY_NAMES.get(n % 7).copied()
    };
    let parts: Option<Vec<String>> = field
        .split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => Some(format!("{}–{}", day(a)?, day(b)?)),
            None => day(p).map(String::from),
        })
        .collect();
    parts.map(|p| p.join(", "))
}

/// A cron expression in words where it is a common shape, else the expression itself.
fn describe_cron(pattern: &str) -> String {
    let fields: Vec<&str> = pattern.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = fields.as_slice() else {
        return format!("cron {pattern}");
    };
    let (Ok(m), Ok(h)) = (minute.parse::<u32>(), hour.parse::<u32>()) else {
        return format!("cron {pattern}");
    };
    let at = format!("at {h:02}:{m:02}");
    match (*dom, *month, *dow) {
        ("*", "*", "*") => format!("{at} every day"),
        ("*", "*", days) => match describe_weekdays(days) {
            Some(d) => format!("{at} on {d}"),
            None => format!("cron {pattern}"),
        },
        (d, "*", "*") if d.parse::<u32>().is_ok() => format!("{at} on day {d} of the month"),
        _ => format!("cron {pattern}"),
    }
}

fn local_text(tz: Tz, t: i64) -> String {
    match tz.timestamp_millis_opt(t).single() {
        Some(x) => x.format("%Y-%m-%d %H:%M").to_string(),
        None => t.to_string(),
    }
}

/// The zone a schedule's times are computed in: its own, or the hub's when empty.
pub fn zone(schedule_tz: &str, hub: Tz) -> Result<Tz, ScheduleError> {
    if schedule_tz.trim().is_empty() {
        return Ok(hub);
    }
    Tz::from_str(schedule_tz.trim()).map_err(|_| {
        ScheduleError::Invalid(format!(
            "time zone {schedule_tz:?} is not known: use an IANA name like Europe/Paris or \
             America/New_York"
        ))
    })
}

/// Where a new (or re-timed) schedule starts at `now`: its anchor (an interval's first
/// due time, which later ones count from; `None` for the other kinds) and its first due
/// time. A one-shot time already past is refused.
pub fn first_due(when: &When, tz: Tz, now: i64) -> Result<(Option<i64>, i64), ScheduleError> {
    let first = when.next_after(tz, now, now);
    match (when, first) {
        (When::Interval(_), Some(first)) => Ok((Some(first), first)),
        (_, Some(first)) => Ok((None, first)),
        (When::Once(_), None) => Err(ScheduleError::Invalid(format!(
            "that time is in the past ({}, {tz})",
            when.describe(tz)
        ))),
        (_, None) => Err(ScheduleError::Invalid(
            "this schedule never falls due".into(),
        )),
    }
}

/// A task's due value (`YYYY-MM-DD` = 09:00, or `YYYY-MM-DDTHH:MM[:SS]`) as an instant in `tz`.
pub fn due_instant(due: &str, tz: Tz) -> Option<i64> {
    let due = due.trim();
    let local = match NaiveDate::parse_from_str(due, "%Y-%m-%d") {
        Ok(date) => date.and_time(NaiveTime::from_hms_opt(9, 0, 0)?),
        Err(_) => ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(due, f).ok())?,
    };
    resolve_local(tz, local)
}

/// One run the planner says to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRun {
    /// The due time it stands for.
    pub due_at: i64,
    /// Due (on time), missed (`run_once`) or catch-up.
    pub reason: RunReason,
}

/// What to do about a schedule whose due time has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The runs to start, oldest due time first, one after another.
    pub runs: Vec<PlannedRun>,
    /// The schedule's next due time after them (`None`: never again).
    pub next_due: Option<i64>,
}

/// What a schedule due at `next_due` should do at `now`: nothing yet (`next_due` in the
/// future), or the runs to start and its following due time. A due time seen within
/// [`MISSED_GRACE_MS`] runs on time (reason `due`); the ones seen later were missed and
/// are judged by `missed`: `skip` runs none of them, `run_once` runs the latest once
/// (reason `missed`), `catch_up` the latest `catch_up_max` (reason `catch_up`). An
/// on-time due time among missed ones runs as `due` whatever the policy.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    when: &When,
    tz: Tz,
    anchor: i64,
    next_due: i64,
    missed: MissedPolicy,
    catch_up_max: u32,
    now: i64,
) -> Plan {
    if next_due > now {
        return Plan {
            runs: Vec::new(),
            next_due: Some(next_due),
        };
    }
    let following = when.next_after(tz, anchor, now);
    // The passed due times, newest first, as many as any policy needs.
    let wanted = match missed {
        MissedPolicy::CatchUp => catch_up_max.max(1) as usize,
        _ => 1,
    };
    let mut passed: Vec<i64> = Vec::new();
    let mut cursor = now;
    while passed.len() < wanted {
        let Some(t) = when.last_at_or_before(tz, anchor, next_due, cursor) else {
            break;
        };
        passed.push(t);
        if t <= next_due {
            break;
        }
        cursor = t - 1;
    }
    let on_time = |t: i64| now - t <= MISSED_GRACE_MS;
    let mut runs: Vec<PlannedRun> = match missed {
        MissedPolicy::Skip => passed
            .first()
            .filter(|&&t| on_time(t))
            .map(|&t| PlannedRun {
                due_at: t,
                reason: RunReason::Due,
            })
            .into_iter()
            .collect(),
        MissedPolicy::RunOnce => passed
            .first()
            .map(|&t| PlannedRun {
                due_at: t,
                reason: if on_time(t) {
                    RunReason::Due
                } else {
                    RunReason::Missed
                },
            })
            .into_iter()
            .collect(),
        MissedPolicy::CatchUp => passed
            .iter()
            .map(|&t| PlannedRun {
                due_at: t,
                reason: if on_time(t) {
                    RunReason::Due
                } else {
                    RunReason::CatchUp
                },
            })
            .collect(),
    };
    runs.reverse();
    Plan {
        runs,
        next_due: following,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use chrono_tz::{America::New_York, Europe::Paris};

    fn at(tz: Tz, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .earliest()
            .expect("a time that exists")
            .timestamp_millis()
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        at(Tz::UTC, y, mo, d, h, mi)
    }

    fn when(kind: ScheduleKind, spec: &str) -> When {
        When::parse(kind, spec).expect("valid spec")
    }

    fn invalid(kind: ScheduleKind, spec: &str) -> String {
        match When::parse(kind, spec) {
            Err(ScheduleError::Invalid(m)) => m,
            other => panic!("{spec:?} parsed: {other:?}"),
        }
    }

    /// Every due time from `from` (exclusive), `n` of them.
    fn series(w: &When, tz: Tz, anchor: i64, from: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let mut t = from;
        for _ in 0..n {
            t = w.next_after(tz, anchor, t).expect("a next due time");
            out.push(t);
        }
        out
    }

    #[test]
    fn cron_across_spring_forward_fires_after_the_gap() {
        // Paris skips 02:00-03:00 on 2026-03-29; New York on 2026-03-08.
        let daily_230 = when(ScheduleKind::Cron, "30 2 * * *");
        let got = series(&daily_230, Paris, 0, at(Paris, 2026, 3, 27, 12, 0), 3);
        assert_eq!(
            got,
            vec![
                at(Paris, 2026, 3, 28, 2, 30),
                utc(2026, 3, 29, 1, 0), // 03:00 CEST: right after the change
                at(Paris, 2026, 3, 30, 2, 30),
            ]
        );
        let nine = when(ScheduleKind::Cron, "0 9 * * *");
        let got = series(&nine, New_York, 0, at(New_York, 2026, 3, 7, 12, 0), 2);
        // 9:00 local both days: 14:00 UTC under EST, 13:00 UTC under EDT.
        assert_eq!(got, vec![utc(2026, 3, 8, 13, 0), utc(2026, 3, 9, 13, 0)]);
        let got = series(&daily_230, New_York, 0, at(New_York, 2026, 3, 7, 12, 0), 2);
        assert_eq!(got, vec![utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)]);
    }

    #[test]
    fn cron_across_fall_back_fires_a_repeated_time_once() {
        // Paris repeats 02:00-03:00 on 2026-10-25; New York 01:00-02:00 on 2026-11-01.
        let daily_230 = when(ScheduleKind::Cron, "30 2 * * *");
        let got = series(&daily_230, Paris, 0, at(Paris, 2026, 10, 24, 12, 0), 2);
        assert_eq!(
            got,
            vec![utc(2026, 10, 25, 0, 30), at(Paris, 2026, 10, 26, 2, 30)]
        );
        // Asked from inside the repeated hour (second pass), it does not fire again.
        let second_pass = utc(2026, 10, 25, 1, 10); // 02:10 CET
        assert_eq!(
            daily_230.next_after(Paris, 0, second_pass),
            Some(at(Paris, 2026, 10, 26, 2, 30))
        );
        let daily_130 = when(ScheduleKind::Cron, "30 1 * * *");
        let got = series(
            &daily_130,
            New_York,
            0,
            at(New_York, 2026, 10, 31, 12, 0),
            2,
        );
        assert_eq!(got, vec![utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]);
        // Every local time fires once, an hourly pattern too: 02:30 in the first pass,
        // then 03:30.
        let hourly = when(ScheduleKind::Cron, "30 * * * *");
        let got = series(&hourly, Paris, 0, utc(2026, 10, 24, 23, 45), 2);
        assert_eq!(
            got,
            vec![utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 30)]
        );
        // Started inside the second pass, a repeating pattern goes on in it.
        let quarter = when(ScheduleKind::Cron, "*/15 * * * *");
        assert_eq!(
            quarter.next_after(Paris, 0, second_pass),
            Some(utc(2026, 10, 25, 1, 15))
        );
    }

    #[test]
    fn a_daily_interval_is_24_hours_across_daylight_saving() {
        let daily = when(ScheduleKind::Interval, "1d");
        for (tz, before, after) in [
            (Paris, (2026, 3, 28), (2026, 3, 29)),
            (Paris, (2026, 10, 24), (2026, 10, 25)),
            (New_York, (2026, 3, 7), (2026, 3, 8)),
            (New_York, (2026, 10, 31), (2026, 11, 1)),
        ] {
            let anchor = at(tz, before.0, before.1, before.2, 9, 0);
            let next = daily.next_after(tz, anchor, anchor).expect("next");
            assert_eq!(next - anchor, DAY_MS);
            // So the local hour moves by the change: why describe says "24 h apart".
            let local = tz.timestamp_millis_opt(next).single().expect("instant");
            assert_eq!(
                local.date_naive(),
                NaiveDate::from_ymd_opt(after.0, after.1, after.2).expect("date")
            );
            assert_ne!(local.format("%H").to_string(), "09");
        }
        assert_eq!(daily.describe(Paris), "every day (24 h apart)");
        assert_eq!(
            when(ScheduleKind::Interval, "3d").describe(Paris),
            "every 3 days (72 h apart)"
        );
    }

    #[test]
    fn intervals_count_from_the_anchor_without_drift() {
        let half_hour = when(ScheduleKind::Interval, "30min");
        let anchor = utc(2026, 1, 1, 0, 0);
        assert_eq!(
            half_hour.next_after(Tz::UTC, anchor, anchor - 5),
            Some(anchor)
        );
        assert_eq!(
            half_hour.next_after(Tz::UTC, anchor, anchor + 29 * MINUTE_MS + 59_999),
            Some(anchor + 30 * MINUTE_MS)
        );
        assert_eq!(
            half_hour.next_after(Tz::UTC, anchor, anchor + 30 * MINUTE_MS),
            Some(anchor + 60 * MINUTE_MS)
        );
        // A year later, still on the grid.
        let late = anchor + 365 * DAY_MS + 7 * MINUTE_MS;
        assert_eq!(
            half_hour.next_after(Tz::UTC, anchor, late),
            Some(anchor + 365 * DAY_MS + 30 * MINUTE_MS)
        );
    }

    #[test]
    fn months_keep_the_day_where_the_month_has_it() {
        let monthly = when(ScheduleKind::Interval, "1m");
        let anchor = at(Paris, 2026, 1, 31, 9, 0);
        let got = series(&monthly, Paris, anchor, anchor, 4);
        assert_eq!(
            got,
            vec![
                at(Paris, 2026, 2, 28, 9, 0),
                at(Paris, 2026, 3, 31, 9, 0), // 09:00 local across the change
                at(Paris, 2026, 4, 30, 9, 0),
                at(Paris, 2026, 5, 31, 9, 0),
            ]
        );
        let leap = at(Paris, 2024, 1, 31, 9, 0);
        assert_eq!(
            monthly.next_after(Paris, leap, leap),
            Some(at(Paris, 2024, 2, 29, 9, 0))
        );
        let two = when(ScheduleKind::Interval, "2m");
        assert_eq!(
            two.next_after(Paris, anchor, anchor),
            Some(at(Paris, 2026, 3, 31, 9, 0))
        );
        let yearly = when(ScheduleKind::Interval, "1y");
        let feb29 = at(Paris, 2024, 2, 29, 9, 0);
        assert_eq!(
            series(&yearly, Paris, feb29, feb29, 4),
            vec![
                at(Paris, 2025, 2, 28, 9, 0),
                at(Paris, 2026, 2, 28, 9, 0),
                at(Paris, 2027, 2, 28, 9, 0),
                at(Paris, 2028, 2, 29, 9, 0),
            ]
        );
        // Far from the anchor, the estimate lands on the right month.
        assert_eq!(
            monthly.next_after(Paris, anchor, at(Paris, 2031, 6, 30, 10, 0)),
            Some(at(Paris, 2031, 7, 31, 9, 0))
        );
        assert_eq!(
            monthly.describe(Paris),
            "every month (same day of the month)"
        );
    }

    #[test]
    fn once_at_an_instant_or_a_local_time() {
        let instant = when(ScheduleKind::Once, "2026-12-01T09:00:00+01:00");
        let t = utc(2026, 12, 1, 8, 0);
        assert_eq!(instant.next_after(New_York, 0, t - 1), Some(t));
        assert_eq!(instant.next_after(New_York, 0, t), None);
        let local = when(ScheduleKind::Once, "2026-12-01T09:00");
        assert_eq!(local.next_after(Paris, 0, 0), Some(t));
        assert_eq!(
            local.describe(Paris),
            "once at 2026-12-01 09:00 (Europe/Paris)"
        );
        // A local time in the spring gap: right after the change.
        let gap = when(ScheduleKind::Once, "2026-03-29T02:30");
        assert_eq!(gap.next_after(Paris, 0, 0), Some(utc(2026, 3, 29, 1, 0)));
    }

    #[test]
    fn invalid_specs_say_what_is_wrong() {
        assert!(invalid(ScheduleKind::Interval, "5x").contains("30min, 6h"));
        assert!(invalid(ScheduleKind::Interval, "min").contains("30min"));
        assert!(invalid(ScheduleKind::Interval, "0d").contains("at least 1min"));
        assert!(invalid(ScheduleKind::Interval, "200y").contains("hundred years"));
        assert!(invalid(ScheduleKind::Cron, "0 9 * *").contains("needs 5"));
        assert!(invalid(ScheduleKind::Cron, "0 0 9 * * *").contains("needs 5"));
        assert!(invalid(ScheduleKind::Cron, "61 9 * * *").contains("not valid"));
        assert!(invalid(ScheduleKind::Cron, "0 9 * * funday").contains("not valid"));
        assert!(invalid(ScheduleKind::Cron, "0 0 30 2 *").contains("never"));
        assert!(invalid(ScheduleKind::Once, "tomorrow").contains("2026-12-01T09:00"));
        match zone("Europe/Pariss", Paris) {
            Err(ScheduleError::Invalid(m)) => assert!(m.contains("Europe/Pariss"), "{m}"),
            other => panic!("accepted: {other:?}"),
        }
        assert_eq!(zone("", New_York).expect("hub's"), New_York);
        assert_eq!(zone("Europe/Paris", New_York).expect("own"), Paris);
    }

    #[test]
    fn cron_describes_common_shapes() {
        assert_eq!(
            when(ScheduleKind::Cron, "0 9 * * 1-5").describe(Paris),
            "at 09:00 on Mon–Fri (Europe/Paris)"
        );
        assert_eq!(
            when(ScheduleKind::Cron, "30 7 * * *").describe(New_York),
            "at 07:30 every day (America/New_York)"
        );
        assert_eq!(
            when(ScheduleKind::Cron, "0 8 1 * *").describe(Tz::UTC),
            "at 08:00 on day 1 of the month (UTC)"
        );
        assert_eq!(
            when(ScheduleKind::Cron, "*/15 * * * *").describe(Tz::UTC),
            "cron */15 * * * * (UTC)"
        );
    }

    #[test]
    fn a_schedule_starts_at_its_first_due_time() {
        let now = utc(2026, 5, 1, 10, 0);
        let hourly = when(ScheduleKind::Interval, "1h");
        assert_eq!(
            first_due(&hourly, Tz::UTC, now).expect("interval"),
            (Some(now + HOUR_MS), now + HOUR_MS)
        );
        let nine = when(ScheduleKind::Cron, "0 9 * * *");
        assert_eq!(
            first_due(&nine, Paris, now).expect("cron"),
            (None, at(Paris, 2026, 5, 2, 9, 0))
        );
        let past = when(ScheduleKind::Once, "2026-04-01T09:00");
        match first_due(&past, Paris, now) {
            Err(ScheduleError::Invalid(m)) => assert!(m.contains("in the past"), "{m}"),
            other => panic!("accepted: {other:?}"),
        }
    }

    #[test]
    fn task_due_values_are_instants_in_the_zone() {
        assert_eq!(
            due_instant("2026-11-23", Paris),
            Some(at(Paris, 2026, 11, 23, 9, 0))
        );
        assert_eq!(
            due_instant("2026-11-23T18:30", New_York),
            Some(at(New_York, 2026, 11, 23, 18, 30))
        );
        assert_eq!(due_instant("soon", Paris), None);
    }

    fn reasons(p: &Plan) -> Vec<(i64, RunReason)> {
        p.runs.iter().map(|r| (r.due_at, r.reason)).collect()
    }

    #[test]
    fn plan_on_time_runs_once_as_due() {
        let hourly = when(ScheduleKind::Interval, "1h");
        let anchor = utc(2026, 5, 1, 0, 0);
        for policy in [
            MissedPolicy::Skip,
            MissedPolicy::RunOnce,
            MissedPolicy::CatchUp,
        ] {
            let p = plan(&hourly, Tz::UTC, anchor, anchor, policy, 3, anchor + 1_000);
            assert_eq!(reasons(&p), vec![(anchor, RunReason::Due)], "{policy:?}");
            assert_eq!(p.next_due, Some(anchor + HOUR_MS));
            let early = plan(&hourly, Tz::UTC, anchor, anchor, policy, 3, anchor - 1);
            assert!(early.runs.is_empty());
            assert_eq!(early.next_due, Some(anchor));
        }
    }

    #[test]
    fn plan_after_a_gap_follows_each_policy() {
        let hourly = when(ScheduleKind::Interval, "1h");
        let anchor = utc(2026, 5, 1, 0, 0);
        // Down from 00:00 to 05:30: due times 00:00 … 05:00 passed, all late.
        let now = anchor + 5 * HOUR_MS + 30 * MINUTE_MS;
        let next = Some(anchor + 6 * HOUR_MS);
        let skip = plan(&hourly, Tz::UTC, anchor, anchor, MissedPolicy::Skip, 3, now);
        assert_eq!((skip.runs.len(), skip.next_due), (0, next));
        let once = plan(
            &hourly,
            Tz::UTC,
            anchor,
            anchor,
            MissedPolicy::RunOnce,
            3,
            now,
        );
        assert_eq!(
            (reasons(&once), once.next_due),
            (vec![(anchor + 5 * HOUR_MS, RunReason::Missed)], next)
        );
        let catch = plan(
            &hourly,
            Tz::UTC,
            anchor,
            anchor,
            MissedPolicy::CatchUp,
            3,
            now,
        );
        assert_eq!(
            (reasons(&catch), catch.next_due),
            (
                vec![
                    (anchor + 3 * HOUR_MS, RunReason::CatchUp),
                    (anchor + 4 * HOUR_MS, RunReason::CatchUp),
                    (anchor + 5 * HOUR_MS, RunReason::CatchUp),
                ],
                next
            )
        );
        // Fewer missed than the bound: every one of them.
        let short = anchor + HOUR_MS + 10 * MINUTE_MS;
        let catch = plan(
            &hourly,
            Tz::UTC,
            anchor,
            anchor,
            MissedPolicy::CatchUp,
            3,
            short,
        );
        assert_eq!(
            reasons(&catch),
            vec![
                (anchor, RunReason::CatchUp),
                (anchor + HOUR_MS, RunReason::CatchUp)
            ]
        );
        // The latest one still on time runs as due, even under skip.
        let just = anchor + 2 * HOUR_MS + MINUTE_MS;
        let skip = plan(
            &hourly,
            Tz::UTC,
            anchor,
            anchor,
            MissedPolicy::Skip,
            3,
            just,
        );
        assert_eq!(reasons(&skip), vec![(anchor + 2 * HOUR_MS, RunReason::Due)]);
        let catch = plan(
            &hourly,
            Tz::UTC,
            anchor,
            anchor,
            MissedPolicy::CatchUp,
            2,
            just,
        );
        assert_eq!(
            reasons(&catch),
            vec![
                (anchor + HOUR_MS, RunReason::CatchUp),
                (anchor + 2 * HOUR_MS, RunReason::Due)
            ]
        );
    }

    #[test]
    fn plan_over_a_long_cron_gap_and_a_missed_one_shot() {
        let every_minute = when(ScheduleKind::Cron, "* * * * *");
        let due = utc(2026, 1, 1, 0, 0);
        let now = due + 90 * DAY_MS + 30_000;
        let p = plan(
            &every_minute,
            Tz::UTC,
            0,
            due,
            MissedPolicy::CatchUp,
            2,
            now,
        );
        assert_eq!(
            reasons(&p),
            vec![
                (now - 30_000 - MINUTE_MS, RunReason::Due),
                (now - 30_000, RunReason::Due)
            ]
        );
        let weekly = when(ScheduleKind::Cron, "0 9 * * 1");
        let due = at(Paris, 2026, 1, 5, 9, 0);
        let now = at(Paris, 2026, 3, 1, 12, 0);
        let p = plan(&weekly, Paris, 0, due, MissedPolicy::RunOnce, 3, now);
        assert_eq!(
            (reasons(&p), p.next_due),
            (
                vec![(at(Paris, 2026, 2, 23, 9, 0), RunReason::Missed)],
                Some(at(Paris, 2026, 3, 2, 9, 0))
            )
        );
        let once = when(ScheduleKind::Once, "2026-01-01T00:00:00Z");
        let t = utc(2026, 1, 1, 0, 0);
        let skip = plan(&once, Tz::UTC, 0, t, MissedPolicy::Skip, 3, t + DAY_MS);
        assert_eq!((skip.runs.len(), skip.next_due), (0, None));
        let run = plan(&once, Tz::UTC, 0, t, MissedPolicy::CatchUp, 3, t + DAY_MS);
        assert_eq!(
            (reasons(&run), run.next_due),
            (vec![(t, RunReason::CatchUp)], None)
        );
    }
}
