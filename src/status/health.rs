//! The health section of `status`: a gateway's own report (`state/gateway.json`: its
//! components, outbox, agent API and cron deliveries), judged against the process that should
//! have written it, in text and JSON. One section for every row `status` prints, under either
//! manager: a systemd unit, a launchd job, or a gateway no manager runs. Only [`Writer`] says
//! which, so the staleness rule (docs/health.md) and the words are the same for all three.

use std::path::Path;
use std::time::SystemTime;

use serde::Serialize;

use crate::bounded_read::Owner;
use crate::gateway::outbox::Stats;
use crate::gateway::state_file::{
    AccessHealth, AgentHealth, ApiHealth, ClusterHealth, ComponentState, Delivery, ReloadOutcome,
    ReloadRecord, Stale, StateFile,
};
use crate::launchd::launchctl::JobState;
use crate::safe_text::visible;

mod lines;

use lines::{
    access_line, agent_line, api_line, cluster_line, component_line, delivery_line, outbox_line,
};

/// The process a snapshot should come from: a current one carries its pid, and the words on
/// one that is not say why in terms of it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Writer<'a> {
    /// A systemd unit's gateway: its `ActiveState` and `MainPID`.
    Unit {
        active_state: &'a str,
        main_pid: u32,
    },
    /// A launchd job's gateway, as `launchctl print` tells it: the job's state (`None` when it
    /// is not loaded) and its pid.
    Job {
        state: Option<JobState>,
        pid: Option<u32>,
    },
    /// A gateway no manager runs: the process holding the profile's lock.
    LockHolder { pid: u32 },
}

impl<'a> Writer<'a> {
    /// The state and pid the staleness rule judges by ([`StateFile::staleness_for`]): a
    /// unit's own; a job launchd says is running as an active unit with the job's pid, any
    /// other job as one that is not running; the lock holder as an active unit's main process.
    fn judged_as(self) -> (&'a str, u32) {
        match self {
            Writer::Unit {
                active_state,
                main_pid,
            } => (active_state, main_pid),
            Writer::Job {
                state: Some(JobState::Running),
                pid,
            } => ("active", pid.unwrap_or(0)),
            Writer::Job { .. } => ("", 0),
            Writer::LockHolder { pid } => ("active", pid),
        }
    }

    /// The pid a current snapshot carries; 0 when there is none.
    fn pid(self) -> u32 {
        match self {
            Writer::Unit { main_pid, .. } => main_pid,
            Writer::Job { pid, .. } => pid.unwrap_or(0),
            Writer::LockHolder { pid } => pid,
        }
    }

    /// Whose pid a current snapshot carries, for "written by PID A, not by WHOSE PID B".
    fn whose(self) -> &'static str {
        match self {
            Writer::Unit { .. } => "the unit's",
            Writer::Job { .. } => "the job's",
            Writer::LockHolder { .. } => "the running gateway's",
        }
    }

    /// Why no process of this writer's can have written a current snapshot.
    fn not_running(self) -> String {
        match self {
            Writer::Unit { active_state, .. } => match active_state {
                "active" | "reloading" => "the unit has no main process".to_owned(),
                "" => "the unit is not active, so no gateway is running".to_owned(),
                state => format!("the unit is {}, so no gateway is running", visible(state)),
            },
            Writer::Job { state, .. } => match state {
                None => "the job is not loaded, so no gateway is running".to_owned(),
                Some(JobState::NotRunning) => {
                    "the job is not running, so no gateway is running".to_owned()
                }
                Some(JobState::Unknown) => {
                    "launchctl print does not say the job is running".to_owned()
                }
                Some(JobState::Running) => "launchd names no pid for the job".to_owned(),
            },
            Writer::LockHolder { .. } => "no gateway is running".to_owned(),
        }
    }
}

/// One gateway's health section: its state file as [`Health`], or why it cannot be shown.
/// Part of every `status --json` row (docs/status.md), flattened into it as `health` and
/// `health_error`; fields are only ever added.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct HealthSection {
    /// The gateway's own health report (`state/gateway.json`); `null` when it has written none
    /// or it cannot be shown.
    pub(crate) health: Option<Health>,
    /// Why the state file cannot be shown (too large, not a regular file, a symlink, someone
    /// else's, not JSON); `null` when it could be read or there is none.
    pub(crate) health_error: Option<String>,
}

