//! `state/gateway.json`: the gateway's health, rewritten atomically on every watchdog tick,
//! for `status` and `doctor` to read without talking to the process.
//!
//! A reader must treat a snapshot older than `stale_after_ms` as stale, never as "connected":
//! a frozen gateway stops rewriting it, and its last words would otherwise look healthy. Nor
//! may the file's own claims keep it current: a timestamp in the future is stale, the
//! deadline is capped, and a reader that knows the unit (`status`) also requires it to be
//! active and the snapshot's writer to be its main process.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::atomic_file;
use crate::bounded_read::{self, Owner, ReadError};
use crate::gateway::health::Snapshot;
use crate::gateway::outbox::{Message, State, Stats};
use crate::service::manager::Manager;
use crate::trusted_dir::{TrustError, TrustedDir};

mod reload;
pub use reload::{ReloadOutcome, ReloadRecord};

/// Why a state file cannot be shown.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateFileError {
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
    pub(crate) updated_at: String,
    pub(crate) pid: u32,
    pub(crate) profile: String,
    /// Past this age, the snapshot says nothing about the present.
    pub stale_after_ms: u64,
    /// The `STATUS=` line.
    pub(crate) summary: String,
    pub(crate) components: Vec<ComponentState>,
    /// The outbox at a glance: depth, the oldest waiting message, and what ended how. Not
    /// a health input: a platform outage makes messages wait, not the gateway unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outbox: Option<Stats>,
    /// The last delivery of each cron job with `deliver`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) deliveries: Vec<Delivery>,
    /// The local agent API: whether it takes new connections. Not a health input either: a
    /// client that floods the API must not get the gateway restarted, but `status` says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) api: Option<ApiHealth>,
    /// The bridge to the agent (`[agent]`): whether the agent is there and taking messages.
    /// Not a health input: an agent that is down makes messages wait in the spool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<AgentHealth>,
    /// The access rules: messages admitted and refused, by rule. Not a health input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) access: Option<AccessHealth>,
    /// This gateway's place in its profile's cluster (`[cluster]`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cluster: Option<ClusterHealth>,
    /// The run's last reload, if it had one: a refused one stays here until a good one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reload: Option<ReloadRecord>,
}

/// A cluster member at a glance (cluster/, docs/cluster.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterHealth {
    /// `active` or `standby`.
    pub(crate) role: String,
    /// This gateway's node name.
    pub(crate) node: String,
    /// The active, `NODE since TIME`; for a standby that cannot reach etcd, none.
    pub(crate) active: Option<String>,
    /// The active's own view: how long ago it last renewed its lease.
    pub(crate) lease_age_ms: Option<u64>,
    pub(crate) lease_ttl_ms: u64,
    /// Why a standby is not active, as `STATUS=` says it.
    pub(crate) standing: Option<String>,
    /// The active is another machine that goes by this node's name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) name_clash: bool,
    /// The profile's other members, as their records in etcd last said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) peers: Vec<PeerHealth>,
}

/// Another member of the profile's cluster (cluster/presence.rs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerHealth {
    pub(crate) node: String,
    /// A short hash of its machine's identity.
    pub(crate) machine: String,
    /// How far its wall clock is ahead of this host's (negative: behind), as measured when
    /// its last record arrived; none until one has.
    pub(crate) skew_ms: Option<i64>,
}

/// A front end's health, as the state file shows it.
pub enum FrontendHealth {
    Api(ApiHealth),
    Agent(AgentHealth),
    Access(AccessHealth),
}

/// The access rules at a glance (access.rs): the chat messages judged since the gateway
/// started, by the rule that decided each.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessHealth {
    /// Admitted, by the rule that admitted them (`allow-users`, `pairing`, ...).
    pub admitted: std::collections::BTreeMap<String, u64>,
    /// Refused, by the rule that refused them (`unknown-sender`, `budget`, ...).
    pub refused: std::collections::BTreeMap<String, u64>,
}

/// The agent bridge at a glance (agent/link.rs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentHealth {
    /// `hermes-relay` or `openai`.
    pub(crate) kind: String,
    /// Where the agent is reached: the connector's address, or the API's URL.
    pub(crate) endpoint: String,
    /// The agent is there: dialled in (relay), or answered its last call (openai).
    pub(crate) connected: bool,
    /// When `connected` last changed, RFC 3339 (the bridge's start, if it never did).
    pub(crate) since: String,
    /// The last message the agent took: its event id and when, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_taken: Option<Taken>,
    /// When the oldest message still waiting for the agent arrived, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) oldest_waiting: Option<String>,
    /// What went wrong last (a refused dial, a failed call), if anything did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taken {
    pub(crate) event: String,
    pub(crate) at: String,
}

