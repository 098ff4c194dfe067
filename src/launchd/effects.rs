//! Carrying out a plan under launchd: the plan's steps as `launchctl` calls.
//!
//! launchd has no reload, no enable state apart from the file and no failed state, so the
//! neutral steps map as follows:
//!
//! | step        | launchd                                                                  |
//! |-------------|--------------------------------------------------------------------------|
//! | Reload      | nothing now: launchd reads a plist only at `bootstrap`, so a later restart of this plan becomes `bootout` + `bootstrap` |
//! | Enable      | `launchctl enable`, clearing a `launchctl disable` left from before       |
//! | Disable     | nothing: a file in `~/Library/LaunchAgents` loads at login, and moving it aside (the next step) is what disables it; `launchctl disable` would leave a record behind in launchd's database that outlives the file |
//! | Start       | `bootstrap`, then `kickstart` (the planner starts only an unloaded job)   |
//! | Stop        | `bootout`, so `KeepAlive` does not start it again                         |
//! | Restart     | `kickstart -k`, or `bootout` + `bootstrap` + `kickstart` when the plist changed |
//! | ResetFailed | nothing: launchd keeps no failed state                                    |

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::launchd::launchctl::{Domain, Launchctl, LaunchctlError};
use crate::service::files::{self, FileError};
use crate::service::plan::{Plan, Step};

#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchdEffectError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("failed to create {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Launchctl(#[from] LaunchctlError),
}

/// Our job's plist and log directory, which a start needs.
pub(crate) struct Agent<'a> {
    pub(crate) plist: &'a Path,
    pub(crate) log_dir: &'a Path,
}

/// Create `dir` and its missing parents, mode 0700, as the user running this.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), LaunchdEffectError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| LaunchdEffectError::Dir {
            path: dir.to_owned(),
            source,
        })
}

/// Apply every step in order, stopping at the first failure.
pub(crate) async fn apply(
    plan: &Plan,
    launchctl: &Launchctl,
    agent: Agent<'_>,
) -> Result<(), LaunchdEffectError> {
    let mut reread = false;
    for step in &plan.steps {
        tracing::debug!(%step, "applying");
        match step {
            Step::WriteFile { path, .. } => {
                // A fresh Mac account may have no LaunchAgents directory yet, and the overrides
                // file goes in a profile home the gateway has not made yet.
                if let Some(parent) = path.parent() {
                    ensure_dir(parent)?;
                }
                files::apply(step)?
            }
            Step::Backup { .. }
            | Step::MoveAside { .. }
            | Step::PutBack { .. }
            | Step::RemoveFile { .. }
            | Step::RemoveLeftover { .. }
            | Step::CreateDir { .. }
            | Step::RemoveEmptyDir { .. } => files::apply(step)?,
            Step::Reload => reread = true,
            Step::Enable { unit } => launchctl.enable(unit).await?,
            Step::Disable { .. } | Step::ResetFailed { .. } => {}
            Step::Start { unit } => {
                // launchd opens StandardOutPath and StandardErrorPath before the program runs,
                // and fails the job when their directory is missing.
                ensure_dir(agent.log_dir)?;
                // The planner starts only a job it saw unloaded (loaded is active here).
                launchctl.load_and_start(unit, agent.plist).await?
            }
            Step::Stop { unit } => {
                launchctl.stop(unit).await?;
            }
            Step::Restart { unit } if reread => {
                ensure_dir(agent.log_dir)?;
                launchctl.reinstall(unit, agent.plist).await?
            }
            Step::Restart { unit } => launchctl.restart(unit).await?,
        }
    }
    Ok(())
}

/// The plan's steps as the `launchctl` calls they make in `domain`, so a person sees exactly
/// what happens.
pub(crate) fn describe(plan: &Plan, domain: Domain, plist: &Path) -> Vec<String> {
    let t = |label: &str| domain.target(label);
    let bootstrap = format!("launchctl bootstrap {domain} {}", plist.display());
    let mut reread = false;
    let mut lines = vec![];
    for step in &plan.steps {
        lines.push(match step {
            Step::Reload => {
                reread = true;
                "(launchd reads the plist when it is bootstrapped)".to_owned()
            }
            Step::Enable { unit } => format!("launchctl enable {}", t(unit)),
            Step::Disable { unit } => format!("{unit} no longer loads at login once its file is aside"),
            Step::Start { unit } => format!("{bootstrap}, launchctl kickstart {}", t(unit)),
            Step::Stop { unit } => format!("launchctl bootout {}", t(unit)),
            Step::Restart { unit } if reread => format!(
                "launchctl bootout {target}, {bootstrap}, launchctl enable {target}, launchctl kickstart {target}",
                target = t(unit)
            ),
            Step::Restart { unit } => format!("launchctl kickstart -k {}", t(unit)),
            Step::ResetFailed { unit } => format!("({unit}: launchd keeps no failed state)"),
            file_step => file_step.to_string(),
        });
    }
    lines
}
