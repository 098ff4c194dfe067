//! The cron ticker: runs `[[cron]]` jobs on their own task, beating its own heartbeat.
//!
//! Two clocks are involved on purpose. Ticks run on the monotonic clock, so a wall-clock step
//! can never stall or flood the heartbeat. Due times are wall-clock times, because a schedule
//! like "0 9 * * *" means nine o'clock on the calendar, not "some multiple of 24 h since start".
//! The due-time logic ([`Schedule`](schedule::Schedule), `Ticker`) takes the wall clock as an
//! argument, so it is tested with synthetic times rather than by waiting for real minutes to
//! pass.
//!
//! `schedule` decides when a job is due, `ticker` wakes every second and starts what is due,
//! `job` runs one job to its end, and `log` is the file the jobs write to.

mod deliver;
mod job;
mod log;
mod schedule;
mod ticker;

pub(crate) use job::CronContext;

/// A job as the ticker runs it: its target already parsed once, at load, and kept as its
/// platform spells it, which is what the outbox takes.
pub type CronSpec = crate::config::CronSpec<String>;
pub(crate) use ticker::{run, DEADLINE};

#[cfg(test)]
mod tests;
