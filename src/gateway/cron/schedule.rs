//! When a job is due: a cron pattern advanced by polling it with the wall clock, which is an
//! argument, so missed runs and clock steps are tested with synthetic times.

use std::cmp::Ordering;

use croner::{Cron, CronDateTime};

/// Counting missed occurrences is only for the log line; after a year asleep a per-second job
/// would otherwise make one tick search through millions of them.
pub(super) const MISSED_COUNT_CAP: u32 = 10_000;

/// A wall clock that moves back by less than this (an NTP correction, the end of daylight
/// saving time in a zone-less clock) keeps the pending due time, so a job that already ran is
/// not run again. A bigger step back (a clock that booted wrong and was fixed) recomputes the
/// due time, or the job would wait until the wrong date came round again. Same rule as Vixie
/// cron.
const BACKWARD_RESET_SECS: i64 = 3 * 3600;

// ---- wall clock ----

/// Schedules are evaluated in local time, like cron(8) and systemd timers: "0 9 * * *" is
/// nine in the morning where the machine is.
pub(crate) type Wall = chrono::DateTime<chrono::Local>;

/// The current wall-clock time, read once per tick.
pub(crate) fn wall_now() -> Wall {
    chrono::Local::now()
}

// ---- due times ----

/// What a schedule says at one wall-clock instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Poll<T> {
    /// Not due yet (or never again).
    Wait,
    /// Due: run once now. `missed` more occurrences fell between `due` and now (the machine
    /// slept, the process was stopped, the clock jumped); they are skipped, not caught up.
    /// Counted up to 10,000.
    Run { due: T, missed: u32 },
}

/// One job's due time, advanced by polling it with the wall clock.
#[derive(Clone, Debug)]
pub(crate) struct Schedule<T> {
    cron: Cron,
    next_due: Option<T>,
    last_now: T,
}

impl<T: CronDateTime> Schedule<T> {
    /// The first run is the first occurrence strictly after `now`: starting the gateway does
    /// not count as having missed the previous one.
    pub(crate) fn new(cron: Cron, now: T) -> Self {
        let next_due = cron.find_next_occurrence(&now, false).ok();
        Self {
            cron,
            next_due,
            last_now: now,
        }
    }

    /// `None` when the pattern has no future occurrence (e.g. "0 0 30 2 *").
    pub(crate) fn next_due(&self) -> Option<&T> {
        self.next_due.as_ref()
    }

    /// Due once `now` reaches the due time. The next due time is then the first occurrence
    /// strictly after `now`, not after the old due time, so however long the gap, it yields
    /// exactly one run.
    pub(crate) fn poll(&mut self, now: T) -> Poll<T> {
        let stepped_back = now
            .checked_add_seconds(BACKWARD_RESET_SECS)
            .is_some_and(|t| t.cmp_instant(&self.last_now) == Ordering::Less);
        self.last_now = now.clone();
        if stepped_back {
            self.next_due = self.cron.find_next_occurrence(&now, false).ok();
            return Poll::Wait;
        }
        let due = match &self.next_due {
            Some(due) if due.cmp_instant(&now) != Ordering::Greater => due.clone(),
            _ => return Poll::Wait,
        };
        let mut missed = 0;
        let mut cursor = due.clone();
        while missed < MISSED_COUNT_CAP {
            match self.cron.find_next_occurrence(&cursor, false) {
                Ok(t) if t.cmp_instant(&now) != Ordering::Greater => {
                    missed += 1;
                    cursor = t;
                }
                _ => break,
            }
        }
        self.next_due = self.cron.find_next_occurrence(&now, false).ok();
        Poll::Run { due, missed }
    }
}
