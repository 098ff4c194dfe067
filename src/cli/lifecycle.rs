//! `start`, `stop` and `restart`: one manager job on a profile's job, no files touched.

use super::args::LifecycleArgs;
use super::error::CliError;
use super::service;
use super::validate::resolve_profile;
use crate::exit_code;
use crate::systemd::Job;

pub(super) async fn run(args: LifecycleArgs, job: Job) -> Result<u8, CliError> {
    let (unit, wait) = (args.unit, args.wait);
    let manager = service::manager(&unit.scope)?;
    let scope = unit.scope.scope();
    let profile = resolve_profile(&unit.profile, scope, None)?;
    let spec = service::spec_for(manager, scope, profile)?;
    let mut service = spec.connect(false).await?;
    service.watch_jobs(wait.timeout, super::progress::watcher(false));
    let name = service.run_job(job).await?;
    println!("{name}: {} done", job.verb());
    Ok(exit_code::OK)
}
