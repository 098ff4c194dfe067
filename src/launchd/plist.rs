//! The LaunchAgent property list for a profile: rendered, parsed back, and told apart from a hand-edited one.
//!
//! One profile is one job, `ai.hermes.gateway.<profile>`, in
//! `~/Library/LaunchAgents/ai.hermes.gateway.<profile>.plist`: launchd.plist(5) expects a job's
//! file to be named `<Label>.plist`, and a label that differs from its file name is one of the
//! ways peers' plists go wrong (two names for one job, and `bootout` by path misses it).
//!
//! The plist is built as a [`plist::Value`] and written by the `plist` crate, so every string is
//! XML-escaped by one tested writer, never by string formatting. Keys are inserted in one fixed
//! order, so two equal agents render byte-identical files and "unchanged" is a text comparison.
//!
//! # Restart semantics under launchd
//!
//! launchd has no `RestartPreventExitStatus=`: a `KeepAlive` job is either kept alive on every
//! exit (`KeepAlive = true`, which respawns a configuration conflict every `ThrottleInterval`
//! forever, the bug in hermes-agent's own tracker), or on a condition. The plist uses
//! `KeepAlive = { SuccessfulExit = false }`: launchd restarts the job unless it exited with
//! status 0. launchd's `job_keepalive()` computes "successful" as
//! `WIFEXITED(status) && WEXITSTATUS(status) == 0`, so a death by signal (a crash, SIGKILL after
//! `ExitTimeOut`, the kernel's memory killer) is a failure and is restarted too.
//!
//! The gateway therefore maps its exits differently when it runs under launchd, which it learns
//! from `HERMES_SERVICE_MANAGER=launchd` in the plist's `EnvironmentVariables`
//! ([`SERVICE_MANAGER_ENV`]):
//!
//! | what happened                                    | under systemd | under launchd | launchd then   |
//! |--------------------------------------------------|---------------|---------------|----------------|
//! | SIGTERM/SIGINT: a requested stop                 | 0             | 0             | nothing        |
//! | token conflict, another gateway holds the token  | 78            | 0             | leaves it down |
//! | bad `gateway.toml`, bad profile, fatal adapter   | 78            | 0             | leaves it down |
//! | "restart me" (stale component, long outage)      | 75            | 75            | restarts it    |
//! | the self-watchdog fired (a wedged adapter)       | watchdog kill | 75            | restarts it    |
//! | any other error                                  | 1             | 1             | restarts it    |
//! | a panic or a crash signal                        | 101 / signal  | 101 / signal  | restarts it    |
//!
//! The run loop never ends cleanly unasked (it returns only on SIGTERM or SIGINT), so there is
//! no unrequested exit 0 for launchd to leave down.
//!
//! A requested stop exits 0 under both managers: hermes-svc stops a job with `bootout`, after
//! which nothing is left for `KeepAlive` to act on, and `kickstart -k` restarts regardless of
//! the status. A person's own `kill <pid>` therefore leaves the gateway down, as
//! `systemctl stop` would; `hermes-svc start` brings it back.
//!
//! Exit 0 for "do not restart" hides the reason from `launchctl print` (`last exit code = 0`),
//! so the gateway must write it where `status` reads it (its state file and stderr, which the
//! plist sends to `logs/gateway.err.log`). 78 would be the worse signal anyway: launchd itself
//! reports `last exit code = 78: EX_CONFIG` when it cannot set a job up (an unopenable
//! `StandardOutPath`, a missing program), so 78 from launchd does not mean the gateway said so.

mod header;
mod job;
mod overrides;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plist::{Dictionary, Value};

use crate::profile::{Profile, ProfileName};
use crate::service::role::Role;

pub use header::{body, provenance};
pub use job::{Job, JobError};
pub use overrides::{Overrides, OverridesError, OVERRIDES_FILE};

