//! `status`: every installed profile's unit (`crate::status`), and whether user units linger.

use super::apply::linger_for;
use super::args::StatusArgs;
use super::error::CliError;
use super::validate::parse_profile;
use crate::exit_code;
use crate::status;
use crate::systemd::Systemd;

pub(super) async fn run(args: StatusArgs) -> Result<u8, CliError> {
    let scope = args.scope.scope();
    let only = args.profile.as_deref().map(parse_profile).transpose()?;
    let systemd = Systemd::connect(scope).await?;
    let (report, linger) = tokio::join!(
        status::gather(&systemd, only.as_ref(), None),
        linger_for(scope)
    );
    let mut report = report?;
    report.linger = linger;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(exit_code::OK)
}
