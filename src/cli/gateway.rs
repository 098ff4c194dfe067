//! `gateway run`: what the unit runs, so its failures are exit codes for systemd to act on.

use super::error::CliError;
use crate::exit_code;
use crate::gateway::runtime;
use crate::profile::{Profile, ProfileName};

pub(super) fn run(profile: &str) -> Result<u8, CliError> {
    // The gateway runs under a supervisor: a bad profile is a configuration error
    // (78, which the unit does not restart), not a usage error.
    let profile = ProfileName::parse(profile)
        .and_then(Profile::from_env)
        .map_err(runtime::GatewayError::Profile)?;
    // Before any thread exists: setting the environment is not thread-safe.
    crate::env_file::load(&profile.env_file());
    let _ = rustls::crypto::ring::default_provider().install_default();
    super::runtime()?.block_on(runtime::run(&profile))?;
    Ok(exit_code::OK)
}