/// Every gateway label of ours starts with this; the profile name follows.
pub const LABEL_PREFIX: &str = "ai.hermes.gateway.";
/// The agent's job beside a profile's gateway: `ai.hermes.agent.<profile>`.
pub const AGENT_LABEL_PREFIX: &str = "ai.hermes.agent.";
/// launchd.plist(5): "property list files are expected to have their name end in .plist".
pub const FILE_SUFFIX: &str = ".plist";
/// Where a user's agents live, relative to the home directory.
pub const AGENTS_DIR: &str = "Library/LaunchAgents";

/// Tells the gateway it runs under launchd, so it maps its exits as the table above says.
pub use crate::service::manager::SERVICE_MANAGER_ENV;
/// The self-watchdog deadline when `WatchdogSec` is set: launchd has no watchdog of its own,
/// so the gateway enforces it (see [`Overrides`]).
pub const WATCHDOG_ENV: &str = "HERMES_WATCHDOG_SEC";

/// launchd's own default, written out. launchd has no start limit (no `StartLimitBurst=`), so
/// the throttle is the only brake on a crash loop; a job that ran longer than this is
/// restarted at once, a shorter run waits out the rest of the interval. `RestartSec` overrides it.
pub const THROTTLE_INTERVAL_SEC: u64 = 10;
/// SIGTERM to SIGKILL. Longer than the gateway's own drain timeout, as `TimeoutStopSec=` is.
pub const EXIT_TIMEOUT_SEC: u64 = crate::systemd::unit_file::TIMEOUT_STOP_SEC;
/// `Standard` is what launchd applies with no `ProcessType`, spelled out so doctor can read it.
/// `Background` would put a gateway that answers people on efficiency cores with throttled
/// I/O and coalesced timers: replies slow down and the self-watchdog's deadlines slip.
pub const PROCESS_TYPE: &str = "Standard";
/// launchd.plist(5): "This configuration file only applies to sessions of the type(s)
/// specified. This key only applies to jobs which are agents." `Aqua` is a graphical login
/// (`gui/<uid>`); `Background` is the per-user domain without one (`user/<uid>`, an ssh-only
/// Mac), where an agent limited to the default `Aqua` would never load.
pub const SESSION_TYPES: [&str; 2] = ["Aqua", "Background"];

/// Why a LaunchAgent could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the path {0} is not valid UTF-8, which a property list string cannot hold")]
    NonUtf8Path(PathBuf),
    #[error("the program path {0} is not absolute; launchd would look it up in its own PATH")]
    RelativeProgram(PathBuf),
    #[error("{what} contains {ch:?}, which a property list cannot hold as it is: {value:?}")]
    Unrepresentable {
        what: String,
        ch: char,
        value: String,
    },
    #[error("environment variable {name}: {why}")]
    Env { name: String, why: String },
    #[error("failed to write the property list")]
    Write(#[from] plist::Error),
}

/// Everything a profile's LaunchAgent depends on. Two equal agents render byte-identical files.
///
/// [`LaunchAgent::new`] gives the defaults; [`Overrides::apply`] merges what `set` stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchAgent {
    pub profile: Profile,
    /// Absolute path of the `hermes-svc` binary the job runs.
    pub program: PathBuf,
    /// The user's variables from [`Overrides`], besides the ones the renderer sets itself.
    pub env: BTreeMap<String, String>,
    pub throttle_interval: u64,
    /// Passed to the gateway as [`WATCHDOG_ENV`] when set.
    pub watchdog_sec: Option<u64>,
    /// The gateway's job, or the agent's beside it (`ai.hermes.agent.<profile>`).
    pub role: Role,
}

/// `ai.hermes.gateway.<profile>`.
pub fn label(profile: &ProfileName) -> String {
    format!("{LABEL_PREFIX}{profile}")
}

/// `<home>/Library/LaunchAgents/ai.hermes.gateway.<profile>.plist`: the file name is the label.
pub fn path(home_dir: &Path, profile: &ProfileName) -> PathBuf {
    home_dir
        .join(AGENTS_DIR)
        .join(format!("{}{FILE_SUFFIX}", label(profile)))
}

/// The profile a plist file name of ours serves, if it is one of ours. hermes-agent's own
/// `ai.hermes.gateway.plist` and `ai.hermes.gateway-<profile>.plist` are not.
pub fn profile_of_file(file_name: &str) -> Option<ProfileName> {
    let name = file_name
        .strip_prefix(LABEL_PREFIX)?
        .strip_suffix(FILE_SUFFIX)?;
    ProfileName::parse(name).ok()
}

