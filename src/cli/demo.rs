//! `demo`: the half-open fault shown end to end against the built-in mock platform
//! (`crate::demo`), with no credentials or network.

use std::time::Duration;

use super::args::DemoArgs;
use super::error::CliError;

pub(super) fn run(args: DemoArgs) -> Result<u8, CliError> {
    super::runtime()?
        .block_on(crate::demo::run(Duration::from_secs(args.seconds)))
        .map_err(CliError::Demo)
}
