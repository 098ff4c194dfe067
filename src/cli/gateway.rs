//! `gateway run`: what the unit or the LaunchAgent runs, so its failures are exit codes for
//! the service manager to act on.

use super::error::{CliError, GatewayFailure};
use crate::exit_code;
use crate::gateway::adapter::answer_batch;
use crate::gateway::exit::{self, Outcome, Requested};
use crate::profile::{Profile, ProfileName};
use crate::runtime::{self, GatewayError};
use crate::service::manager::Manager;

pub(super) fn run(profile: &str) -> Result<u8, CliError> {
    // Which manager reads the exit status decides the status (`gateway::exit`). A name that is
    // no manager is a configuration error, reported in the native manager's terms.
    let (manager, result) = match Manager::current() {
        Ok(manager) => (manager, serve(profile, manager)?),
        Err(e) => (Manager::NATIVE, Err(GatewayError::from(e))),
    };
    let error = match result {
        Ok(Requested(_)) => return Ok(exit::status(manager, Outcome::Stopped)),
        Err(error) => error,
    };
    let status = exit::status(manager, error.outcome());
    if status == exit_code::OK {
        // An error that exits 0 (a conflict under launchd, so that `KeepAlive` leaves the job
        // down) reads as a clean stop in `launchctl print`; the log says what it was.
        tracing::error!(
            reason = %runtime::reason(&error),
            "the gateway stays down: exiting {status} so that {manager} does not restart it; \
             fix the cause, then run `hermes-svc start --profile {profile}`"
        );
    }
    Err(CliError::Gateway(GatewayFailure { error, manager }))
}

/// The run's own result, inside the CLI's failure to set it up (the async runtime).
fn serve(profile: &str, manager: Manager) -> Result<Result<Requested, GatewayError>, CliError> {
    // The gateway runs under a supervisor: a bad profile is a configuration error (which the
    // manager does not restart), not a usage error.
    let profile = match ProfileName::parse(profile).and_then(Profile::from_env) {
        Ok(profile) => profile,
        Err(e) => return Ok(Err(GatewayError::Profile(e))),
    };
    // Before any thread exists: setting the environment is not thread-safe.
    crate::env_file::load(&profile.env_file());
    // A wake-up while probes are out is held for the rest of their answers (`answer_batch`).
    let runtime = super::runtime_builder()
        .on_thread_unpark(answer_batch::on_wake)
        .build()
        .map_err(CliError::AsyncRuntime)?;
    let frontends: Vec<Box<dyn runtime::Frontend>> = vec![
        // First: the spool has its judge before anything could store a message.
        Box::new(crate::access::Access::new(&profile)),
        Box::new(crate::api::LocalApi::new(&profile)),
        Box::new(crate::agent::Bridge::new(&profile)),
    ];
    Ok(runtime.block_on(runtime::run(&profile, manager, frontends)))
}
