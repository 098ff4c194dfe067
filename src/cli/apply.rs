//! The steps every command that edits a unit shares: take the edit lock, connect, carry out
//! the plan (unless `--dry-run`) and report it.

use std::time::{SystemTime, UNIX_EPOCH};

use super::error::CliError;
use super::report::{self, Output};
use crate::edit_lock::{self, EditLock};
use crate::exit_code;
use crate::profile::Profile;
use crate::service::plan::Plan;
use crate::service::planner::PlanError;
use crate::systemd::effects;
use crate::systemd::linger::Linger;
use crate::systemd::observed::{self, Observed, Siblings};
use crate::systemd::scope::Scope;
use crate::systemd::Systemd;

/// Seconds since the epoch, for the names of backups the plan may make.
pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Unless this is a dry run, hold the lock that makes unit edits one at a time, from the
/// first read of the unit to the last effect.
pub(super) async fn edit_lock(scope: Scope, dry_run: bool) -> Result<Option<EditLock>, CliError> {
    if dry_run {
        return Ok(None);
    }
    let dir = scope
        .unit_dir()
        .ok_or(observed::ObserveError::NoUnitDir(scope))?;
    Ok(Some(EditLock::acquire(&dir, edit_lock::WAIT).await?))
}

/// Connect, unless this is a dry run and no manager answers (then plan from disk alone).
pub(super) async fn connect(scope: Scope, dry_run: bool) -> Result<Option<Systemd>, CliError> {
    match Systemd::connect(scope).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if dry_run => {
            eprintln!("warning: {e}; planning from the files on disk alone");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Carry out `plan` (unless `--dry-run`) and report it as `changed`, or as `unchanged` when
/// it changes nothing: the last two steps of every install-like command.
pub(super) async fn carry_out(
    plan: &Plan,
    systemd: Option<&Systemd>,
    scope: Scope,
    changed: &str,
    out: Output,
    linger: Option<Linger>,
) -> Result<u8, CliError> {
    if !out.dry_run {
        effects::apply(plan, systemd.expect("connected unless dry-run")).await?;
    }
    let outcome = if plan.is_unchanged() {
        "unchanged"
    } else {
        changed
    };
    report::plan(plan, scope, outcome, out, linger);
    Ok(exit_code::OK)
}

/// The rest of `uninstall`, `set` and `unset` once their arguments are checked: they differ
/// only in the plan they make of the unit as it is, and in the word that reports a change.
pub(super) async fn edit_unit(
    profile: &Profile,
    scope: Scope,
    out: Output,
    changed: &str,
    plan: impl FnOnce(&Observed) -> Result<Plan, PlanError>,
) -> Result<u8, CliError> {
    let _lock = edit_lock(scope, out.dry_run).await?;
    let systemd = connect(scope, out.dry_run).await?;
    let observed = observed::observe(profile, scope, systemd.as_ref(), Siblings::Skip).await?;
    let plan = plan(&observed)?;
    carry_out(&plan, systemd.as_ref(), scope, changed, out, None).await
}

/// Only a user unit depends on lingering: without it, the unit stops when its owner logs out.
pub(super) async fn linger_for(scope: Scope) -> Option<Linger> {
    (scope == Scope::User).then_some(Linger::query(nix::unistd::getuid().as_raw()).await)
}
