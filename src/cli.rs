//! The command line: parse, validate into a request, plan, apply, report.
//!
//! Validation happens before anything is touched, and a validation failure exits 2 with one
//! line that names the flag and the fix. Everything else that fails prints the error's cause
//! chain and exits with the code its `CliError` names (1, or the gateway's own codes).

use std::process::ExitCode;

use clap::Parser;

mod adopt;
mod agent;
mod apply;
mod args;
mod complete;
mod demo;
mod doctor;
mod error;
mod events;
mod gateway;
mod install;
mod lifecycle;
mod login;
mod logs;
mod pairing;
mod progress;
mod reload;
mod render;
mod report;
mod send;
mod service;
mod set;
mod shell_help;
mod status;
mod validate;

use crate::systemd::Job;
use args::{AgentCommand, Cli, Command, GatewayCommand};
use error::CliError;

/// Entry point for `main`: run, print errors, map them to exit codes.
pub fn main() -> ExitCode {
    // A shell asking for completions (`HERMES_SVC_COMPLETE=bash hermes-svc -- ...`) is
    // answered here, before anything else is written.
    shell_help::answer_completion_request();
    let cli = Cli::parse();
    // One TLS provider for the process (reqwest is built without one, to keep ring the only
    // crypto): every command that talks HTTPS (gateway, demo, doctor, login) finds it set.
    let _ = rustls::crypto::ring::default_provider().install_default();
    init_tracing(&cli.command);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            report::error(&err);
            ExitCode::from(err.exit_code())
        }
    }
}

/// The gateway logs what it does (info); a command logs only what went wrong (warn), since
/// it reports on stdout. A gateway's lines name its profile (on the journal, logging.rs).
fn init_tracing(command: &Command) {
    match command {
        Command::Gateway(GatewayCommand::Run { profile })
        | Command::Agent(AgentCommand::Run { profile, .. }) => {
            crate::logging::init(Some(profile), "info")
        }
        _ => crate::logging::init(None, "warn"),
    }
}

/// One thread is enough for a command, and for the gateway's sockets, however many.
fn runtime_builder() -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    builder
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    runtime_builder().build().map_err(CliError::AsyncRuntime)
}

fn run(cli: Cli) -> Result<u8, CliError> {
    match cli.command {
        Command::Gateway(GatewayCommand::Run { profile }) => gateway::run(&profile),
        Command::Agent(AgentCommand::Run { profile, hermes }) => agent::run(&profile, &hermes),
        Command::Render(args) => render::run(args),
        Command::Events(args) => events::run(args),
        Command::Logs(args) => logs::run(args),
        Command::Send(args) => send::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Login(login) => login::run(login),
        Command::Pairing(command) => pairing::run(command),
        Command::Install(args) => runtime()?.block_on(install::install(args)),
        Command::Uninstall(args) => runtime()?.block_on(install::uninstall(args)),
        Command::Adopt(args) => runtime()?.block_on(adopt::run(args)),
        Command::Set(args) => runtime()?.block_on(set::set(args)),
        Command::Unset(args) => runtime()?.block_on(set::unset(args)),
        Command::Start(a) => runtime()?.block_on(lifecycle::run(a, Job::Start)),
        Command::Stop(a) => runtime()?.block_on(lifecycle::run(a, Job::Stop)),
        Command::Restart(a) => runtime()?.block_on(lifecycle::run(a, Job::Restart)),
        Command::Reload(args) => reload::run(args),
        Command::Status(args) => runtime()?.block_on(status::run(args)),
        Command::Doctor(args) => runtime()?.block_on(doctor::run(args)),
        Command::Completions(args) => shell_help::completions(args),
        Command::Man(args) => shell_help::man(args),
    }
}
