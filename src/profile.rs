//! A profile is one bot identity: a home directory, a config and a token.
//!
//! Every path the tool touches is derived here, from one explicit profile name, so that no code
//! path can write into another profile's home by consulting ambient state (the root cause of the
//! PID-file misrouting seen in the field).

use std::fmt;
use std::path::{Path, PathBuf};

/// The Relay secret's name inside [`Profile::agent_dir`].
pub(crate) const RELAY_SECRET: &str = "relay-secret";

/// The outbox journal's name inside [`Profile::outbox_dir`]: a path of the profile's, which the
/// outbox opens and doctor and status read.
pub(crate) const OUTBOX_JOURNAL: &str = "journal.jsonl";

/// The profile whose home is `$HERMES_HOME` itself rather than a subdirectory.
pub(crate) const DEFAULT_PROFILE: &str = "default";

/// Why a profile name or home could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "invalid profile name {0:?}: use 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit"
    )]
    InvalidName(String),
    #[error("cannot find a home directory: set HERMES_HOME or HOME")]
    NoHome,
    #[error("HERMES_HOME must be an absolute path, got {0:?}")]
    RelativeHome(PathBuf),
}

/// A validated profile name: `^[a-z0-9][a-z0-9_-]{0,63}$`.
///
/// Validation happens before any file is touched, and the charset also rules out path traversal
/// and unit-file injection (no `/`, `.`, whitespace or control characters can get through).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ProfileName(String);

