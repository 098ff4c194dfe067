//! `status`: every installed profile's job (`crate::status` under systemd,
//! `status::launchd` under launchd), and whether user units linger.

use super::apply::linger_for;
use super::args::StatusArgs;
use super::error::CliError;
use super::service;
use super::validate::parse_profile;
use crate::exit_code;
use crate::service::manager::Manager;
use crate::status;
use crate::systemd::Systemd;

pub(super) async fn run(args: StatusArgs) -> Result<u8, CliError> {
    let manager = service::manager(&args.scope)?;
    let scope = args.scope.scope();
    let only = args.profile.as_deref().map(parse_profile).transpose()?;
    if let Manager::Launchd = manager {
        let home = service::home_dir()?;
        let launchctl = service::launchctl().await?;
        let agents = crate::status::launchd::gather(&home, &launchctl, only.as_ref()).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&agents)?);
        } else {
            print!(
                "{}",
                crate::status::launchd::to_text(&launchctl.domain().to_string(), &agents)
            );
        }
        return Ok(exit_code::OK);
    }
    let systemd = Systemd::connect(scope).await?;
    let (report, linger) = tokio::join!(
        status::gather(&systemd, only.as_ref(), None),
        linger_for(Some(scope))
    );
    let mut report = report?;
    report.linger = linger;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text(crate::ansi::colour_stdout()));
    }
    Ok(exit_code::OK)
}
