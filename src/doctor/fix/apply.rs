//! Carrying out a `--fix` plan: each [`Action`] through the manager or on the file it names,
//! re-checked just before, because the plan was made from a snapshot that may be stale.

use std::os::unix::fs::PermissionsExt;

use crate::doctor::fix::{Action, FixPlan, Fixed};
use crate::gateway::pid_file::PidFile;
use crate::service::plan::{Plan, Step};
use crate::systemd::scope::Scope;

/// Carry out `plan`. Each fix stands alone: one that fails is reported and the rest go on.
/// Returns the fixes applied and, for those that failed, why.
pub(crate) async fn apply(plan: &FixPlan) -> (Vec<Fixed>, Vec<String>) {
    let mut fixed = vec![];
    let mut failed = vec![];
    for fix in &plan.fixes {
        match apply_one(&fix.action).await {
            Ok(()) => fixed.push(Fixed {
                id: fix.id,
                subject: fix.subject.clone(),
                action: fix.action.to_string(),
            }),
            Err(e) => failed.push(format!("{} {}: {}: {e:#}", fix.id, fix.subject, fix.action)),
        }
    }
    (fixed, failed)
}

async fn bus_steps(scope: Scope, unit: &str, steps: Vec<Step>) -> anyhow::Result<()> {
    let systemd = crate::systemd::Systemd::connect(scope).await?;
    let plan = Plan {
        unit: unit.to_owned(),
        steps,
        notes: vec![],
    };
    crate::systemd::effects::apply(&plan, &systemd).await?;
    Ok(())
}

async fn apply_one(action: &Action) -> anyhow::Result<()> {
    match action {
        Action::Reload { scope } => bus_steps(*scope, "", vec![Step::Reload]).await,
        Action::RemovePidFile { path, pid } => {
            // Re-check: the same record, and its process still not running.
            let rec = PidFile::read(path)
                .ok_or_else(|| anyhow::anyhow!("{} is gone or changed", path.display()))?;
            if rec.pid != *pid || crate::process_probe::exists(*pid) {
                anyhow::bail!("{} now names a running process; left alone", path.display());
            }
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            }
        }
        Action::ChmodEnv { path } => chmod_env(path),
        Action::Migrate {
            scope, unit, steps, ..
        } => bus_steps(*scope, unit, steps.clone()).await,
        Action::ResetFailed { scope, unit } => {
            bus_steps(*scope, unit, vec![Step::ResetFailed { unit: unit.clone() }]).await
        }
    }
}

/// `chmod 600` the `.env` itself, never what a link points at: opened without following a
/// link, checked to be a regular file owned by whoever owns the profile directory, and
/// changed through that open descriptor, so nothing can be swapped in between.
fn chmod_env(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A link is an error (ELOOP), and a FIFO does not block the open.
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => anyhow::anyhow!(
                "{} is a symbolic link; left alone (make it a regular file, then chmod 600 it)",
                path.display()
            ),
            _ => anyhow::Error::new(e).context(format!("failed to open {}", path.display())),
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        anyhow::bail!("{} is not a regular file; left alone", path.display());
    }
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    let owner = std::fs::symlink_metadata(dir)?.uid();
    if meta.uid() != owner {
        anyhow::bail!(
            "{} belongs to uid {}, not to the profile's owner (uid {owner}); left alone",
            path.display(),
            meta.uid()
        );
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}
