//! `start`, `stop` and `restart`: one manager job on a profile's unit, no files touched.

use std::fmt;

use super::args::UnitArgs;
use super::error::CliError;
use super::validate::resolve_profile;
use crate::exit_code;
use crate::systemd::Systemd;

/// The job to ask the manager for.
#[derive(Clone, Copy, Debug)]
pub(super) enum Action {
    Start,
    Stop,
    Restart,
}

/// The verb as the command is named, for the line that reports it done.
impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Restart => "restart",
        })
    }
}

pub(super) async fn run(args: UnitArgs, action: Action) -> Result<u8, CliError> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let systemd = Systemd::connect(scope).await?;
    let unit = profile.unit_name();
    match action {
        Action::Start => systemd.start(&unit).await?,
        Action::Stop => systemd.stop(&unit).await?,
        Action::Restart => systemd.restart(&unit).await?,
    }
    println!("{unit}: {action} done");
    Ok(exit_code::OK)
}
