//! The scheduler: schedules kept in `hub.db` (fixed interval, cron with a time zone,
//! one-shot), each run through the agent with the scheduled trigger and recorded; a
//! task's agent job is a schedule that follows its task; reminders for people's tasks.
//!
//! - [`store`]: `ScheduleStore`, plain persistence of schedules, runs and reminders;
//! - [`cli`]: `hearth-hub schedules …`;
//! - [`service`]: `Scheduler`, the task that starts runs when they fall due, through
//!   the agent, and records and notifies them;
//! - [`timing`]: pure due-time arithmetic (specs, zones, daylight saving) and the
//!   missed-run planner.
//! - [`tasks`]: a task's agent job, the schedule `task-<id>` kept equal to its task.
//! - [`reminders`]: one `TaskDue` notification when a person's task falls due.
//!
//! Never writes a task document for a run: run state stays on the hub.

pub mod cli;
pub mod reminders;
pub mod service;
pub mod store;
pub mod tasks;
pub mod timing;

pub use service::{Scheduler, SchedulerConfig, SchedulerDeps, SystemClock, WallClock};
pub use store::{
    MissedPolicy, NewSchedule, Run, RunEnd, RunReason, RunStatus, Schedule, ScheduleError,
    ScheduleFilter, ScheduleKind, SchedulePatch, ScheduleStore,
};
