//! Carrying out a plan under systemd: the only place where install, set, unset and uninstall
//! touch the disk or the manager.

use crate::service::files::{self, FileError};
use crate::service::plan::{Plan, Step};
use crate::systemd::{Systemd, SystemdError};

/// Why a step failed. Steps before it have happened; the message says which one broke.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EffectError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Systemd(#[from] SystemdError),
}

/// Apply every step in order, stopping at the first failure.
pub(crate) async fn apply(plan: &Plan, systemd: &Systemd) -> Result<(), EffectError> {
    for step in &plan.steps {
        tracing::debug!(%step, "applying");
        match step {
            Step::WriteFile { .. }
            | Step::Backup { .. }
            | Step::MoveAside { .. }
            | Step::PutBack { .. }
            | Step::RemoveFile { .. }
            | Step::RemoveLeftover { .. }
            | Step::CreateDir { .. }
            | Step::RemoveEmptyDir { .. } => files::apply(step)?,
            Step::Reload => systemd.reload().await?,
            Step::Enable { unit } => systemd.enable(unit).await?,
            Step::Disable { unit } => systemd.disable(unit).await?,
            Step::Start { unit } => systemd.start(unit).await?,
            Step::Stop { unit } => systemd.stop(unit).await?,
            Step::Restart { unit } => systemd.restart(unit).await?,
            Step::ResetFailed { unit } => match systemd.reset_failed(unit).await {
                // Nothing failed, or the unit is gone: either way there is nothing to reset.
                Err(SystemdError::NoSuchUnit { .. }) | Err(SystemdError::Call { .. }) => {}
                other => other?,
            },
        }
    }
    Ok(())
}

/// The plan's steps as the D-Bus calls they make, so a person sees exactly what happens to the
/// manager.
pub(crate) fn describe(plan: &Plan) -> Vec<String> {
    let line = |step: &Step| match step {
        Step::Reload => "bus: Manager.Reload()".to_owned(),
        Step::Enable { unit } => format!("bus: Manager.EnableUnitFiles([{unit}])"),
        Step::Disable { unit } => format!("bus: Manager.DisableUnitFiles([{unit}])"),
        Step::Start { unit } => format!("bus: Manager.StartUnit({unit}, replace)"),
        Step::Stop { unit } => format!("bus: Manager.StopUnit({unit}, replace)"),
        Step::Restart { unit } => format!("bus: Manager.RestartUnit({unit}, replace)"),
        Step::ResetFailed { unit } => format!("bus: Manager.ResetFailedUnit({unit})"),
        file_step => file_step.to_string(),
    };
    plan.steps.iter().map(line).collect()
}
