//! The steps every command that edits a job shares: take the edit lock, connect, carry out
//! the plan (unless `--dry-run`) and report it.

use super::error::CliError;
use super::report::{self, Output};
use super::service::{self, Service, Spec};
use super::validate::resolve_profile;
use crate::edit_lock::{self, EditLock};
use crate::exit_code;
use crate::service::observed::{Observed, Siblings};
use crate::service::plan::Plan;
use crate::service::planner::PlanError;
use crate::service::role::Role;
use crate::systemd::linger::Linger;
use crate::systemd::scope::Scope;

use super::args::ScopeArgs;

/// Unless this is a dry run, hold the lock that makes edits one at a time, from the first
/// read of the job's files to the last effect.
pub(super) async fn edit_lock(spec: &Spec, dry_run: bool) -> Result<Option<EditLock>, CliError> {
    if dry_run {
        return Ok(None);
    }
    let dir = spec.lock_dir()?;
    Ok(Some(EditLock::acquire(&dir, edit_lock::WAIT).await?))
}

/// Carry out `plan` (unless `--dry-run`) and report it as `changed`, or as `unchanged` when
/// it changes nothing: the last two steps of every install-like command.
pub(super) async fn carry_out(
    plan: &Plan,
    service: &Service,
    changed: &str,
    out: Output,
    linger: Option<Linger>,
) -> Result<u8, CliError> {
    if !out.dry_run {
        service.apply(plan).await?;
    }
    let outcome = if plan.is_unchanged() {
        "unchanged"
    } else {
        changed
    };
    let steps = service.describe(plan);
    report::plan(plan, &steps, &service.place(), outcome, out, linger);
    Ok(exit_code::OK)
}

/// The rest of `uninstall`, `set` and `unset` once their arguments are checked: they differ
/// only in the plan they make of the job as it is, and in the word that reports a change.
///
/// The job is `role`'s; with `only_installed`, one whose file is not there is left alone and
/// nothing is reported (a profile's agent, which most profiles do not have).
pub(super) async fn edit_job(
    profile_name: &str,
    scope: &ScopeArgs,
    (role, only_installed): (Role, bool),
    out: Output,
    changed: &str,
    plan: impl FnOnce(&Service, &Observed) -> Result<Plan, PlanError>,
) -> Result<u8, CliError> {
    let manager = service::manager(scope)?;
    let profile = resolve_profile(profile_name, scope.scope(), None)?;
    let spec = service::spec_for(manager, scope.scope(), profile)?.with_role(role);
    if only_installed && !spec.definition_path()?.exists() {
        return Ok(exit_code::OK);
    }
    let _lock = edit_lock(&spec, out.dry_run).await?;
    let service = spec.connect(out.dry_run).await?;
    let observed = service.observe(Siblings::Skip).await?;
    let plan = plan(&service, &observed)?;
    carry_out(&plan, &service, changed, out, None).await
}

/// Only a user unit depends on lingering: without it, the unit stops when its owner logs out.
pub(super) async fn linger_for(scope: Option<Scope>) -> Option<Linger> {
    (scope == Some(Scope::User)).then_some(Linger::query(nix::unistd::getuid().as_raw()).await)
}
