//! launchd's side of the one look before planning: our plist in `~/Library/LaunchAgents`, the
//! overrides file in the profile home, what `launchctl print` says of the job, and any other
//! agent there that serves the same profile (hermes-agent's own `ai.hermes.gateway.plist` and
//! `ai.hermes.gateway-<profile>.plist`, or a person's).

use std::path::{Path, PathBuf};

use crate::launchd::launchctl::{Launchctl, LaunchctlError, Service};
use crate::launchd::plist::{self, Job, LaunchAgent, FILE_SUFFIX};
use crate::profile::{default_hermes_home, Profile};
use crate::service::observed::{
    self, mtime, stale_temp, sticky_profile, ForeignUnit, JobView, Observed, ReadError, Siblings,
};
use crate::service::role::Role;
use crate::service::served_profile::served_profile;

#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchdObserveError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Launchctl(#[from] LaunchctlError),
}

/// What launchd says of a job, in the planner's terms. A loaded job is both enabled (its file
/// loads at every login) and active (`KeepAlive` runs it whenever it is not running).
fn job_view(service: &Service) -> JobView {
    let loaded = matches!(service, Service::Loaded(_));
    JobView {
        loaded,
        enabled: loaded,
        active: loaded,
        needs_reload: false,
        started_at: None,
    }
}

/// Look at disk and, when given a runner, at launchd. `agents` is the user's
/// `~/Library/LaunchAgents`.
pub(crate) async fn observe(
    agent: &LaunchAgent,
    agents: &Path,
    launchctl: Option<&Launchctl>,
    siblings: Siblings,
) -> Result<Observed, LaunchdObserveError> {
    let label = agent.label();
    let path = agents.join(format!("{label}{FILE_SUFFIX}"));
    let settings_path = agent.overrides_path();
    let temp_prefixes = [
        format!(".{label}{FILE_SUFFIX}.tmp."),
        format!(".{}.tmp.", plist::OVERRIDES_FILE),
    ];
    let home = agent.profile.home();
    let settings_dir = settings_path.parent().unwrap_or(&home);
    let mut stale_temp_files: Vec<PathBuf> = [agents, settings_dir]
        .into_iter()
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten())
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            temp_prefixes.iter().any(|t| name.starts_with(t.as_str())) && stale_temp(&name)
        })
        .collect();
    stale_temp_files.sort();
    let mut observed = Observed {
        text: observed::read_optional(&path)?,
        settings_text: observed::read_optional(&settings_path)?,
        config_changed_at: [mtime(&path), mtime(&settings_path)]
            .into_iter()
            .flatten()
            .max(),
        name: label,
        path,
        settings_path,
        settings_dir: None,
        other_settings: vec![],
        stale_temp_files,
        profile_home_exists: agent.profile.home().is_dir(),
        job: None,
        foreign: vec![],
    };
    if let Some(launchctl) = launchctl {
        observed.job = Some(job_view(&launchctl.status(&observed.name).await?));
    }
    // Other gateway jobs serving the profile conflict with its gateway; its agent's job sits
    // beside them by design.
    if siblings == Siblings::Find && agent.role == Role::Gateway {
        observed.foreign =
            foreign_agents(agents, &agent.profile, &observed.path, launchctl).await?;
    }
    Ok(observed)
}

/// Every other agent in `agents` that runs a gateway for `profile`, judged as systemd units
/// are: from its argv and its `HERMES_HOME`, not its name. A file that is not a property list
/// is no job of anyone's, and is skipped.
async fn foreign_agents(
    agents: &Path,
    profile: &Profile,
    ours: &Path,
    launchctl: Option<&Launchctl>,
) -> Result<Vec<ForeignUnit>, LaunchdObserveError> {
    let sticky = sticky_profile(profile.hermes_home());
    let default_home = default_hermes_home().unwrap_or_else(|_| profile.hermes_home().to_owned());
    let mut paths: Vec<PathBuf> = std::fs::read_dir(agents)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "plist") && p != ours)
        .collect();
    paths.sort();
    let mut out = vec![];
    for path in paths {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(job) = Job::parse(&bytes) else {
            continue;
        };
        let env: Vec<String> = job.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let Some(served) =
            served_profile(std::slice::from_ref(&job.arguments), &env, sticky.as_ref())
        else {
            continue;
        };
        if !served.serves(profile.name(), profile.hermes_home(), &default_home) {
            continue;
        }
        let name = job.label.clone().unwrap_or_else(|| {
            path.file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        });
        let loaded = match launchctl {
            Some(l) => matches!(l.status(&name).await?, Service::Loaded(_)),
            None => false,
        };
        out.push(ForeignUnit {
            name,
            fragment_path: Some(path),
            active: loaded,
            // A file in LaunchAgents loads at every login; moving it aside is what disables it.
            enabled: true,
            failed: false,
        });
    }
    Ok(out)
}
