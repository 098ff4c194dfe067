//! `start`, `stop` and `restart`: one manager job on a profile's unit, no files touched.

use super::args::UnitArgs;
use super::error::CliError;
use super::validate::resolve_profile;
use crate::exit_code;
use crate::systemd::{Job, Systemd};

pub(super) async fn run(args: UnitArgs, job: Job) -> Result<u8, CliError> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let systemd = Systemd::connect(scope).await?;
    let unit = profile.unit_name();
    systemd.run_job(job, &unit).await?;
    println!("{unit}: {} done", job.verb());
    Ok(exit_code::OK)
}