/// The first character an XML property list cannot carry, if any. XML 1.0 has no way to write
/// most control characters (not even as `&#1;`), and U+FFFE and U+FFFF are not XML characters
/// at all. Tab, LF and CR could be written (the writer escapes CR as `&#13;`), but the systemd
/// renderer refuses them, and refusing them here too keeps one `set` value valid on both
/// platforms. The rest of Unicode goes through as it is.
fn unrepresentable(value: &str) -> Option<char> {
    value
        .chars()
        .find(|c| c.is_control() || u32::from(*c) & 0xFFFE == 0xFFFE)
}

fn checked(what: impl Into<String>, value: &str) -> Result<Value, RenderError> {
    match unrepresentable(value) {
        Some(ch) => Err(RenderError::Unrepresentable {
            what: what.into(),
            ch,
            value: value.to_owned(),
        }),
        None => Ok(Value::String(value.to_owned())),
    }
}

fn path_value(what: &str, p: &Path) -> Result<Value, RenderError> {
    let s = p
        .to_str()
        .ok_or_else(|| RenderError::NonUtf8Path(p.to_owned()))?;
    checked(what, s)
}

/// The agent's `StandardOutPath`, for the plist and for `logs`, which reads it back.
pub(crate) fn stdout_path(profile: &Profile) -> PathBuf {
    profile.logs_dir().join("gateway.out.log")
}

/// The agent's `StandardErrorPath`: the gateway's log, for the plist and for `logs`.
pub(crate) fn stderr_path(profile: &Profile) -> PathBuf {
    profile.logs_dir().join("gateway.err.log")
}

fn int(n: u64) -> Value {
    Value::Integer(n.into())
}

impl LaunchAgent {
    pub fn new(profile: Profile, program: PathBuf) -> Self {
        Self {
            profile,
            program,
            env: BTreeMap::new(),
            throttle_interval: THROTTLE_INTERVAL_SEC,
            watchdog_sec: None,
            role: Role::Gateway,
        }
    }

    /// The same job for another role.
    pub fn with_role(self, role: Role) -> Self {
        Self { role, ..self }
    }

    pub fn label(&self) -> String {
        match self.role {
            Role::Gateway => label(self.profile.name()),
            Role::Agent { .. } => format!("{AGENT_LABEL_PREFIX}{}", self.profile.name()),
        }
    }

    /// Where this agent's file goes for the user whose home directory is `home_dir`.
    pub fn path(&self, home_dir: &Path) -> PathBuf {
        home_dir
            .join(AGENTS_DIR)
            .join(format!("{}{FILE_SUFFIX}", self.label()))
    }

    /// Where `set` keeps this job's settings: the gateway's in the profile home, the agent's
    /// (which `set` never changes) beside its relay secret.
    pub fn overrides_path(&self) -> PathBuf {
        match self.role {
            Role::Gateway => Overrides::path(&self.profile),
            Role::Agent { .. } => self.profile.home().join("agent").join(OVERRIDES_FILE),
        }
    }

