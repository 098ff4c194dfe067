//! `launchd-overrides.toml`: what `set` and `unset` change for a launchd profile, since launchd
//! has no drop-ins.
//!
//! The file lives in the profile home (`<home>/launchd-overrides.toml`), not beside the plist:
//! launchd reads every file in `~/Library/LaunchAgents` as a job, so a second plist there would
//! be loaded as one, and anything else there is a file launchd has to skip. In the profile home
//! it sits with `gateway.toml`, is backed up and moved with the profile, and doctor finds it
//! without knowing which manager serves the profile. TOML, like `gateway.toml`: a person can
//! read it, comment it and fix it, and every mistake is reported with the file, the key and
//! the fix. The renderer merges it into the plist ([`Overrides::apply`]); the plist itself
//! stays exactly what hermes-svc rendered, so its hash keeps telling a hand edit.
//!
//! ```toml
//! [service]
//! RestartSec = 10     # launchd's ThrottleInterval
//! WatchdogSec = 60    # the gateway's self-watchdog, HERMES_WATCHDOG_SEC
//!
//! [env]
//! HTTPS_PROXY = "http://proxy:8080"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{unrepresentable, LaunchAgent, SERVICE_MANAGER_ENV, WATCHDOG_ENV};
use crate::bounded_read::{self, Owner, ReadError};
use crate::profile::Profile;
use crate::service::settings::{Directive, MAX_SECONDS};
use crate::systemd::dropin;
use crate::systemd::escape;

/// The file name inside the profile home.
pub const OVERRIDES_FILE: &str = "launchd-overrides.toml";

const SERVICE: &str = "service";
const ENV: &str = "env";

const HEADER: &str = "\
# Settings for this profile's LaunchAgent. launchd has no drop-ins: hermes-svc merges this
# file into the plist it renders. Change it with `hermes-svc set` and `hermes-svc unset`;
# an edit by hand is kept, and takes effect at the next install or set.
";

/// Why the overrides could not be read or changed. Each message names the file (or the
/// setting), the key and the fix.
#[derive(Debug, thiserror::Error)]
pub enum OverridesError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}: not valid TOML: {message}\nfix the file, or remove it and set the values again with `hermes-svc set`")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {key}: {why}")]
    File {
        path: PathBuf,
        key: String,
        why: String,
    },
    #[error("{key}: {why}")]
    Setting { key: String, why: String },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What `set` stored for a profile. Ordered maps make renders deterministic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub env: BTreeMap<String, String>,
    pub directives: BTreeMap<Directive, u64>,
}

/// Looks like a credential by its name. The plist is a plain file that backup and sync tools
/// read, and `launchctl print` shows its environment to anyone who asks; a token belongs in
/// the profile's `.env`, which the gateway reads itself. A guard against the obvious mistake,
/// not a guarantee.
fn looks_secret(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "PRIVATE_KEY",
        "ACCESS_KEY",
    ];
    let upper = name.to_ascii_uppercase();
    WORDS.iter().any(|w| upper.contains(w))
}

/// Why an environment variable may not be set in the plist, if it may not.
pub(super) fn env_refusal(name: &str) -> Option<&'static str> {
    if escape::env_name(name).is_err() {
        return Some(
            "not a valid variable name: use letters, digits and '_', not starting with a digit",
        );
    }
    if name == "HERMES_HOME" {
        return Some("the plist sets it from the profile; install with HERMES_HOME set instead");
    }
    if name == SERVICE_MANAGER_ENV {
        return Some("the plist sets it, so that the gateway maps its exit codes for launchd");
    }
    if name == WATCHDOG_ENV {
        return Some("the plist sets it from WatchdogSec; set WatchdogSec instead");
    }
    if Directive::from_name(name).is_some() {
        return Some("it is a setting, not a variable: put it under [service]");
    }
    if matches!(name, "XPC_SERVICE_NAME" | "XPC_FLAGS") {
        return Some("launchd sets it for the job itself");
    }
    if dropin::reserved_env(name).is_some() {
        return Some("it is part of systemd's interface with a service, and would mislead the gateway under launchd");
    }
    if looks_secret(name) {
        return Some("it looks like a secret, and the plist is readable by other programs: put it in the profile's .env, which the gateway reads itself");
    }
    None
}

fn seconds_refusal(secs: i64) -> Option<String> {
    (!(1..=MAX_SECONDS as i64).contains(&secs)).then(|| {
        format!("must be a whole number of seconds from 1 to {MAX_SECONDS}, like 30, got {secs}")
    })
}

fn value_refusal(value: &str) -> Option<String> {
    unrepresentable(value)
        .map(|ch| format!("the value holds {ch:?}, which a property list cannot hold; remove it"))
}

/// A TOML basic string. Control characters never get here (they are refused first), so only
/// `"` and `\` need escaping.
fn toml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