impl ProfileName {
    pub fn parse(name: &str) -> Result<Self, ProfileError> {
        let bytes = name.as_bytes();
        let head_ok = bytes
            .first()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let tail_ok = bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-');
        if head_ok && tail_ok && bytes.len() <= 64 {
            Ok(Self(name.to_owned()))
        } else {
            Err(ProfileError::InvalidName(name.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn is_default(&self) -> bool {
        self.0 == DEFAULT_PROFILE
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for ProfileName {
    type Err = ProfileError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A resolved profile: its name, the `HERMES_HOME` it lives under, and every path inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    name: ProfileName,
    hermes_home: PathBuf,
}

impl Profile {
    pub fn new(name: ProfileName, hermes_home: PathBuf) -> Result<Self, ProfileError> {
        if !hermes_home.is_absolute() {
            return Err(ProfileError::RelativeHome(hermes_home));
        }
        Ok(Self { name, hermes_home })
    }

    /// Resolve against `HERMES_HOME`, else `~/.hermes`, from this process's environment.
    pub(crate) fn from_env(name: ProfileName) -> Result<Self, ProfileError> {
        Self::new(name, hermes_home_from_env()?)
    }

    pub fn name(&self) -> &ProfileName {
        &self.name
    }

    pub(crate) fn hermes_home(&self) -> &Path {
        &self.hermes_home
    }

    /// `$HERMES_HOME` for `default`, `$HERMES_HOME/profiles/NAME` otherwise.
    pub fn home(&self) -> PathBuf {
        if self.name.is_default() {
            self.hermes_home.clone()
        } else {
            self.hermes_home.join("profiles").join(self.name.as_str())
        }
    }

    pub(crate) fn config_file(&self) -> PathBuf {
        self.home().join("gateway.toml")
    }
    pub fn env_file(&self) -> PathBuf {
        self.home().join(".env")
    }
    pub(crate) fn pid_file(&self) -> PathBuf {
        self.home().join("gateway.pid")
    }
    pub(crate) fn lock_file(&self) -> PathBuf {
        self.home().join("gateway.lock")
    }
    pub(crate) fn state_file(&self) -> PathBuf {
        self.home().join("state").join("gateway.json")
    }
    /// The note that this profile's gateway runs in an etcd cluster (cluster/membership.rs).
    pub(crate) fn cluster_membership(&self) -> PathBuf {
        self.home().join("state").join("cluster.json")
    }
    /// The local agent API's Unix socket, in a directory of its own so that the directory's
    /// mode (0700) alone keeps other users out.
    pub fn api_socket(&self) -> PathBuf {
        self.home().join("state").join("api").join("agent.sock")
    }
    /// The agent's own files: the relay secret, and Hermes's home for the agent unit.
    pub fn agent_dir(&self) -> PathBuf {
        self.home().join("agent")
    }
    /// The Relay's secret, which the gateway makes and the agent unit's Hermes signs with.
    pub fn relay_secret(&self) -> PathBuf {
        self.agent_dir().join(RELAY_SECRET)
    }
    /// The media store: the files of chat messages, fetched for the agent.
    pub fn media_dir(&self) -> PathBuf {
        self.home().join("media")
    }
    /// The access rules' own files: the pairing store.
    pub fn access_dir(&self) -> PathBuf {
        self.home().join("access")
    }
    pub(crate) fn inbox_dir(&self) -> PathBuf {
        self.home().join("inbox")
    }
    /// The durable outbox, next to the inbox.
    pub(crate) fn outbox_dir(&self) -> PathBuf {
        self.home().join("outbox")
    }
    /// The outbox's journal, which the outbox opens by its name inside [`Profile::outbox_dir`].
    pub(crate) fn outbox_journal(&self) -> PathBuf {
        self.outbox_dir().join(OUTBOX_JOURNAL)
    }
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.home().join("logs")
    }

    /// The systemd unit that serves this profile; `default` is named too, so every unit says
    /// which profile it runs.
    pub fn unit_name(&self) -> String {
        unit_name(&self.name)
    }
}

/// `hermes-gateway-<profile>.service`.
pub(crate) fn unit_name(name: &ProfileName) -> String {
    format!("{UNIT_PREFIX}{name}{UNIT_SUFFIX}")
}

pub(crate) const UNIT_PREFIX: &str = "hermes-gateway-";
pub(crate) const UNIT_SUFFIX: &str = ".service";

/// The profile a unit name of ours serves, if it is one of ours.
pub(crate) fn profile_of_unit(unit: &str) -> Option<ProfileName> {
    let name = unit.strip_prefix(UNIT_PREFIX)?.strip_suffix(UNIT_SUFFIX)?;
    ProfileName::parse(name).ok()
}

/// Profiles that have a home under `hermes_home`: `default` (the home itself) when it holds
/// gateway files, and every valid name under `profiles/`.
pub(crate) fn names_in(hermes_home: &Path) -> Vec<ProfileName> {
    let mut names = vec![];
    let has_default = ["gateway.toml", ".env", "gateway.pid", "state"]
        .iter()
        .any(|f| hermes_home.join(f).exists());
    if has_default {
        names.extend(ProfileName::parse(DEFAULT_PROFILE).ok());
    }
    if let Ok(entries) = std::fs::read_dir(hermes_home.join("profiles")) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                if let Ok(n) = ProfileName::parse(&e.file_name().to_string_lossy()) {
                    names.push(n);
                }
            }
        }
    }
    names.sort();
    names
}

/// `HERMES_HOME` as this process's environment sets it, not yet checked. The one place it is
/// read, so that an empty value (`HERMES_HOME= hermes-svc ...`) means "not set" to every
/// caller alike rather than a relative home to some of them.
pub(crate) fn hermes_home_var() -> Option<PathBuf> {
    std::env::var_os("HERMES_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `HERMES_HOME` if set (must be absolute), else `$HOME/.hermes`.
pub(crate) fn hermes_home_from_env() -> Result<PathBuf, ProfileError> {
    match hermes_home_var() {
        Some(home) => {
            if home.is_absolute() {
                Ok(home)
            } else {
                Err(ProfileError::RelativeHome(home))
            }
        }
        None => default_hermes_home(),
    }
}

/// `$HOME/.hermes`: where a gateway looks when nothing says otherwise.
pub(crate) fn default_hermes_home() -> Result<PathBuf, ProfileError> {
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .ok_or(ProfileError::NoHome)?;
    Ok(PathBuf::from(home).join(".hermes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_names() {
        for ok in ["default", "coder", "a", "0bot", "my_bot-2", &"a".repeat(64)] {
            assert!(ProfileName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_invalid_names() {
        for bad in [
            "",
            "../x",
            "A",
            "a b",
            "x\nExecStartPre=/bin/sh",
            "-lead",
            "_lead",
            "a.b",
            "a/b",
            &"a".repeat(65),
        ] {
            let err = ProfileName::parse(bad).unwrap_err();
            assert!(err.to_string().contains("1-64 characters"), "{bad:?}");
        }
    }

    #[test]
    fn default_lives_at_hermes_home_and_others_below_it() {
        let home = PathBuf::from("/h");
        let d = Profile::new(ProfileName::parse("default").unwrap(), home.clone()).unwrap();
        let c = Profile::new(ProfileName::parse("coder").unwrap(), home).unwrap();
        assert_eq!(d.pid_file(), PathBuf::from("/h/gateway.pid"));
        assert_eq!(c.pid_file(), PathBuf::from("/h/profiles/coder/gateway.pid"));
        assert_eq!(
            c.api_socket(),
            PathBuf::from("/h/profiles/coder/state/api/agent.sock")
        );
        assert_eq!(d.api_socket(), PathBuf::from("/h/state/api/agent.sock"));
        assert_eq!(c.unit_name(), "hermes-gateway-coder.service");
        assert_eq!(d.unit_name(), "hermes-gateway-default.service");
        assert_eq!(
            profile_of_unit("hermes-gateway-coder.service")
                .unwrap()
                .as_str(),
            "coder"
        );
        assert!(profile_of_unit("hermes-gateway.service").is_none());
    }

    #[test]
    fn relative_home_is_rejected() {
        let n = ProfileName::parse("x").unwrap();
        assert!(Profile::new(n, PathBuf::from("rel")).is_err());
    }
}
