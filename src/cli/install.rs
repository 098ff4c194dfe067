//! `install` and `uninstall`: the two commands that create or remove a profile's unit.

use super::apply::{carry_out, connect, edit_lock, edit_unit, linger_for, now};
use super::args::{InstallArgs, UninstallArgs};
use super::error::CliError;
use super::report::Output;
use super::validate::{resolve_profile, settings, unit_spec};
use crate::service::planner::{self, InstallRequest};
use crate::systemd::observed::{self, Siblings};

pub(super) async fn install(args: InstallArgs) -> Result<u8, CliError> {
    let spec = unit_spec(&args.source)?;
    let req = InstallRequest {
        settings: settings(
            &args.env,
            args.watchdog_sec.as_deref(),
            args.restart_sec.as_deref(),
        )?,
        spec,
        start: !args.no_start,
        force: args.force,
        migrate: args.migrate,
        now: now(),
    };
    let scope = req.spec.scope;
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed =
        observed::observe(&req.spec.profile, scope, systemd.as_ref(), Siblings::Find).await?;
    let plan = planner::plan_install(&req, &observed)?;
    let verb = if observed.unit_text.is_none() {
        "installed"
    } else {
        "updated"
    };
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    let linger = linger_for(scope).await;
    carry_out(&plan, systemd.as_ref(), scope, verb, out, linger).await
}

pub(super) async fn uninstall(args: UninstallArgs) -> Result<u8, CliError> {
    let scope = args.unit.scope.scope();
    let profile = resolve_profile(&args.unit.profile, scope, None)?;
    edit_unit(
        &profile,
        scope,
        args.output.output(),
        "uninstalled",
        |observed| Ok(planner::plan_uninstall(observed, now())),
    )
    .await
}