impl Overrides {
    /// `<profile home>/launchd-overrides.toml`.
    pub fn path(profile: &Profile) -> PathBuf {
        profile.home().join(OVERRIDES_FILE)
    }

    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.directives.is_empty()
    }

    /// Read the file; a missing file means nothing was set.
    pub fn load(path: &Path) -> Result<Self, OverridesError> {
        match bounded_read::read_to_string(path, bounded_read::LIMIT, Owner::SelfOrRoot)? {
            Some(text) => Self::parse(&text, path),
            None => Ok(Self::default()),
        }
    }

    /// Parse the file's text. Anything hermes-svc would not write is an error rather than
    /// silently dropped, because the next `set` would lose it.
    pub fn parse(text: &str, path: &Path) -> Result<Self, OverridesError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| OverridesError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let bad = |key: String, why: String| OverridesError::File {
            path: path.to_owned(),
            key,
            why,
        };
        let mut out = Self::default();
        for (section, value) in &table {
            let entries = match (section.as_str(), value.as_table()) {
                (SERVICE | ENV, Some(t)) => t,
                (SERVICE | ENV, None) => {
                    return Err(bad(
                        section.clone(),
                        format!("must be a section, [{section}]"),
                    ))
                }
                _ => {
                    return Err(bad(
                        section.clone(),
                        "not something hermes-svc writes: the sections are [service] and [env]"
                            .into(),
                    ))
                }
            };
            for (key, value) in entries {
                let name = format!("[{section}] {key}");
                if section == SERVICE {
                    let d = Directive::from_name(key).ok_or_else(|| {
                        bad(
                            name.clone(),
                            "not a setting hermes-svc knows: use RestartSec or WatchdogSec".into(),
                        )
                    })?;
                    let secs = value.as_integer().ok_or_else(|| {
                        bad(
                            name.clone(),
                            "must be a whole number of seconds, like 30, without quotes".into(),
                        )
                    })?;
                    if let Some(why) = seconds_refusal(secs) {
                        return Err(bad(name, why));
                    }
                    out.directives.insert(d, secs.unsigned_abs());
                } else {
                    if let Some(why) = env_refusal(key) {
                        return Err(bad(name, why.into()));
                    }
                    let v = value.as_str().ok_or_else(|| {
                        bad(
                            name.clone(),
                            "must be a string in double quotes, like \"value\"".into(),
                        )
                    })?;
                    if let Some(why) = value_refusal(v) {
                        return Err(bad(name, why));
                    }
                    out.env.insert(key.clone(), v.to_owned());
                }
            }
        }
        Ok(out)
    }

    /// The file's text, comments first, sections in a fixed order.
    pub fn render(&self) -> String {
        let mut out = HEADER.to_owned();
        if !self.directives.is_empty() {
            out.push_str(&format!("\n[{SERVICE}]\n"));
            for (d, secs) in &self.directives {
                out.push_str(&format!("{} = {secs}\n", d.name()));
            }
        }
        if !self.env.is_empty() {
            out.push_str(&format!("\n[{ENV}]\n"));
            for (name, value) in &self.env {
                out.push_str(&format!("{name} = {}\n", toml_string(value)));
            }
        }
        out
    }

    /// Write the file whole (temporary file, then rename), readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), OverridesError> {
        crate::atomic_file::write(path, self.render().as_bytes(), 0o600).map_err(|source| {
            OverridesError::Write {
                path: path.to_owned(),
                source,
            }
        })
    }

    /// `set KEY=VALUE`: a setting (`RestartSec`, `WatchdogSec`, in seconds, an `s` allowed)
    /// or an environment variable. Returns whether anything changed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, OverridesError> {
        let bad = |why: String| OverridesError::Setting {
            key: key.to_owned(),
            why,
        };
        if let Some(d) = Directive::from_name(key) {
            let raw = value.trim();
            let secs: i64 = raw
                .strip_suffix('s')
                .unwrap_or(raw)
                .parse()
                .map_err(|_| bad(format!("must be a whole number of seconds from 1 to {MAX_SECONDS}, like 30, got {value:?}")))?;
            if let Some(why) = seconds_refusal(secs) {
                return Err(bad(why));
            }
            return Ok(self.directives.insert(d, secs.unsigned_abs()) != Some(secs.unsigned_abs()));
        }
        if let Some(why) = env_refusal(key) {
            return Err(bad(why.into()));
        }
        if let Some(why) = value_refusal(value) {
            return Err(bad(why));
        }
        Ok(self.env.insert(key.to_owned(), value.to_owned()).as_deref() != Some(value))
    }

    /// `unset KEY`. Returns whether it was set. A name that could never have been set is an
    /// error, so a typo is not reported as "was not set".
    pub fn unset(&mut self, key: &str) -> Result<bool, OverridesError> {
        if let Some(d) = Directive::from_name(key) {
            return Ok(self.directives.remove(&d).is_some());
        }
        escape::env_name(key).map_err(|e| OverridesError::Setting {
            key: key.to_owned(),
            why: e.to_string(),
        })?;
        Ok(self.env.remove(key).is_some())
    }

    /// Merge into an agent: variables are added, `RestartSec` becomes `ThrottleInterval` (the
    /// least time between two starts, which is not quite a delay after an exit: a job that
    /// ran longer than it restarts at once), and `WatchdogSec` the gateway's self-watchdog.
    pub fn apply(&self, agent: &mut LaunchAgent) {
        agent
            .env
            .extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (d, secs) in &self.directives {
            match d {
                Directive::RestartSec => agent.throttle_interval = *secs,
                Directive::WatchdogSec => agent.watchdog_sec = Some(*secs),
            }
        }
    }
}

#[cfg(test)]
mod tests;