impl HealthSection {
    /// The state file at `path`, read as `owner` allows and judged against `writer`.
    pub(crate) fn read(path: &Path, owner: Owner, writer: Writer) -> Self {
        match Health::read(path, owner, writer) {
            Ok(health) => HealthSection {
                health,
                health_error: None,
            },
            Err(why) => HealthSection {
                health: None,
                health_error: Some(why),
            },
        }
    }

    /// The section's lines under a row: the health, and why it is not shown when it cannot be.
    pub(crate) fn to_text(&self, writer: Writer) -> String {
        let mut s = String::new();
        if let Some(h) = &self.health {
            s.push_str(&h.to_text(writer));
        }
        if let Some(why) = &self.health_error {
            s.push_str(&format!("{:<16} health: not shown: {}\n", "", visible(why)));
        }
        s
    }
}

/// The gateway's state file as `status` shows it. A snapshot that is not current (see
/// [`StateFile::staleness_for`]) is marked stale and its components' states are not to be
/// trusted: a frozen or dead gateway's last words would otherwise read as "connected".
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Health {
    pub(crate) updated_at: String,
    pub(crate) age_ms: Option<u64>,
    pub(crate) stale: bool,
    /// Why `stale` is true; `null` when it is false.
    pub(crate) stale_reason: Option<Stale>,
    /// The process that wrote the snapshot.
    pub(crate) pid: u32,
    pub(crate) summary: String,
    pub(crate) components: Vec<ComponentState>,
    /// The outbox: how many messages wait, the oldest one's age, and what ended how.
    pub(crate) outbox: Option<Stats>,
    /// Each delivering cron job's last delivery.
    pub(crate) deliveries: Vec<Delivery>,
    /// The local agent API: whether it takes new connections; `null` from a gateway that
    /// did not say.
    pub(crate) api: Option<ApiHealth>,
    /// The agent link (`[agent]`); `null` without one.
    pub(crate) agent: Option<AgentHealth>,
    /// The access rules: chat messages admitted and refused since the gateway started, by
    /// rule; `null` from a gateway that did not say.
    pub(crate) access: Option<AccessHealth>,
    /// The gateway's place in its cluster (`[cluster]`); `null` without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cluster: Option<ClusterHealth>,
    /// The run's last reload (`hermes-svc reload`): a refused one, and why, stays shown until
    /// the next good one; absent when the run had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reload: Option<ReloadRecord>,
}