/// The agent API at a glance (api/connections.rs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiHealth {
    pub(crate) state: ApiCondition,
    /// Connections open now, and the most it keeps open.
    pub(crate) connections: u64,
    pub(crate) max_connections: u64,
    /// Of the open connections, the long-polls waiting for an event.
    pub(crate) long_polls: u64,
    /// Connections closed (idle or slow) or answered early (long-polls) to admit new ones,
    /// since the gateway started.
    pub(crate) shed: u64,
    /// The last failed accept, if one ever failed.
    pub(crate) last_error: Option<String>,
}

/// Whether the API takes new connections, judged over the last few seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiCondition {
    /// Every connection got a place at once.
    Serving,
    /// Every place was taken: connections were shed to admit new ones, or new ones waited.
    Saturated,
    /// Accepting a connection failed (out of file descriptors, say): new clients wait or
    /// are refused by the kernel.
    AcceptFailing,
    /// A state a newer gateway wrote.
    #[serde(other)]
    Unknown,
}

/// A cron job's last delivery: the message and where it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Delivery {
    pub(crate) job: String,
    /// `None` when the job has not delivered anything the outbox still holds.
    pub(crate) message: Option<String>,
    pub(crate) state: Option<State>,
    pub(crate) updated_at: Option<String>,
    pub(crate) last_error: Option<String>,
}

