//! A manager job as `start`, `stop` and `restart` wait for it: which job, how long the wait
//! may last, who watches it, and what a failed or late one leaves to show.

use std::time::Duration;

/// How long to wait for a start, stop or restart job before giving up on it.
pub(super) const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// A job the manager runs on a unit, waited for until it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Job {
    Start,
    Stop,
    Restart,
}

impl Job {
    /// The verb as `systemctl` and our commands name it.
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Job::Start => "start",
            Job::Stop => "stop",
            Job::Restart => "restart",
        }
    }
}

/// Someone watching a job: told the unit's `STATUS=` line each time it changes while the job
/// runs, and when the wait is over, whatever its outcome.
pub(crate) trait JobWatch: Send + Sync {
    fn status(&self, unit: &str, status: &str);
    fn over(&self);
}

/// How often a watched job's unit is asked for its `STATUS=` line.
pub(super) const WATCH_EVERY: Duration = Duration::from_millis(250);

/// How a unit looked when its job failed or was given up on: what the error shows.
#[derive(Debug, Default)]
pub struct JobEnd {
    pub status: Option<String>,
    pub result: Option<String>,
}

impl JobEnd {
    pub(super) fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(st) = &self.status {
            s.push_str(&format!(
                "; its last STATUS: {}",
                crate::safe_text::visible(st)
            ));
        }
        if let Some(r) = &self.result {
            s.push_str(&format!("; unit Result: {}", crate::safe_text::visible(r)));
        }
        s
    }
}
