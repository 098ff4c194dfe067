//! `doctor`: run the checks (or, with `--fix`, the safe fixes) from `crate::doctor` for the
//! service manager in use, and print what they found.

use super::args::DoctorArgs;
use super::error::CliError;
use super::validate::parse_profile;
use crate::profile::ProfileName;
use crate::service::manager::Manager;

/// Exit 0 with no errors, 1 with errors; 2 when doctor could not look at anything at all
/// (`CliError::DoctorBlind`), so a script can tell "unhealthy" from "could not tell".
pub(super) async fn run(args: DoctorArgs) -> Result<u8, CliError> {
    let only = args.profile.as_deref().map(parse_profile).transpose()?;
    let manager = Manager::current().map_err(|e| CliError::Usage(e.to_string()))?;
    if args.fix {
        let out = fix(manager, only.as_ref())
            .await
            .map_err(CliError::DoctorBlind)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("{}", out.to_text(crate::ansi::colour_stdout()));
        }
        for why in &out.failed {
            eprintln!("fix failed: {why}");
        }
        return Ok(out.report.exit_code());
    }
    let report = match manager {
        Manager::Systemd => crate::doctor::run(only.as_ref()).await,
        Manager::Launchd => crate::doctor::launchd::run(only.as_ref()).await,
    }
    .map_err(CliError::DoctorBlind)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text(crate::ansi::colour_stdout()));
    }
    Ok(report.exit_code())
}

async fn fix(
    manager: Manager,
    only: Option<&ProfileName>,
) -> Result<crate::doctor::FixOutcome, crate::doctor::DoctorError> {
    match manager {
        Manager::Systemd => crate::doctor::run_fix(only).await,
        Manager::Launchd => crate::doctor::launchd::run_fix(only).await,
    }
}
