//! `install` and `uninstall`: the two commands that create or remove a profile's job.

use super::apply::{carry_out, edit_job, edit_lock, linger_for};
use super::args::{InstallArgs, UninstallArgs};
use super::error::CliError;
use super::report::Output;
use super::service;
use super::validate::{agent_role, settings};
use crate::service::observed::Siblings;
use crate::service::planner::now;
use crate::service::role::Role;
use crate::service::settings::Settings;

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
    let agent = match args.agent {
        Some(kind) => Some(spec.with_role(agent_role(
            kind,
            args.agent_exec.as_deref(),
            spec.profile(),
        )?)),
        None => None,
    };
    let _lock = edit_lock(&spec, args.dry_run).await?;
    install_job(spec, settings, args.migrate, true, &args).await?;
    // After the gateway, whose Relay the agent dials: its unit is ordered after the gateway's
    // anyway, and starting it starts the gateway. Its unit takes no settings of ours, and
    // other gateway units are no siblings of it.
    if let Some(agent) = agent {
        install_job(agent, Settings::default(), false, false, &args).await?;
    }
    Ok(crate::exit_code::OK)
}

/// Observe, plan, carry out and report the install of one job. `gateway` says whether it is
/// the profile's gateway: only its siblings conflict with it, and only it shows its start's
/// progress and the linger hint.
async fn install_job(
    spec: service::Spec,
    settings: Settings,
    migrate: bool,
    gateway: bool,
    args: &InstallArgs,
) -> Result<(), CliError> {
    let mut service = spec.connect(args.dry_run).await?;
    let watcher = gateway
        .then(|| super::progress::watcher(args.json))
        .flatten();
    service.watch_jobs(args.wait.timeout, watcher);
    let siblings = if gateway {
        Siblings::Find
    } else {
        Siblings::Skip
    };
    let observed = service.observe(siblings).await?;
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
        migrate,
        now(),
        &observed,
    )?;
    let linger = match gateway {
        true => linger_for(service.scope()).await,
        false => None,
    };
    carry_out(&plan, &service, verb, out, linger).await?;
    Ok(())
}

/// Uninstall the profile's agent first, if it has one (it is part of the gateway and would
/// stop with it, but its files must go too), then its gateway.
pub(super) async fn uninstall(args: UninstallArgs) -> Result<u8, CliError> {
    let agent = Role::Agent {
        hermes: Default::default(),
    };
    for job in [(agent, true), (Role::Gateway, false)] {
        edit_job(
            &args.unit.profile,
            &args.unit.scope,
            job,
            args.output.output(),
            "uninstalled",
            |service, observed| Ok(service.plan_uninstall(observed, now())),
        )
        .await?;
    }
    Ok(crate::exit_code::OK)
}
