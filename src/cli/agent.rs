//! `agent run`: what the agent unit runs. It makes Hermes's environment from the profile
//! (`agent::hermes`), waits for the gateway's Relay, and execs Hermes in its place, so the
//! manager supervises Hermes itself: its exit status, its signals, its PID.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::error::CliError;
use crate::agent::hermes::{self, Launch};
use crate::error_chain::one_line;
use crate::gateway::exit::{status, Outcome};
use crate::profile::{Profile, ProfileName};
use crate::service::manager::Manager;

/// How long to wait for the gateway's Relay. Under systemd the unit starts after the gateway's
/// READY=1, when it listens already; launchd has no ordering, so the two start together.
const RELAY_WAIT: Duration = Duration::from_secs(60);

/// Exit statuses as the gateway's are mapped (`gateway::exit`): a refusal stays down (78 under
/// systemd, `RestartPreventExitStatus=78`; 0 under launchd), a gateway not there yet is
/// restarted (75).
pub(super) fn run(profile: &str, program: &Path) -> Result<u8, CliError> {
    let manager = Manager::current().unwrap_or(Manager::NATIVE);
    let launch = match prepare(profile, program, manager) {
        Ok(launch) => launch,
        Err(outcome) => return Ok(status(manager, outcome)),
    };
    if !relay_listens(launch.port) {
        tracing::error!(
            "the gateway's Relay is not listening on 127.0.0.1:{} after {} s; is the gateway running?",
            launch.port,
            RELAY_WAIT.as_secs()
        );
        return Ok(status(manager, Outcome::Restart));
    }
    for note in &launch.notes {
        tracing::warn!("{note}");
    }
    let mut cmd = std::process::Command::new(&launch.program);
    cmd.args(launch.args);
    for name in &launch.remove {
        cmd.env_remove(name);
    }
    cmd.env_remove("CREDENTIALS_DIRECTORY");
    cmd.envs(launch.set.iter().map(|(k, v)| (k, v)));
    let err = cmd.exec();
    tracing::error!(
        "cannot run {}: {err}; install hermes-agent==0.19.0 there or install the agent again with --agent-exec PATH",
        launch.program.display()
    );
    Ok(status(manager, Outcome::StayDown))
}

/// Hermes's launch, or the outcome of a refusal, which is logged with its fix.
fn prepare(profile: &str, program: &Path, manager: Manager) -> Result<Launch, Outcome> {
    let profile = match ProfileName::parse(profile).and_then(Profile::from_env) {
        Ok(profile) => profile,
        Err(e) => {
            tracing::error!("{}", one_line(&e));
            return Err(Outcome::StayDown);
        }
    };
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY");
    hermes::prepare(
        &profile,
        program,
        std::env::vars(),
        credentials.as_deref().map(Path::new),
    )
    .map_err(|e| {
        if e.is_temporary() {
            tracing::error!("{}", one_line(&e));
            return Outcome::Restart;
        }
        let restart = match manager {
            Manager::Systemd => format!(
                "systemctl restart hermes-agent-{}.service (with --user for a user unit)",
                profile.name()
            ),
            Manager::Launchd => format!("hermes-svc restart --profile {}", profile.name()),
        };
        tracing::error!("{}; then `{restart}`", one_line(&e));
        Outcome::StayDown
    })
}

/// Whether something accepts connections on `127.0.0.1:port` within [`RELAY_WAIT`].
fn relay_listens(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + RELAY_WAIT;
    loop {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
