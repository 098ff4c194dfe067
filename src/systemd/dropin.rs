//! Our drop-in, `<unit>.d/50-hermes-svc.conf`: the customisations made through hermes-svc.
//!
//! Customisation never touches the base unit, so the base stays pristine and upgradable. The
//! file sorts before a person's `override.conf` (from `systemctl edit`), which therefore wins.

use std::collections::BTreeMap;

use askama::Template;

use crate::service::settings::Directive;
use crate::systemd::escape::{self, EscapeError};

/// The file name of our drop-in inside `<unit>.d/`.
pub const DROPIN_NAME: &str = "50-hermes-svc.conf";

/// Why an environment variable may not be set through our drop-in, if it may not: the manager
/// sets these itself for the service (systemd.exec(5), "Environment Variables in Spawned
/// Processes"), and one set by hand breaks what they are for (a `NOTIFY_SOCKET` of our own
/// and `start` waits for a READY that goes elsewhere). `HERMES_HOME` comes from the unit, so
/// that its paths and the profile's always agree.
pub fn reserved_env(name: &str) -> Option<&'static str> {
    const MANAGER: &[&str] = &[
        "NOTIFY_SOCKET",
        "MAINPID",
        "MANAGERPID",
        "INVOCATION_ID",
        "JOURNAL_STREAM",
        "SYSTEMD_EXEC_PID",
        "RUNTIME_DIRECTORY",
        "STATE_DIRECTORY",
        "CACHE_DIRECTORY",
        "LOGS_DIRECTORY",
        "CONFIGURATION_DIRECTORY",
        "CREDENTIALS_DIRECTORY",
        "SERVICE_RESULT",
        "EXIT_CODE",
        "EXIT_STATUS",
        "TRIGGER_UNIT",
        "TRIGGER_PATH",
        "TRIGGER_TIMER_REALTIME_USEC",
        "TRIGGER_TIMER_MONOTONIC_USEC",
    ];
    const PREFIXES: &[&str] = &["WATCHDOG_", "LISTEN_", "MONITOR_"];
    if name == "HERMES_HOME" {
        return Some("the unit sets it from the profile; install with HERMES_HOME set instead");
    }
    if Directive::from_name(name).is_some() {
        return Some("it is a unit directive, not a variable; use --watchdog-sec or --restart-sec");
    }
    if MANAGER.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Some("systemd sets it for the service itself");
    }
    None
}

/// Why `path` cannot be a credential's source in `LoadCredential=NAME:PATH`, if it cannot.
/// systemd expands specifiers in the path and strips the line's surrounding whitespace, and
/// reads a relative path as a credential store name; rather than escape, such paths are
/// refused, so what is written reads back the same.
pub fn credential_path(path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        return Some("it must be an absolute path");
    }
    if path.chars().any(|c| c.is_control()) {
        return Some("it holds a control character");
    }
    if path.contains('%') {
        return Some("systemd would read % as a specifier; use a path without %");
    }
    if path.trim() != path {
        return Some("it starts or ends with whitespace");
    }
    None
}

/// Why our drop-in could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum DropInError {
    #[error("line {line}: {text:?} is not something hermes-svc writes; move it to override.conf")]
    Unknown { line: usize, text: String },
    #[error("line {line}: {source}")]
    Escape { line: usize, source: EscapeError },
    #[error("line {line}: {key} must be a whole number of seconds, got {value:?}")]
    BadSeconds {
        line: usize,
        key: &'static str,
        value: String,
    },
    #[error("failed to render drop-in")]
    Template(#[from] askama::Error),
}

/// The settings our drop-in holds. Ordered maps make renders deterministic, so "unchanged" can
/// be decided by comparing text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropIn {
    pub env: BTreeMap<String, String>,
    pub directives: BTreeMap<Directive, u64>,
    /// `LoadCredential=NAME:PATH`: the path is checked by [`credential_path`] before it gets
    /// here, so it is written and read back as it is.
    pub credentials: BTreeMap<String, String>,
}

#[derive(Template)]
#[template(path = "dropin.conf", escape = "none")]
struct DropInTemplate {
    environment: Vec<String>,
    directives: Vec<(&'static str, u64)>,
    credentials: Vec<(String, String)>,
}

impl DropIn {
    pub(crate) fn is_empty(&self) -> bool {
        self.env.is_empty() && self.directives.is_empty() && self.credentials.is_empty()
    }

    pub fn render(&self) -> Result<String, DropInError> {
        let environment = self
            .env
            .iter()
            .map(|(k, v)| escape::env_assignment(k, v))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| DropInError::Escape { line: 0, source })?;
        let directives = self
            .directives
            .iter()
            .map(|(d, v)| (d.name(), *v))
            .collect();
        let credentials = self
            .credentials
            .iter()
            .map(|(n, p)| (n.clone(), p.clone()))
            .collect();
        Ok(DropInTemplate {
            environment,
            directives,
            credentials,
        }
        .render()?
            + "\n")
    }

    /// Read back a drop-in we wrote. Anything else in it is an error rather than silently
    /// dropped, because the next write would lose it.
    pub fn parse(text: &str) -> Result<Self, DropInError> {
        let mut out = DropIn::default();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') || l.starts_with(';') || l == "[Service]" {
                continue;
            }
            let unknown = || DropInError::Unknown {
                line,
                text: raw.to_owned(),
            };
            let (key, value) = l.split_once('=').ok_or_else(unknown)?;
            if key == "Environment" {
                let (k, v) = escape::parse_env_assignment(value)
                    .map_err(|source| DropInError::Escape { line, source })?;
                out.env.insert(k, v);
            } else if key == "LoadCredential" {
                let (name, path) = value.split_once(':').ok_or_else(unknown)?;
                out.credentials.insert(name.to_owned(), path.to_owned());
            } else if let Some(d) = Directive::from_name(key) {
                let secs = value.parse().map_err(|_| DropInError::BadSeconds {
                    line,
                    key: d.name(),
                    value: value.to_owned(),
                })?;
                out.directives.insert(d, secs);
            } else {
                return Err(unknown());
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut d = DropIn::default();
        d.env.insert("HTTPS_PROXY".into(), "http://p:8080".into());
        d.env.insert("WEIRD".into(), r#"50% "$x" \ y"#.into());
        d.directives.insert(Directive::WatchdogSec, 60);
        d.credentials
            .insert("DC_TOKEN".into(), "/etc/hermes/dc token:1".into());
        let text = d.render().unwrap();
        assert!(text.contains("\nWatchdogSec=60\n"), "{text}");
        assert!(
            text.contains("\nLoadCredential=DC_TOKEN:/etc/hermes/dc token:1\n"),
            "{text}"
        );
        assert_eq!(DropIn::parse(&text).unwrap(), d);
    }

    #[test]
    fn credential_paths_that_would_not_read_back_are_refused() {
        assert_eq!(credential_path("/etc/hermes/dc.token"), None);
        for bad in ["dc.token", "/a/%h/t", "/a/t ", "/a/\nt"] {
            assert!(credential_path(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn foreign_lines_are_errors() {
        let err = DropIn::parse("[Service]\nNice=5\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
