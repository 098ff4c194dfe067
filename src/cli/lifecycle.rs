//! `start`, `stop` and `restart`: one manager job on a profile's job, no files touched.

use super::args::UnitArgs;
use super::error::CliError;
use super::service;
use super::validate::resolve_profile;
use crate::exit_code;
use crate::systemd::Job;

pub(super) async fn run(args: UnitArgs, job: Job) -> Result<u8, CliError> {
    let manager = service::manager(&args.scope)?;
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let spec = service::spec_for(manager, scope, profile)?;
    let name = spec.connect(false).await?.run_job(job).await?;
    println!("{name}: {} done", job.verb());
    Ok(exit_code::OK)
}
