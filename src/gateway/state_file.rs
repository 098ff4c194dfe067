//! `state/gateway.json`: the gateway's health, rewritten atomically on every watchdog tick,
//! for `status` and `doctor` to read without talking to the process.
//!
//! A reader must treat a snapshot older than `stale_after_ms` as stale, never as "connected":
//! a frozen gateway stops rewriting it, and its last words would otherwise look healthy.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::atomic_file;
use crate::bounded_read::{self, Owner, ReadError};
use crate::gateway::health::Snapshot;

/// Why a state file cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(
        "{path} is not a gateway state file ({error}); a running gateway rewrites it on every tick, so if none runs it can be removed"
    )]
    Invalid {
        path: PathBuf,
        error: serde_json::Error,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    /// RFC 3339, UTC, milliseconds.
    pub updated_at: String,
    pub pid: u32,
    pub profile: String,
    /// Past this age, the snapshot says nothing about the present.
    pub stale_after_ms: u64,
    /// The `STATUS=` line.
    pub summary: String,
    pub components: Vec<ComponentState>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComponentState {
    pub name: String,
    pub kind: String,
    pub state: String,
    pub fresh: bool,
    pub last_beat_age_ms: u64,
    pub deadline_ms: u64,
    pub reconnects: u64,
    pub attempts: u64,
    pub last_error: Option<String>,
    pub outage_ms: Option<u64>,
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

impl StateFile {
    pub fn from_snapshot(snapshot: &Snapshot, profile: &str, stale_after: Duration) -> Self {
        Self {
            updated_at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            pid: std::process::id(),
            profile: profile.to_owned(),
            stale_after_ms: ms(stale_after),
            summary: snapshot.summary(),
            components: snapshot
                .components
                .iter()
                .map(|c| ComponentState {
                    name: c.name.clone(),
                    kind: c.kind.clone(),
                    state: c.state.to_string(),
                    fresh: c.fresh,
                    last_beat_age_ms: ms(c.last_beat_age),
                    deadline_ms: ms(c.deadline),
                    reconnects: c.reconnects,
                    attempts: c.attempts,
                    last_error: c.last_error.clone(),
                    outage_ms: c.outage.map(ms),
                })
                .collect(),
        }
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).expect("state serialises");
        atomic_file::write_with(path, &json, 0o644, atomic_file::Sync::Replace)
    }

    /// The snapshot at `path`, if there is a readable one, from any owner the profile's home
    /// accepts: for doctor and the demo, which only need to know whether there is one.
    pub fn read(path: &Path) -> Option<StateFile> {
        Self::load(path, Owner::SelfRootOrDirectory).ok().flatten()
    }

    /// The snapshot at `path` (`None` when there is no file), or why it cannot be shown. The
    /// read is bounded ([`bounded_read`]): a 3 GB sparse file, a FIFO or a symlink to
    /// `/dev/zero` is refused at once, with the file named, instead of costing `status`
    /// seconds and gigabytes.
    pub fn load(path: &Path, owner: Owner) -> Result<Option<StateFile>, StateFileError> {
        let Some(bytes) = bounded_read::read(path, bounded_read::LIMIT, owner)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| StateFileError::Invalid {
                path: path.to_owned(),
                error,
            })
    }

    /// How old the snapshot is now (`None` if its timestamp is unreadable).
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        let t = humantime::parse_rfc3339(&self.updated_at).ok()?;
        Some(now.duration_since(t).unwrap_or_default())
    }

    pub fn is_stale(&self, now: SystemTime) -> bool {
        self.age(now)
            .is_none_or(|a| a > Duration::from_millis(self.stale_after_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(updated_at: &str) -> StateFile {
        StateFile {
            updated_at: updated_at.into(),
            pid: 1,
            profile: "coder".into(),
            stale_after_ms: 16_000,
            summary: "1/1 adapters ready".into(),
            components: vec![],
        }
    }

    #[test]
    fn an_old_snapshot_is_stale_and_a_fresh_one_is_not() {
        let now = SystemTime::now();
        let fresh = sample(&humantime::format_rfc3339_millis(now).to_string());
        assert!(!fresh.is_stale(now));
        let old =
            sample(&humantime::format_rfc3339_millis(now - Duration::from_secs(60)).to_string());
        assert!(old.is_stale(now));
        assert!(
            sample("not a time").is_stale(now),
            "unreadable means stale, never connected"
        );
    }

    #[test]
    fn round_trips_through_the_file() {
        let dir = std::env::temp_dir().join(format!("hsv-state-{}", std::process::id()));
        let path = dir.join("state/gateway.json");
        let s = sample("2026-01-01T00:00:00.000Z");
        s.write(&path).unwrap();
        assert_eq!(StateFile::read(&path), Some(s));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
