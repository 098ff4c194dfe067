//! The command line's grammar: every command, flag and help text that clap parses.
//!
//! Only the shapes live here; what a flag means is decided where it is validated
//! (`cli/validate.rs`) and used (one file per command).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::engine::ArgValueCompleter;

use super::complete::{profiles, shell_names};

mod jobs;
pub(super) use jobs::*;

/// `--profile`'s help, the same on every command.
pub(super) const PROFILE: &str = "The profile: its home is $HERMES_HOME/profiles/NAME (default: $HERMES_HOME itself; HERMES_HOME defaults to ~/.hermes)";
/// `--profile`'s help where it narrows a command that otherwise covers every profile.
const ONLY_PROFILE: &str = "Only this profile (default: every profile)";

#[derive(Parser, Debug)]
#[command(
    name = "hermes-svc",
    version,
    about = "Run a messaging-bot gateway as a native service, one unit per profile"
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand, Debug)]
pub(super) enum Command {
    /// Render, write, reload, enable and start a profile's unit (idempotent).
    Install(InstallArgs),
    /// Stop, disable and remove a profile's unit and our drop-in; profile data is kept.
    Uninstall(UninstallArgs),
    /// Switch a profile from Hermes's own gateway to hermes-svc (its platforms, access rules,
    /// pairings and cron deliveries), with Hermes as its agent; `--undo` switches back.
    Adopt(AdoptArgs),
    /// Set environment variables or directives (WatchdogSec, RestartSec) in our drop-in.
    Set(SetArgs),
    /// Remove environment variables or directives from our drop-in.
    Unset(UnsetArgs),
    /// Start a profile's unit, and wait for the gateway's READY=1.
    Start(LifecycleArgs),
    /// Stop a profile's unit.
    Stop(LifecycleArgs),
    /// Restart a profile's unit, and wait for the gateway's READY=1.
    Restart(LifecycleArgs),
    /// Have a profile's running gateway read its configuration again, and wait for the result.
    Reload(ReloadArgs),
    /// Show every installed profile: unit state, restarts, edits.
    Status(StatusArgs),
    /// Print the unit and drop-in that install would write, with no side effects.
    Render(RenderArgs),
    /// Print the inbound events a profile's gateway has spooled.
    Events(EventsArgs),
    /// Print a profile's gateway log: its unit's journal (journalctl), or under launchd its
    /// log files.
    Logs(LogsArgs),
    /// Send a message through a profile's running gateway (its local API), which queues it
    /// durably and delivers it.
    Send(SendArgs),
    /// Look for known ways a setup goes wrong (duplicate units, --replace, shared tokens,
    /// stale pid files, ...) and print the exact fix for each.
    Doctor(DoctorArgs),
    /// Who may talk to the agent by DM pairing: list the codes strangers were sent, approve
    /// or deny one, revoke an approved sender.
    #[command(subcommand)]
    Pairing(PairingCommand),
    /// Log a bot in to a platform whose login needs a person (a QR code to scan), and store
    /// the login in the profile.
    #[command(subcommand)]
    Login(LoginCommand),
    /// Run a gateway against a built-in mock platform, inject a half-open fault, and show
    /// that it is detected and resumed with no event lost. Needs no credentials or network.
    Demo(DemoArgs),
    /// The gateway process itself (what the unit runs).
    #[command(subcommand)]
    Gateway(GatewayCommand),
    /// The agent beside the gateway (what the agent unit runs).
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Print a shell's completion script: `hermes-svc completions bash >
    /// /usr/share/bash-completion/completions/hermes-svc` (or source it in ~/.bashrc).
    Completions(CompletionsArgs),
    /// Write a manual page for every command into a directory.
    Man(ManArgs),
}

#[derive(Args, Debug)]
pub(super) struct CompletionsArgs {
    /// The shell: bash, elvish, fish, powershell or zsh.
    #[arg(value_name = "SHELL", value_parser = clap::builder::PossibleValuesParser::new(shell_names()))]
    pub(super) shell: String,
}

#[derive(Args, Debug)]
pub(super) struct ManArgs {
    /// Where to write hermes-svc.1, hermes-svc-install.1, ... (created if missing).
    #[arg(value_name = "DIR")]
    pub(super) dir: PathBuf,
}

/// `login KIND`: one subcommand per platform that has a login command (the registry's
/// [`crate::platform::logins`]), each taking [`LoginArgs`].
#[derive(Debug)]
pub(super) struct LoginCommand {
    pub(super) kind: &'static str,
    pub(super) args: LoginArgs,
}