impl Health {
    /// The state file as health, `Ok(None)` when there is none, or why it cannot be shown
    /// (with the file named). It is current only while `writer` runs and its process wrote it.
    /// `owner` is whose the file may be: the caller's or root's when `status` runs as the
    /// profile's user; in system scope root looks at another account's profile, whose files
    /// belong to that account (the owner of the profile's directory).
    fn read(path: &Path, owner: Owner, writer: Writer) -> Result<Option<Health>, String> {
        let state = match StateFile::load(path, owner) {
            Ok(Some(state)) => state,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("{:#}", anyhow::Error::from(e))),
        };
        let now = std::time::SystemTime::now();
        let (active_state, main_pid) = writer.judged_as();
        let stale_reason = state.staleness_for(now, active_state, main_pid);
        Ok(Some(Health {
            age_ms: state.age(now).map(|a| a.as_millis() as u64),
            stale: stale_reason.is_some(),
            stale_reason,
            pid: state.pid,
            updated_at: state.updated_at,
            summary: state.summary,
            components: state.components,
            outbox: state.outbox,
            deliveries: state.deliveries,
            api: state.api,
            agent: state.agent,
            access: state.access,
            cluster: state.cluster,
            reload: state.reload,
        }))
    }

    /// The component lines, after a warning line when the snapshot is not current, which
    /// says why in words, about the process that should have written it. Every string from
    /// the state file goes through [`visible`], so none can drive the reader's terminal.
    pub(crate) fn to_text(&self, writer: Writer) -> String {
        let pad = "";
        let mut s = String::new();
        if let Some(reason) = self.stale_reason {
            let age = self
                .age_ms
                .map(|a| {
                    let a = std::time::Duration::from_millis(a);
                    format!("{} ago", crate::gateway::health::short(a))
                })
                .unwrap_or_else(|| "age unknown".into());
            let why = match reason {
                Stale::Old => "the gateway is not reporting".to_owned(),
                Stale::Future => {
                    "its time is ahead of this machine's clock, so it cannot be trusted".to_owned()
                }
                Stale::NoTime => "its time cannot be read".to_owned(),
                Stale::NotRunning => writer.not_running(),
                Stale::OtherProcess => format!(
                    "it was written by PID {}, not by {} PID {}",
                    self.pid,
                    writer.whose(),
                    writer.pid()
                ),
            };
            s.push_str(&format!(
                "{pad:<16} health: STALE snapshot from {} ({age}); {why}; states below are not current\n",
                visible(&self.updated_at),
            ));
        }
        if let Some(cluster) = &self.cluster {
            s.push_str(&format!("{pad:<16} {}\n", cluster_line(cluster)));
        }
        if let Some(r) = &self.reload {
            s.push_str(&format!("{pad:<16} {}\n", reload_line(r)));
        }
        for c in &self.components {
            s.push_str(&format!("{pad:<16} {}\n", component_line(c, self.stale)));
        }
        if let Some(o) = &self.outbox {
            s.push_str(&format!("{pad:<16} {}\n", outbox_line(o)));
        }
        if let Some(api) = &self.api {
            s.push_str(&format!("{pad:<16} {}\n", api_line(api)));
        }
        if let Some(agent) = &self.agent {
            s.push_str(&format!(
                "{pad:<16} {}\n",
                agent_line(agent, SystemTime::now())
            ));
        }
        if let Some(access) = &self.access {
            s.push_str(&format!("{pad:<16} {}\n", access_line(access)));
        }
        for d in &self.deliveries {
            s.push_str(&format!("{pad:<16} {}\n", delivery_line(d)));
        }
        s
    }
}

