//! Every way a command can fail, and the exit code each one means, in one place.
//!
//! The lower layers each have their own error type; this is where they meet the process's
//! exit status (`crate::exit_code`), so no caller has to guess a code from an error's type.

mod commands;

pub(crate) use commands::{FollowError, LogsError, ReloadError};

use std::path::PathBuf;

use crate::api::client::ClientError;
use crate::doctor::DoctorError;
use crate::edit_lock::EditLockError;
use crate::exit_code;
use crate::gateway::exit;
use crate::gateway::spool::SpoolError;
use crate::launchd::effects::LaunchdEffectError;
use crate::launchd::launchctl::LaunchctlError;
use crate::launchd::observed::LaunchdObserveError;
use crate::runtime::GatewayError;
use crate::service::manager::Manager;
use crate::service::planner::PlanError;
use crate::systemd::dropin::DropInError;
use crate::systemd::effects::EffectError;
use crate::systemd::observed::ObserveError;
use crate::systemd::unit_file::RenderError;
use crate::systemd::SystemdError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad input, found before anything was touched: one line that names the flag and the fix.
    #[error("{0}")]
    Usage(String),
    /// Doctor could not look at anything at all. It exits 2, as bad input does, so that a
    /// script can tell "could not tell" from "unhealthy" (1); shown as one line, like `Usage`.
    #[error("{0}")]
    DoctorBlind(DoctorError),
    /// The gateway's own failures carry the codes its service manager acts on, which differ
    /// by manager (`gateway::exit`): "stay down" is 78 for systemd and 0 for launchd.
    #[error(transparent)]
    Gateway(GatewayFailure),
    #[error("failed to start the async runtime")]
    AsyncRuntime(#[source] std::io::Error),
    #[error("failed to find this binary's path")]
    CurrentExe(#[source] std::io::Error),
    #[error(transparent)]
    Systemd(#[from] SystemdError),
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    EditLock(#[from] EditLockError),
    #[error(transparent)]
    Adopt(crate::adopt::AdoptError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Effect(#[from] EffectError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Launchctl(#[from] LaunchctlError),
    #[error(transparent)]
    LaunchdObserve(#[from] LaunchdObserveError),
    #[error(transparent)]
    LaunchdEffect(#[from] LaunchdEffectError),
    #[error(transparent)]
    DropIn(#[from] DropInError),
    #[error(transparent)]
    Events(#[from] SpoolError),
    #[error(transparent)]
    Follow(#[from] FollowError),
    #[error(transparent)]
    Logs(#[from] LogsError),
    /// No API socket answers for the profile: the gateway is not running.
    #[error(
        "the gateway for profile {profile} is not running (no API socket at {}); start it with hermes-svc start --profile {profile}",
        socket.display()
    )]
    GatewayNotRunning { profile: String, socket: PathBuf },
    /// A submit whose request may have reached the gateway but whose answer did not come
    /// back: the message may be queued. Exits 75 ("try again"), never 1 as "no gateway
    /// answers" does, and names the key under which a retry is queued at most once.
    #[error("outcome unknown: the message may or may not have been queued; retry with the same key, which queues it at most once: {retry} TEXT")]
    SendOutcomeUnknown {
        retry: String,
        #[source]
        source: ClientError,
    },
    /// The gateway answered through its API; a refusal of the request (a 4xx) means nothing
    /// was done, and exits 2 as bad input does.
    #[error(transparent)]
    Api(ClientError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Login(#[from] crate::platform::LoginError),
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write to stdout")]
    Stdout(#[source] std::io::Error),
    /// The demo is a script of many steps, each with its own context; it keeps anyhow.
    #[error(transparent)]
    Demo(anyhow::Error),
    /// A pairing command that did nothing: a wrong code, a lockout, a sender not approved,
    /// or a store that cannot be used; one line naming the fix.
    #[error("{0}")]
    Pairing(String),
    #[error(transparent)]
    Reload(#[from] ReloadError),
}

impl CliError {
    /// Every variant is listed, so a new one has to say which code it means.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::DoctorBlind(_) => exit_code::USAGE,
            CliError::SendOutcomeUnknown { .. } => exit_code::TEMPFAIL,
            CliError::Api(e) if e.is_client_error() => exit_code::USAGE,
            CliError::Gateway(GatewayFailure { error, manager }) => {
                exit::status(*manager, error.outcome())
            }
            CliError::AsyncRuntime(_)
            | CliError::Write { .. }
            | CliError::Stdout(_)
            | CliError::CurrentExe(_)
            | CliError::Systemd(_)
            | CliError::Observe(_)
            | CliError::EditLock(_)
            | CliError::Plan(_)
            | CliError::Effect(_)
            | CliError::Render(_)
            | CliError::Launchctl(_)
            | CliError::LaunchdObserve(_)
            | CliError::LaunchdEffect(_)
            | CliError::DropIn(_)
            | CliError::Events(_)
            | CliError::Follow(_)
            | CliError::Logs(_)
            | CliError::GatewayNotRunning { .. }
            | CliError::Api(_)
            | CliError::Json(_)
            | CliError::Login(_)
            | CliError::Demo(_)
            | CliError::Pairing(_) => exit_code::FAILURE,
            CliError::Config(_) => exit_code::USAGE,
            CliError::Reload(e) => e.exit_code(),
            CliError::Adopt(e) => e.exit_code(),
        }
    }
}

/// A gateway error together with the manager the gateway ran under: the pair decides the exit
/// code. It reads exactly as the error does, causes included.
#[derive(Debug)]
pub(crate) struct GatewayFailure {
    pub(crate) error: GatewayError,
    pub(crate) manager: Manager,
}

impl std::fmt::Display for GatewayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for GatewayFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// Validation messages are phrased where the flag is checked, naming the flag and the fix.
pub(super) fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_and_a_blind_doctor_exit_2_and_show_one_line() {
        let blind = CliError::DoctorBlind(DoctorError::NothingToCheck {
            bus: "no bus".into(),
            home: "no home".into(),
        });
        assert_eq!(blind.exit_code(), exit_code::USAGE);
        assert!(std::error::Error::source(&blind).is_none());
        assert_eq!(usage("--exec x: bad").exit_code(), exit_code::USAGE);
        assert_eq!(usage("--exec x: bad").to_string(), "--exec x: bad");
    }

    #[test]
    fn gateway_errors_keep_their_codes_and_the_rest_exit_1() {
        let gateway = |error, manager| CliError::Gateway(GatewayFailure { error, manager });
        let restart = gateway(GatewayError::Restart("stale".into()), Manager::Systemd);
        assert_eq!(restart.exit_code(), exit_code::TEMPFAIL);
        assert_eq!(restart.to_string(), "restarting: stale");
        let no_home = || GatewayError::Profile(crate::profile::ProfileError::NoHome);
        assert_eq!(
            gateway(no_home(), Manager::Systemd).exit_code(),
            exit_code::CONFIG
        );
        // launchd leaves only a 0 down.
        assert_eq!(
            gateway(no_home(), Manager::Launchd).exit_code(),
            exit_code::OK
        );
        let restart = gateway(GatewayError::Restart("stale".into()), Manager::Launchd);
        assert_eq!(restart.exit_code(), exit_code::TEMPFAIL);
        let io = || std::io::Error::other("boom");
        assert_eq!(CliError::AsyncRuntime(io()).exit_code(), exit_code::FAILURE);
        assert_eq!(
            CliError::Demo(anyhow::anyhow!("demo failed")).exit_code(),
            exit_code::FAILURE
        );
    }
}
