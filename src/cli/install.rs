//! `install` and `uninstall`: the two commands that create or remove a profile's job.

use super::apply::{carry_out, edit_job, edit_lock, linger_for};
use super::args::{InstallArgs, UninstallArgs};
use super::error::CliError;
use super::report::Output;
use super::service;
use super::validate::settings;
use crate::service::observed::Siblings;
use crate::service::planner::now;

pub(super) async fn install(args: InstallArgs) -> Result<u8, CliError> {
    let manager = service::manager(&args.source.scope)?;
    let spec = service::spec(manager, &args.source)?;
    if manager == crate::service::manager::Manager::Launchd && !args.credentials.is_empty() {
        return Err(CliError::Usage(
            "--credential needs systemd (LoadCredential=); launchd has no credentials, so keep the secret in the profile's .env (mode 0600)".into(),
        ));
    }
    let settings = settings(
        &args.env,
        &args.credentials,
        args.watchdog_sec.as_deref(),
        args.restart_sec.as_deref(),
    )?;
    let _lock = edit_lock(&spec, args.dry_run).await?;
    let mut service = spec.connect(args.dry_run).await?;
    service.watch_jobs(args.wait.timeout, super::progress::watcher(args.json));
    let observed = service.observe(Siblings::Find).await?;
    let verb = if observed.text.is_none() {
        "installed"
    } else {
        "updated"
    };
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    let plan = service.plan_install(
        settings,
        !args.no_start,
        args.force,
        args.migrate,
        now(),
        &observed,
    )?;
    let linger = linger_for(service.scope()).await;
    carry_out(&plan, &service, verb, out, linger).await
}

pub(super) async fn uninstall(args: UninstallArgs) -> Result<u8, CliError> {
    edit_job(
        &args.unit.profile,
        &args.unit.scope,
        args.output.output(),
        "uninstalled",
        |service, observed| Ok(service.plan_uninstall(observed, now())),
    )
    .await
}
