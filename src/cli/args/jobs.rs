//! The arguments of the commands that edit or drive one profile's job (`install`, `adopt`,
//! `uninstall`, `set`, `unset`, `start`, `stop`, `restart`): which profile, which manager and
//! scope, and how long to wait.

use std::path::PathBuf;

use clap::Args;
use clap_complete::engine::ArgValueCompleter;

use super::super::complete::profiles;
use super::super::report::Output;
use super::{AgentKind, PROFILE};
use crate::systemd::scope::Scope;

#[derive(Args, Debug, Clone)]
pub(in crate::cli) struct ScopeArgs {
    /// Use the per-user manager (the default).
    #[arg(long, conflicts_with = "system")]
    pub(in crate::cli) user: bool,
    /// Use the system manager (/etc/systemd/system; needs root and --run-as).
    #[arg(long)]
    pub(in crate::cli) system: bool,
}

impl ScopeArgs {
    pub(in crate::cli) fn scope(&self) -> Scope {
        if self.system {
            Scope::System
        } else {
            Scope::User
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(in crate::cli) struct UnitSource {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(in crate::cli) profile: String,
    #[command(flatten)]
    pub(in crate::cli) scope: ScopeArgs,
    /// The account a system unit runs as (User=).
    #[arg(long, value_name = "USER")]
    pub(in crate::cli) run_as: Option<String>,
    /// The hermes-svc binary the unit runs (default: this binary).
    #[arg(long, value_name = "PATH")]
    pub(in crate::cli) exec: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(in crate::cli) struct InstallArgs {
    #[command(flatten)]
    pub(in crate::cli) source: UnitSource,
    /// An environment variable for the gateway, written to our drop-in (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub(in crate::cli) env: Vec<String>,
    /// A secret the manager hands the gateway as a credential (LoadCredential=NAME:PATH in
    /// our drop-in; systemd only): NAME is the variable gateway.toml names (token-env,
    /// secret-env), PATH an absolute path to a file holding the value. Unlike --env, the
    /// value never appears in the unit or in `systemctl show` (repeatable).
    #[arg(long = "credential", value_name = "NAME=PATH")]
    pub(in crate::cli) credentials: Vec<String>,
    /// WatchdogSec for the unit, written to our drop-in.
    #[arg(long, value_name = "N")]
    pub(in crate::cli) watchdog_sec: Option<String>,
    /// RestartSec for the unit, written to our drop-in.
    #[arg(long, value_name = "N")]
    pub(in crate::cli) restart_sec: Option<String>,
    /// Install the agent beside the gateway too: `hermes-agent-PROFILE.service` (a launchd job
    /// under launchd), after the gateway and part of it, running Hermes headless against this
    /// profile's Relay. gateway.toml must say `[agent] kind = "hermes-relay"`.
    #[arg(long, value_name = "KIND", value_enum)]
    pub(in crate::cli) agent: Option<AgentKind>,
    /// The `hermes` program the agent runs (default: `hermes` on PATH).
    #[arg(long, value_name = "PATH", requires = "agent")]
    pub(in crate::cli) agent_exec: Option<PathBuf>,
    /// Write and enable, but do not start.
    #[arg(long)]
    pub(in crate::cli) no_start: bool,
    /// Back up a hand-edited unit and rewrite it.
    #[arg(long)]
    pub(in crate::cli) force: bool,
    /// Stop, disable and back up other units that serve this profile.
    #[arg(long)]
    pub(in crate::cli) migrate: bool,
    /// Print every file and bus call, change nothing.
    #[arg(long)]
    pub(in crate::cli) dry_run: bool,
    /// Print what was done (or would be) as JSON.
    #[arg(long)]
    pub(in crate::cli) json: bool,
    #[command(flatten)]
    pub(in crate::cli) wait: WaitArgs,
}

#[derive(Args, Debug)]
pub(in crate::cli) struct AdoptArgs {
    #[command(flatten)]
    pub(in crate::cli) source: UnitSource,
    /// The `hermes` program the agent unit runs (default: `hermes` on PATH).
    #[arg(long, value_name = "PATH")]
    pub(in crate::cli) agent_exec: Option<PathBuf>,
    /// The loopback port the gateway's Relay listens on for Hermes (`[agent] port`; default:
    /// the Relay's own).
    #[arg(long, value_name = "PORT")]
    pub(in crate::cli) relay_port: Option<u16>,
    /// Switch back: uninstall the gateway and agent units, restore every file adopt changed
    /// byte for byte, move Hermes's state back and bring back its own gateway job.
    #[arg(long)]
    pub(in crate::cli) undo: bool,
    /// Print what would be adopted, left or refused, and every file and bus call; change
    /// nothing.
    #[arg(long)]
    pub(in crate::cli) dry_run: bool,
    #[command(flatten)]
    pub(in crate::cli) wait: WaitArgs,
}

#[derive(Args, Debug)]
pub(in crate::cli) struct UninstallArgs {
    #[command(flatten)]
    pub(in crate::cli) unit: UnitArgs,
    #[command(flatten)]
    pub(in crate::cli) output: OutputArgs,
}

#[derive(Args, Debug)]
pub(in crate::cli) struct SetArgs {
    #[command(flatten)]
    pub(in crate::cli) edit: EditArgs,
    /// KEY=VALUE pairs: environment variables, or WatchdogSec / RestartSec.
    #[arg(required = true, value_name = "KEY=VALUE")]
    pub(in crate::cli) pairs: Vec<String>,
}

#[derive(Args, Debug)]
pub(in crate::cli) struct UnsetArgs {
    #[command(flatten)]
    pub(in crate::cli) edit: EditArgs,
    /// Environment variable names, or WatchdogSec / RestartSec.
    #[arg(required = true, value_name = "KEY")]
    pub(in crate::cli) keys: Vec<String>,
}

/// What `set` and `unset` share: the unit whose settings change, whether a running one is
/// restarted to take them, and how the change is reported.
#[derive(Args, Debug)]
pub(in crate::cli) struct EditArgs {
    #[command(flatten)]
    pub(in crate::cli) unit: UnitArgs,
    /// Do not restart a running unit.
    #[arg(long)]
    pub(in crate::cli) no_restart: bool,
    #[command(flatten)]
    pub(in crate::cli) output: OutputArgs,
}

/// `start`, `stop` and `restart`: the unit, and how long to wait for the job.
#[derive(Args, Debug)]
pub(in crate::cli) struct LifecycleArgs {
    #[command(flatten)]
    pub(in crate::cli) unit: UnitArgs,
    #[command(flatten)]
    pub(in crate::cli) wait: WaitArgs,
}

/// How long a command waits for systemd's job (for a start: the gateway's READY=1). On a
/// terminal the wait shows the gateway's live STATUS= line.
#[derive(Args, Debug, Clone, Copy)]
pub(in crate::cli) struct WaitArgs {
    /// How long to wait for the job before giving up on it (systemd goes on with it); the
    /// error then shows the gateway's last STATUS= and the unit's Result.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = humantime::parse_duration)]
    pub(in crate::cli) timeout: std::time::Duration,
}

impl Default for WaitArgs {
    /// As the flag's default: a command that restarts on its own (`login KIND --restart`)
    /// waits as `restart` does.
    fn default() -> Self {
        Self {
            timeout: std::time::Duration::from_secs(120),
        }
    }
}

/// The unit a command acts on: the lifecycle commands and the commands that edit an
/// installed unit start with it.
#[derive(Args, Debug)]
pub(in crate::cli) struct UnitArgs {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(in crate::cli) profile: String,
    #[command(flatten)]
    pub(in crate::cli) scope: ScopeArgs,
}

/// `--dry-run` and `--json` as `uninstall`, `set` and `unset` take them.
#[derive(Args, Debug, Clone, Copy)]
pub(in crate::cli) struct OutputArgs {
    /// Print every file and bus call, change nothing.
    #[arg(long)]
    pub(in crate::cli) dry_run: bool,
    /// Print what was done (or would be) as JSON.
    #[arg(long)]
    pub(in crate::cli) json: bool,
}

impl OutputArgs {
    pub(in crate::cli) fn output(self) -> Output {
        Output {
            dry_run: self.dry_run,
            json: self.json,
        }
    }
}
