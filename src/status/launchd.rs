//! `status` under launchd: each of our LaunchAgents, with what `launchctl print` says of it,
//! and its gateway's health section, the same as under systemd (`crate::status::health`).
//!
//! The state comes from `launchctl print <domain>/<label>` only, never from `launchctl list`'s
//! columns, and whatever that output does not say plainly is shown as unknown. A state file is
//! current only while that output says the job is running, with the pid that wrote it.

use std::path::Path;

use serde::Serialize;

use super::health::{HealthSection, Writer};
use crate::bounded_read::Owner;
use crate::launchd::launchctl::{JobState, LastExit, Launchctl, LaunchctlError, Service};
use crate::launchd::plist::{self, Job, AGENTS_DIR};
use crate::profile::{Profile, ProfileName};
use crate::safe_text::visible;
use crate::service::definition::Provenance;
use crate::service::served_profile::unit_hermes_home;

/// One profile's agent.
#[derive(Debug, Serialize)]
pub(crate) struct AgentStatus {
    pub(crate) profile: String,
    pub(crate) label: String,
    pub(crate) plist: String,
    /// Whether the plist is as hermes-svc wrote it, edited, or someone else's.
    pub(crate) provenance: Option<Provenance>,
    /// `not loaded`, `running`, `not running` or `unknown`.
    pub(crate) state: String,
    pub(crate) pid: Option<u32>,
    pub(crate) last_exit: Option<String>,
    pub(crate) runs: Option<u64>,
    /// Whether the plist's `KeepAlive` would start the job again after its last exit.
    pub(crate) restarts_after_last_exit: Option<bool>,
    /// The gateway's own health report (`health`, `health_error`), judged against the job.
    #[serde(flatten)]
    pub(crate) section: HealthSection,
    /// What launchd said of the job, `None` when it is not loaded: whose pid a current state
    /// file carries.
    #[serde(skip)]
    pub(crate) job_state: Option<JobState>,
}

impl AgentStatus {
    /// The process the gateway's state file should come from: the job, as launchd told it.
    fn writer(&self) -> Writer<'static> {
        Writer::Job {
            state: self.job_state,
            pid: self.pid,
        }
    }
}

/// Our agents in `home`'s LaunchAgents (one profile's with `only`), each asked of launchd.
pub(crate) async fn gather(
    home: &Path,
    launchctl: &Launchctl,
    only: Option<&ProfileName>,
) -> Result<Vec<AgentStatus>, LaunchctlError> {
    let agents = home.join(AGENTS_DIR);
    let mut files: Vec<(ProfileName, std::path::PathBuf)> = std::fs::read_dir(&agents)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let profile = plist::profile_of_file(&e.file_name().to_string_lossy())?;
            Some((profile, e.path()))
        })
        .filter(|(p, _)| only.is_none_or(|o| o == p))
        .collect();
    files.sort();
    let mut out = vec![];
    for (profile, path) in files {
        let label = plist::label(&profile);
        let text = std::fs::read_to_string(&path).ok();
        let job = text.as_deref().and_then(|t| Job::parse(t.as_bytes()).ok());
        let mut status = AgentStatus {
            profile: profile.to_string(),
            plist: path.display().to_string(),
            provenance: text.as_deref().map(plist::provenance),
            state: "not loaded".into(),
            pid: None,
            last_exit: None,
            runs: None,
            restarts_after_last_exit: None,
            section: HealthSection::default(),
            job_state: None,
            label,
        };
        if let Service::Loaded(s) = launchctl.status(&status.label).await? {
            status.state = s.state.to_string();
            status.job_state = Some(s.state);
            status.pid = s.pid;
            status.runs = s.runs;
            status.last_exit = Some(s.last_exit.to_string());
            if let (Some(job), LastExit::Code(code)) = (&job, &s.last_exit) {
                if s.state == JobState::NotRunning {
                    status.restarts_after_last_exit =
                        u8::try_from(*code).ok().map(|c| job.restarts_after_exit(c));
                }
            }
        }
        // The job's HERMES_HOME, as install wrote it into the plist; else the default home.
        let hermes_home = job
            .as_ref()
            .and_then(|j| unit_hermes_home(&env_entries(j)))
            .unwrap_or_else(|| home.join(".hermes"));
        if let Ok(profile) = Profile::new(profile, hermes_home) {
            // A LaunchAgent runs as the user who asks, so the file must be theirs (or root's).
            status.section =
                HealthSection::read(&profile.state_file(), Owner::SelfOrRoot, status.writer());
        }
        out.push(status);
    }
    Ok(out)
}

/// The plist's `EnvironmentVariables` as `KEY=value` entries, the shape a unit's are read in.
fn env_entries(job: &Job) -> Vec<String> {
    job.env.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The report as text, one line per profile, and under it the gateway's health section as
/// under systemd. What launchctl printed (a signal's name) and the state file's strings go
/// through [`visible`], so none can drive the reader's terminal.
pub(crate) fn to_text(domain: &str, agents: &[AgentStatus]) -> String {
    if agents.is_empty() {
        return format!("no hermes-svc LaunchAgents installed ({domain})\n");
    }
    let mut out = String::new();
    for a in agents {
        out.push_str(&format!("{} ({}): {}", a.profile, a.label, a.state));
        if let Some(pid) = a.pid {
            out.push_str(&format!(", pid {pid}"));
        }
        if let Some(last) = &a.last_exit {
            out.push_str(&format!(", last exit: {}", visible(last)));
        }
        if let Some(runs) = a.runs {
            out.push_str(&format!(", runs {runs}"));
        }
        if a.restarts_after_last_exit == Some(false) {
            out.push_str(" (stays down: see logs/gateway.err.log)");
        }
        if a.provenance == Some(Provenance::Edited) {
            out.push_str(" [plist edited by hand]");
        }
        out.push('\n');
        out.push_str(&a.section.to_text(a.writer()));
    }
    out
}