impl Delivery {
    pub(crate) fn of(job: &str, message: Option<Message>) -> Self {
        Self {
            job: job.to_owned(),
            message: message.as_ref().map(|m| m.id.clone()),
            state: message.as_ref().map(|m| m.state),
            updated_at: message.as_ref().map(|m| m.updated_at.clone()),
            last_error: message.and_then(|m| m.last_error.map(|e| e.to_string())),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ComponentState {
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) state: String,
    pub(crate) fresh: bool,
    pub(crate) last_beat_age_ms: u64,
    pub(crate) deadline_ms: u64,
    pub(crate) reconnects: u64,
    pub(crate) attempts: u64,
    pub(crate) last_error: Option<String>,
    pub(crate) outage_ms: Option<u64>,
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

impl StateFile {
    pub(crate) fn from_snapshot(snapshot: &Snapshot, profile: &str, stale_after: Duration) -> Self {
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
                    kind: c.kind.to_string(),
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
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        }
    }

    /// Whether this snapshot says what `other` says, apart from the clock: when each was
    /// written and the ages that grow by themselves. The gateway need not rewrite such a file
    /// until its age asks for it (docs/health.md, "When the file is written").
    pub(crate) fn says_the_same_as(&self, other: &StateFile) -> bool {
        self.timeless() == other.timeless()
    }

    fn timeless(&self) -> StateFile {
        let mut t = self.clone();
        t.updated_at.clear();
        for c in &mut t.components {
            c.last_beat_age_ms = 0;
            c.outage_ms = c.outage_ms.map(|_| 0);
        }
        if let Some(outbox) = &mut t.outbox {
            outbox.oldest_queued_secs = outbox.oldest_queued_secs.map(|_| 0);
        }
        if let Some(cluster) = &mut t.cluster {
            cluster.lease_age_ms = cluster.lease_age_ms.map(|_| 0);
        }
        t
    }

    pub(crate) fn with_frontends(
        mut self,
        health: impl IntoIterator<Item = FrontendHealth>,
    ) -> Self {
        for h in health {
            match h {
                FrontendHealth::Api(api) => self.api = Some(api),
                FrontendHealth::Agent(agent) => self.agent = Some(agent),
                FrontendHealth::Access(access) => self.access = Some(access),
            }
        }
        self
    }

    pub(crate) fn with_outbox(mut self, stats: Stats) -> Self {
        self.outbox = Some(stats);
        self
    }

    pub(crate) fn with_cluster(mut self, cluster: Option<ClusterHealth>) -> Self {
        self.cluster = cluster;
        self
    }

    pub(crate) fn with_reload(mut self, reload: Option<ReloadRecord>) -> Self {
        self.reload = reload;
        self
    }

    pub(crate) fn with_deliveries(mut self, deliveries: Vec<Delivery>) -> Self {
        self.deliveries = deliveries;
        self
    }

    /// The last words of a run that ended in an error: no components, the reason as the
    /// summary, and stale from the moment it is written. Under launchd a conflict exits 0 (so
    /// that `KeepAlive` leaves it down), and `launchctl print` then shows `last exit code = 0`:
    /// this is where `status` finds why the gateway is not running.
    pub(crate) fn exited(profile: &str, status: u8, manager: Manager, reason: &str) -> Self {
        Self {
            updated_at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            pid: std::process::id(),
            profile: profile.to_owned(),
            stale_after_ms: 0,
            summary: format!("exited {status} under {manager}: {reason}"),
            components: vec![],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        }
    }

    /// Replace the file at `path` whole, in a `state/` directory that only the gateway's user
    /// can change ([`TrustedDir`]), so that nobody else's link or file there is written
    /// through or taken for the gateway's.
    pub(crate) fn write(&self, path: &Path) -> Result<(), TrustError> {
        let json = serde_json::to_vec(self).expect("state serialises");
        let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        else {
            return Err(TrustError::Io {
                op: "write",
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file's path"),
            });
        };
        let dir = TrustedDir::create(dir, Owner::SelfOrRoot)?;
        atomic_file::write_in(&dir, name, &json, 0o644, atomic_file::Sync::Replace)
    }

    /// The snapshot at `path`, if there is a readable one, from any owner the profile's home
    /// accepts: for doctor and the demo, which only need to know whether there is one.
    pub(crate) fn read(path: &Path) -> Option<StateFile> {
        Self::load(path, Owner::SelfRootOrDirectory).ok().flatten()
    }

    /// The snapshot at `path` (`None` when there is no file), or why it cannot be shown. The
    /// read is bounded ([`bounded_read`]): a 3 GB sparse file, a FIFO or a symlink to
    /// `/dev/zero` is refused at once, with the file named, instead of costing `status`
    /// seconds and gigabytes.
    pub(crate) fn load(path: &Path, owner: Owner) -> Result<Option<StateFile>, StateFileError> {
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

    /// How old the snapshot is now: `None` if its timestamp is unreadable or further in the
    /// future than [`CLOCK_SKEW`] allows (within it, the age is 0).
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        let t = humantime::parse_rfc3339(&self.updated_at).ok()?;
        match now.duration_since(t) {
            Ok(age) => Some(age),
            Err(ahead) if ahead.duration() <= CLOCK_SKEW => Some(Duration::ZERO),
            Err(_) => None,
        }
    }

    /// How long the snapshot stays current: its own `stale_after_ms`, but never more than
    /// [`MAX_STALE_AFTER`], so a file cannot claim to be current for a year.
    pub fn stale_after(&self) -> Duration {
        Duration::from_millis(self.stale_after_ms).min(MAX_STALE_AFTER)
    }

    /// Why the snapshot says nothing about the present judged by its clock alone, or `None`
    /// when it is current.
    pub(crate) fn staleness(&self, now: SystemTime) -> Option<Stale> {
        let Ok(t) = humantime::parse_rfc3339(&self.updated_at) else {
            return Some(Stale::NoTime);
        };
        match now.duration_since(t) {
            Ok(age) if age > self.stale_after() => Some(Stale::Old),
            Ok(_) => None,
            Err(ahead) if ahead.duration() > CLOCK_SKEW => Some(Stale::Future),
            Err(_) => None,
        }
    }

    /// [`StateFile::staleness`], and also against the unit that should be running the
    /// gateway: a snapshot is current only while the unit is `active` (or `reloading`) and
    /// was written by its main process. A dead unit's last snapshot, or one left by the
    /// previous run of a unit that has just restarted, must never read as "connected",
    /// however recent its timestamp.
    pub(crate) fn staleness_for(
        &self,
        now: SystemTime,
        active_state: &str,
        main_pid: u32,
    ) -> Option<Stale> {
        if !matches!(active_state, "active" | "reloading") || main_pid == 0 {
            return Some(Stale::NotRunning);
        }
        if self.pid != main_pid {
            return Some(Stale::OtherProcess);
        }
        self.staleness(now)
    }

    pub fn is_stale(&self, now: SystemTime) -> bool {
        self.staleness(now).is_some()
    }
}

/// How far ahead of this machine's clock `updated_at` may be before the snapshot is stale. The
/// gateway stamps it with the same clock `status` reads, so only a clock step between the
/// write and the read puts it ahead, and then by little; a year 2999 timestamp is a forgery.
pub(crate) const CLOCK_SKEW: Duration = Duration::from_secs(5);

/// The most a snapshot may stay current, whatever its `stale_after_ms` says. The gateway
/// writes 3 ticks + 1 s, at most 16 s (a tick is at most 5 s); a minute leaves room for that
/// to change and still shows a frozen gateway as stale within a minute.
pub(crate) const MAX_STALE_AFTER: Duration = Duration::from_secs(60);

/// Why a snapshot is not current. `status --json` reports it as `health.stale_reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Stale {
    /// Older than its `stale_after_ms` (at most [`MAX_STALE_AFTER`]): the gateway stopped
    /// writing it.
    Old,
    /// `updated_at` is ahead of this machine's clock by more than [`CLOCK_SKEW`].
    Future,
    /// `updated_at` is not an RFC 3339 time.
    NoTime,
    /// The unit is not active: no gateway runs to write it.
    NotRunning,
    /// Written by another process than the unit's main process.
    OtherProcess,
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
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
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

    fn at(t: SystemTime) -> String {
        humantime::format_rfc3339_millis(t).to_string()
    }

    #[test]
    fn a_timestamp_in_the_future_is_stale_beyond_a_small_skew() {
        let now = SystemTime::now();
        let year_2999 = sample("2999-01-01T00:00:00.000Z");
        assert_eq!(year_2999.staleness(now), Some(Stale::Future));
        assert!(year_2999.is_stale(now));
        assert_eq!(
            year_2999.age(now),
            None,
            "an age from the future is unknown"
        );
        let ahead = sample(&at(now + CLOCK_SKEW + Duration::from_secs(1)));
        assert_eq!(ahead.staleness(now), Some(Stale::Future));
        // A clock that stepped back a little between write and read is not a forgery.
        let skewed = sample(&at(now + Duration::from_secs(2)));
        assert_eq!(skewed.staleness(now), None);
        assert_eq!(skewed.age(now), Some(Duration::ZERO));
    }

    #[test]
    fn a_huge_stale_after_is_clamped() {
        let now = SystemTime::now();
        let mut s = sample(&at(now - Duration::from_secs(3600)));
        s.stale_after_ms = u64::MAX;
        assert_eq!(s.stale_after(), MAX_STALE_AFTER);
        assert_eq!(s.staleness(now), Some(Stale::Old));
        let mut recent = sample(&at(now - MAX_STALE_AFTER + Duration::from_secs(5)));
        recent.stale_after_ms = u64::MAX;
        assert_eq!(recent.staleness(now), None);
        // Below the cap a snapshot's own deadline applies.
        let mut short = sample(&at(now - Duration::from_secs(20)));
        short.stale_after_ms = 16_000;
        assert_eq!(short.staleness(now), Some(Stale::Old));
    }

    #[test]
    fn only_an_active_units_main_process_writes_a_current_snapshot() {
        let now = SystemTime::now();
        let s = sample(&at(now)); // pid 1
        assert_eq!(s.staleness_for(now, "active", 1), None);
        assert_eq!(s.staleness_for(now, "reloading", 1), None);
        for dead in ["inactive", "failed", "activating", "deactivating", ""] {
            assert_eq!(
                s.staleness_for(now, dead, 1),
                Some(Stale::NotRunning),
                "{dead}"
            );
        }
        assert_eq!(s.staleness_for(now, "active", 0), Some(Stale::NotRunning));
        assert_eq!(s.staleness_for(now, "active", 2), Some(Stale::OtherProcess));
        // The unit is checked first: a forged future time on a dead unit is "not running".
        let forged = sample("2999-01-01T00:00:00.000Z");
        assert_eq!(
            forged.staleness_for(now, "inactive", 0),
            Some(Stale::NotRunning)
        );
        assert_eq!(forged.staleness_for(now, "active", 1), Some(Stale::Future));
    }

    #[test]
    fn an_exit_record_names_the_reason_and_is_stale_at_once() {
        let s = StateFile::exited(
            "coder",
            0,
            Manager::Launchd,
            "token for adapter dc already held",
        );
        assert_eq!(
            s.summary,
            "exited 0 under launchd: token for adapter dc already held"
        );
        assert!(s.components.is_empty());
        assert!(s.is_stale(SystemTime::now() + Duration::from_millis(1)));
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
