//! `events`: the inbound events a profile's gateway has spooled, read from its inbox.
//!
//! The reading and printing live with the spool (`gateway::spool::events_command`); this is
//! only the profile lookup and the runtime around it.

use super::args::EventsArgs;
use super::error::{usage, CliError};
use super::validate::parse_profile;
use crate::exit_code;
use crate::profile::Profile;

pub(super) fn run(args: EventsArgs) -> Result<u8, CliError> {
    let profile =
        Profile::from_env(parse_profile(&args.profile)?).map_err(|e| usage(e.to_string()))?;
    let mut out = std::io::stdout();
    super::runtime()?.block_on(crate::gateway::spool::events_command(
        &profile.inbox_dir(),
        args.since.as_deref(),
        args.follow,
        args.json,
        &mut out,
    ))?;
    Ok(exit_code::OK)
}