impl clap::FromArgMatches for LoginCommand {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let missing = || clap::Error::new(clap::error::ErrorKind::MissingSubcommand);
        let (name, sub) = matches.subcommand().ok_or_else(missing)?;
        let kind = crate::platform::logins()
            .into_iter()
            .map(|(kind, _)| kind)
            .find(|kind| *kind == name)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        Ok(Self {
            kind,
            args: LoginArgs::from_arg_matches(sub)?,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for LoginCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        crate::platform::logins()
            .into_iter()
            .fold(cmd, |cmd, (kind, about)| {
                cmd.subcommand(LoginArgs::augment_args(
                    clap::Command::new(kind).about(about),
                ))
            })
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        crate::platform::logins()
            .iter()
            .any(|(kind, _)| *kind == name)
    }
}

#[derive(Args, Debug)]
pub(super) struct LoginArgs {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(super) profile: String,
    /// The adapter of this platform in gateway.toml to log in (needed when there is more
    /// than one).
    #[arg(long, value_name = "NAME")]
    pub(super) adapter: Option<String>,
    /// Restart the profile's service once the login is stored.
    #[arg(long)]
    pub(super) restart: bool,
    /// How long to wait for the scan and the confirmation.
    #[arg(long, value_name = "DURATION", default_value = "8m", value_parser = humantime::parse_duration)]
    pub(super) timeout: std::time::Duration,
    #[command(flatten)]
    pub(super) scope: ScopeArgs,
}

#[derive(Subcommand, Debug)]
pub(super) enum GatewayCommand {
    /// Run the gateway for one profile in the foreground.
    Run {
        #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
        profile: String,
    },
}

#[derive(Subcommand, Debug)]
pub(super) enum PairingCommand {
    /// The codes waiting for approval (who asked, when, on which adapter; never a code) and
    /// the senders approved.
    List {
        #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
        profile: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Admit the sender a code was sent to, from their next message.
    Approve {
        #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
        profile: String,
        /// The code the sender was sent (8 characters; case does not matter).
        #[arg(value_name = "CODE")]
        code: String,
    },
    /// Throw a code away without admitting its sender.
    Deny {
        #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
        profile: String,
        /// The code the sender was sent.
        #[arg(value_name = "CODE")]
        code: String,
    },
    /// No longer admit an approved sender.
    Revoke {
        #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
        profile: String,
        /// The adapter they were approved on (its name in gateway.toml).
        #[arg(value_name = "ADAPTER")]
        adapter: String,
        /// Their id on the platform, as `pairing list` shows it.
        #[arg(value_name = "SENDER")]
        sender: String,
    },
}

#[derive(Subcommand, Debug)]
pub(super) enum AgentCommand {
    /// Run Hermes's gateway for one profile, headless, dialling the profile's Relay: its
    /// environment set from the profile (the Relay's URL, id and secret), every platform
    /// credential left out, then exec'd in this process's place.
    Run {
        #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
        profile: String,
        /// The `hermes` program to run.
        #[arg(long, value_name = "PATH")]
        hermes: PathBuf,
    },
}

/// The agents `install --agent` can put beside a gateway.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AgentKind {
    /// The Hermes agent (hermes-agent 0.19.0), through the Relay: `[agent] kind = "hermes-relay"`.
    Hermes,
}

#[derive(Args, Debug)]
pub(super) struct StatusArgs {
    #[arg(short, long, value_name = "NAME", help = ONLY_PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(super) profile: Option<String>,
    #[command(flatten)]
    pub(super) scope: ScopeArgs,
    /// Print the report as JSON (docs/status.md).
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Args, Debug)]
pub(super) struct ReloadArgs {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(super) profile: String,
    /// How long to wait for the gateway's answer.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub(super) timeout: std::time::Duration,
}

#[derive(Args, Debug)]
pub(super) struct EventsArgs {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(super) profile: String,
    /// Keep printing new events as they arrive.
    #[arg(long)]
    pub(super) follow: bool,
    /// Only events after the one with this id.
    #[arg(long, value_name = "ID")]
    pub(super) since: Option<String>,
    /// Print the stored JSON lines, a chat message's with its normalised "message" first.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Args, Debug)]
pub(super) struct LogsArgs {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(super) profile: String,
    /// Keep printing new lines as the gateway logs them.
    #[arg(short, long)]
    pub(super) follow: bool,
    /// Only lines from this time on, in journalctl's syntax: "2026-12-01 09:00", "today",
    /// "-1h" (systemd only).
    #[arg(long, value_name = "TIME")]
    pub(super) since: Option<String>,
    /// Only the lines of this adapter (its name in gateway.toml): the journal's
    /// HERMES_ADAPTER field, or under launchd the lines with adapter=NAME.
    #[arg(long, value_name = "NAME")]
    pub(super) adapter: Option<String>,
    /// Print the journal's entries as JSON, one object a line, with every field (systemd
    /// only).
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) scope: ScopeArgs,
}

