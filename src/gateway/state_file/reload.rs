//! The state file's record of the last reload (SIGHUP, `hermes-svc reload`): for `reload` to
//! wait on, and for `status` and `doctor` to show a refusal until the next good reload.

use serde::{Deserialize, Serialize};

/// The last reload of this run: its number, when, and what came of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadRecord {
    /// 1 for the run's first reload, one more for each after it: `reload` waits for it to
    /// change, which no clock can get wrong.
    pub generation: u64,
    /// `CLOCK_MONOTONIC` (µs, the clock every process of the machine shares) when it began,
    /// before the files were read: `reload` waits for one that began after its signal, since
    /// one that began before may have read the files before they were last written.
    #[serde(default)]
    pub began_monotonic_usec: u64,
    /// When it ended, RFC 3339, UTC.
    pub at: String,
    pub outcome: ReloadOutcome,
    /// What was applied, or why the new configuration was refused.
    pub reason: String,
}

/// What came of a reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReloadOutcome {
    /// The new configuration runs.
    Applied,
    /// The running configuration stays as it was.
    Refused,
    /// An outcome a newer gateway wrote.
    #[serde(other)]
    Unknown,
}

impl ReloadOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadOutcome::Applied => "applied",
            ReloadOutcome::Refused => "refused",
            ReloadOutcome::Unknown => "unknown",
        }
    }
}