/// The last reload: a refusal says so loudly, with why, since the running configuration is
/// then not the file's.
fn reload_line(r: &ReloadRecord) -> String {
    let what = match r.outcome {
        ReloadOutcome::Refused => "REFUSED (the running configuration is not gateway.toml's)",
        other => other.as_str(),
    };
    format!(
        "reload #{} {what} at {}: {}",
        r.generation,
        visible(&r.at),
        visible(&r.reason)
    )
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn a_refused_reload_says_so_with_why_and_an_applied_one_quietly() {
        let mut r = ReloadRecord {
            generation: 2,
            began_monotonic_usec: 1,
            at: "2026-12-06T12:00:00.000Z".into(),
            outcome: ReloadOutcome::Refused,
            reason: "/h/gateway.toml:4: expected `=`\u{1b}[2J".into(),
        };
        let line = reload_line(&r);
        assert!(line.starts_with("reload #2 REFUSED"), "{line}");
        assert!(
            line.contains("gateway.toml:4") && !line.contains('\u{1b}'),
            "{line}"
        );
        r.outcome = ReloadOutcome::Applied;
        assert!(reload_line(&r).starts_with("reload #2 applied at"));
    }

    fn unit(active_state: &str, main_pid: u32) -> Writer<'_> {
        Writer::Unit {
            active_state,
            main_pid,
        }
    }

    /// One adapter's component state, for the tests of both status renderers.
    pub(crate) fn component(state: &str, fresh: bool) -> ComponentState {
        ComponentState {
            name: "qq".into(),
            kind: "websocket".into(),
            state: state.into(),
            fresh,
            last_beat_age_ms: 1200,
            deadline_ms: 10_000,
            reconnects: 3,
            attempts: 4,
            last_error: Some("dns: no such host".into()),
            outage_ms: None,
        }
    }

    #[test]
    fn a_stale_snapshot_never_reads_as_connected() {
        let h = Health {
            updated_at: "2026-01-01T00:00:00.000Z".into(),
            age_ms: Some(600_000),
            stale: true,
            stale_reason: Some(Stale::Old),
            pid: 7,
            summary: "1/1 adapters ready".into(),
            components: vec![component("connected", true)],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        };
        let text = h.to_text(unit("active", 7));
        assert!(text.contains("STALE snapshot"), "{text}");
        assert!(text.contains("connected (stale)"), "{text}");
        assert!(
            !text
                .lines()
                .any(|l| l.contains(" connected ") && !l.contains("stale")),
            "{text}"
        );
    }

    #[test]
    fn the_warning_says_why_a_snapshot_is_not_current() {
        let mut h = Health {
            updated_at: "2999-01-01T00:00:00.000Z".into(),
            age_ms: None,
            stale: true,
            stale_reason: Some(Stale::NotRunning),
            pid: 7,
            summary: String::new(),
            components: vec![component("connected", true)],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        };
        for (reason, active_state, main_pid, says) in [
            (
                Stale::NotRunning,
                "failed",
                0,
                "the unit is failed, so no gateway is running",
            ),
            (
                Stale::NotRunning,
                "active",
                0,
                "the unit has no main process",
            ),
            (
                Stale::OtherProcess,
                "active",
                9,
                "written by PID 7, not by the unit's PID 9",
            ),
            (Stale::Future, "active", 7, "ahead of this machine's clock"),
            (Stale::NoTime, "active", 7, "its time cannot be read"),
        ] {
            h.stale_reason = Some(reason);
            let text = h.to_text(unit(active_state, main_pid));
            assert!(
                text.contains(
                    "health: STALE snapshot from 2999-01-01T00:00:00.000Z (age unknown); "
                ),
                "{text}"
            );
            assert!(text.contains(says), "{says} missing in {text}");
            assert!(text.contains("connected (stale)"), "{text}");
        }
    }

    #[test]
    fn a_live_snapshot_shows_state_age_reconnects_and_error() {
        let h = Health {
            updated_at: "now".into(),
            age_ms: Some(100),
            stale: false,
            stale_reason: None,
            pid: 7,
            summary: String::new(),
            components: vec![component("retrying", true)],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        };
        let text = h.to_text(unit("active", 7));
        assert!(!text.contains("STALE"), "{text}");
        for want in [
            "qq",
            "websocket",
            "retrying",
            "1s ago",
            "reconnects 3",
            "last error: dns: no such host",
        ] {
            assert!(text.contains(want), "{want} missing in {text}");
        }
    }

    #[test]
    fn a_jobs_snapshot_is_current_only_while_launchd_says_it_runs_with_the_writers_pid() {
        let now = std::time::SystemTime::now();
        let state = StateFile {
            updated_at: humantime::format_rfc3339_millis(now).to_string(),
            pid: 4242,
            profile: "coder".into(),
            stale_after_ms: 10_000,
            summary: String::new(),
            components: vec![component("connected", true)],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        };
        let job = |state, pid| Writer::Job { state, pid };
        for (writer, want, says) in [
            (job(Some(JobState::Running), Some(4242)), None, ""),
            (
                job(Some(JobState::Running), Some(9)),
                Some(Stale::OtherProcess),
                "it was written by PID 4242, not by the job's PID 9",
            ),
            (
                job(Some(JobState::Running), None),
                Some(Stale::NotRunning),
                "launchd names no pid for the job",
            ),
            (
                job(None, None),
                Some(Stale::NotRunning),
                "the job is not loaded, so no gateway is running",
            ),
            (
                job(Some(JobState::NotRunning), None),
                Some(Stale::NotRunning),
                "the job is not running, so no gateway is running",
            ),
            // launchctl's answer could not be read: never taken for a running job.
            (
                job(Some(JobState::Unknown), Some(4242)),
                Some(Stale::NotRunning),
                "launchctl print does not say the job is running",
            ),
        ] {
            let (active_state, pid) = writer.judged_as();
            let reason = state.staleness_for(now, active_state, pid);
            assert_eq!(reason, want, "{writer:?}");
            let h = Health {
                updated_at: state.updated_at.clone(),
                age_ms: Some(0),
                stale: reason.is_some(),
                stale_reason: reason,
                pid: state.pid,
                summary: String::new(),
                components: state.components.clone(),
                outbox: None,
                deliveries: vec![],
                api: None,
                agent: None,
                access: None,
                cluster: None,
                reload: None,
            };
            let text = h.to_text(writer);
            assert!(text.contains(says), "{says:?} missing in {text}");
            assert_eq!(
                text.contains("connected (stale)"),
                reason.is_some(),
                "{text}"
            );
        }
    }
}