#[derive(Args, Debug)]
pub(super) struct SendArgs {
    #[arg(short, long, value_name = "NAME", help = PROFILE, add = ArgValueCompleter::new(profiles))]
    pub(super) profile: String,
    /// Where to send: an adapter's name in gateway.toml, a colon, and the target on its
    /// platform, as docs/outbox.md#targets lists them for each platform (a chat, a group, a
    /// channel or a user, by its id). E.g. qq:group:OPENID, tg:chat:-1001234567890.
    #[arg(long, value_name = "ADAPTER:TARGET")]
    pub(super) to: String,
    /// The platform id of the message this answers.
    #[arg(long, value_name = "ID")]
    pub(super) reply_to: Option<String>,
    /// Give the same key when retrying this command, and the gateway queues the message
    /// once (default: a new random key, so a retried command sends again). When the outcome
    /// is unknown (exit 75), the error names the key to retry with.
    #[arg(long, value_name = "KEY")]
    pub(super) idempotency_key: Option<String>,
    /// When an attempt's outcome is unknown, send again (it may post twice) rather than
    /// report it `unknown`.
    #[arg(long)]
    pub(super) at_least_once: bool,
    /// A file to post with the text (which is then its caption), natively: a photo as a
    /// photo, anything else as a file. Give it again for more files, where the platform takes
    /// several in one message.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub(super) attach: Vec<std::path::PathBuf>,
    /// Print the message as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// The text; read from stdin when not given (one trailing newline is dropped). With
    /// --attach and stdin a terminal, the files go without text.
    #[arg(value_name = "TEXT")]
    pub(super) text: Option<String>,
}

#[derive(Args, Debug)]
pub(super) struct DoctorArgs {
    /// Only findings about this profile (and machine-wide ones).
    #[arg(short, long, value_name = "NAME", add = ArgValueCompleter::new(profiles))]
    pub(super) profile: Option<String>,
    /// Print `{"findings":[{"id","severity","subject","message","fix"}]}`.
    #[arg(long)]
    pub(super) json: bool,
    /// Apply the safe, reversible fixes, print each one, then report what remains.
    #[arg(long)]
    pub(super) fix: bool,
}

#[derive(Args, Debug)]
pub(super) struct DemoArgs {
    /// How long to let events flow before and after the fault, in seconds.
    #[arg(long, default_value_t = 4)]
    pub(super) seconds: u64,
}

#[derive(Args, Debug)]
pub(super) struct RenderArgs {
    #[command(flatten)]
    pub(super) source: UnitSource,
    /// Which manager's file to render: a systemd unit or a launchd plist (default: this
    /// machine's manager).
    #[arg(long, value_enum)]
    pub(super) target: Option<Target>,
    /// An environment variable for the gateway, as install would write it (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub(super) env: Vec<String>,
}

/// The service managers `render --target` can render for.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum Target {
    Systemd,
    Launchd,
}

impl From<Target> for crate::service::manager::Manager {
    fn from(t: Target) -> Self {
        match t {
            Target::Systemd => Self::Systemd,
            Target::Launchd => Self::Launchd,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    fn all(cmd: &clap::Command, out: &mut Vec<clap::Command>) {
        out.push(cmd.clone());
        for sub in cmd.get_subcommands() {
            all(sub, out);
        }
    }

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Completions, `--help` and the man pages all show it: nothing may be left unexplained,
    /// and `-p` is `--profile` wherever there is one.
    #[test]
    fn every_argument_has_help_and_profile_is_p_everywhere() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut commands = vec![];
        all(&cmd, &mut commands);
        let mut profiles = 0;
        for c in &commands {
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                let name = c.get_name();
                assert!(a.get_help().is_some(), "{name} {id}: no help text");
                if id == "profile" {
                    profiles += 1;
                    assert_eq!(a.get_short(), Some('p'), "{} --profile", c.get_name());
                }
            }
            assert!(
                c.get_about().is_some() || c.get_name() == "hermes-svc",
                "{}: no about",
                c.get_name()
            );
        }
        assert!(profiles >= 15, "{profiles} commands take --profile");
    }
}