    /// The argv the job runs: always an explicit `--profile`, never `--replace`.
    pub fn argv(&self) -> Result<Vec<Value>, RenderError> {
        if !self.program.is_absolute() {
            return Err(RenderError::RelativeProgram(self.program.clone()));
        }
        let mut argv = vec![path_value("the program path", &self.program)?];
        match (&self.role, self.role.args(self.profile.name())) {
            (_, Some(args)) => argv.extend(
                args.into_iter()
                    .map(|a| checked("an argument", &a))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            (Role::Agent { hermes }, None) => return Err(RenderError::NonUtf8Path(hermes.clone())),
            (Role::Gateway, None) => unreachable!("the gateway's arguments are all UTF-8"),
        }
        Ok(argv)
    }

    /// `logs/gateway.out.log`: launchd opens it before it starts the program, and creates
    /// the directory when it can (a parent it cannot write ends the job with EX_CONFIG).
    pub fn stdout_path(&self) -> PathBuf {
        match self.role {
            Role::Gateway => stdout_path(&self.profile),
            Role::Agent { .. } => self.profile.logs_dir().join("agent.out.log"),
        }
    }

    /// `logs/gateway.err.log`, where the gateway's log (it writes to stderr) goes.
    pub fn stderr_path(&self) -> PathBuf {
        match self.role {
            Role::Gateway => stderr_path(&self.profile),
            Role::Agent { .. } => self.profile.logs_dir().join("agent.err.log"),
        }
    }

    /// `EnvironmentVariables`: `HERMES_HOME`, the manager marker, the watchdog if set, and the
    /// user's variables. Never a secret: the profile's `.env` is read by the gateway itself.
    fn environment(&self) -> Result<Dictionary, RenderError> {
        let mut env = BTreeMap::new();
        for (name, value) in &self.env {
            if let Some(why) = overrides::env_refusal(name) {
                return Err(RenderError::Env {
                    name: name.clone(),
                    why: why.to_owned(),
                });
            }
            env.insert(
                name.clone(),
                checked(format!("the value of {name}"), value)?,
            );
        }
        env.insert(
            "HERMES_HOME".to_owned(),
            path_value("HERMES_HOME", self.profile.hermes_home())?,
        );
        env.insert(
            SERVICE_MANAGER_ENV.to_owned(),
            Value::String("launchd".into()),
        );
        if let Some(secs) = self.watchdog_sec {
            env.insert(WATCHDOG_ENV.to_owned(), Value::String(secs.to_string()));
        }
        Ok(env.into_iter().collect())
    }

    /// The job as a property-list dictionary, in the order the file shows it.
    ///
    /// No `WorkingDirectory`: launchd fails a job whose working directory is missing before
    /// the program can say why (EX_CONFIG, respawned every throttle interval), while the
    /// gateway creates its profile home itself and names any problem in its log.
    pub fn dictionary(&self) -> Result<Dictionary, RenderError> {
        let mut d = Dictionary::new();
        d.insert("Label".into(), Value::String(self.label()));
        d.insert("ProgramArguments".into(), Value::Array(self.argv()?));
        d.insert(
            "EnvironmentVariables".into(),
            Value::Dictionary(self.environment()?),
        );
        d.insert("RunAtLoad".into(), Value::Boolean(true));
        let mut keep_alive = Dictionary::new();
        keep_alive.insert("SuccessfulExit".into(), Value::Boolean(false));
        d.insert("KeepAlive".into(), Value::Dictionary(keep_alive));
        d.insert("ThrottleInterval".into(), int(self.throttle_interval));
        let exit_timeout = match self.role {
            Role::Gateway => EXIT_TIMEOUT_SEC,
            Role::Agent { .. } => crate::systemd::unit_file::AGENT_TIMEOUT_STOP_SEC,
        };
        d.insert("ExitTimeOut".into(), int(exit_timeout));
        d.insert("ProcessType".into(), Value::String(PROCESS_TYPE.into()));
        d.insert(
            "LimitLoadToSessionType".into(),
            Value::Array(
                SESSION_TYPES
                    .iter()
                    .map(|s| Value::String((*s).into()))
                    .collect(),
            ),
        );
        d.insert(
            "StandardOutPath".into(),
            path_value("StandardOutPath", &self.stdout_path())?,
        );
        d.insert(
            "StandardErrorPath".into(),
            path_value("StandardErrorPath", &self.stderr_path())?,
        );
        Ok(d)
    }

    /// The file's text: XML, tab-indented, with the provenance header (see [`provenance`]).
    pub fn render(&self) -> Result<String, RenderError> {
        let mut xml = Vec::new();
        Value::Dictionary(self.dictionary()?).to_writer_xml_with_options(
            &mut xml,
            &plist::XmlWriteOptions::default().indent(b'\t', 1),
        )?;
        // The writer only ever produces UTF-8 from `String`s.
        let xml = String::from_utf8_lossy(&xml);
        Ok(header::stamp(&xml))
    }
}

#[cfg(test)]
mod tests;
