//! Which service manager runs profiles here: systemd on Linux, launchd on macOS.
//!
//! One variable, `HERMES_SERVICE_MANAGER`, names it for both sides. The launchd plist sets it
//! for the gateway, which then maps its exits to what `KeepAlive` restarts; the CLI reads it
//! too, so the launchd backend runs (against a fake `launchctl`) in the Linux test suite.
//! Unset, the platform decides.

use std::fmt;

/// The variable that names the manager.
pub const SERVICE_MANAGER_ENV: &str = "HERMES_SERVICE_MANAGER";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    Systemd,
    Launchd,
}

/// `HERMES_SERVICE_MANAGER` holds a name that is not a manager.
#[derive(Debug, thiserror::Error)]
#[error(
    "{SERVICE_MANAGER_ENV}={value:?} is not a service manager; use systemd or launchd, or unset it"
)]
pub struct UnknownManager {
    pub value: String,
}

impl Manager {
    /// The platform's own manager.
    pub const NATIVE: Manager = if cfg!(target_os = "macos") {
        Manager::Launchd
    } else {
        Manager::Systemd
    };

    /// `HERMES_SERVICE_MANAGER` if set and not empty, else [`Manager::NATIVE`].
    pub fn current() -> Result<Manager, UnknownManager> {
        match std::env::var_os(SERVICE_MANAGER_ENV) {
            Some(v) if !v.is_empty() => Manager::parse(&v.to_string_lossy()),
            _ => Ok(Manager::NATIVE),
        }
    }

    pub fn parse(value: &str) -> Result<Manager, UnknownManager> {
        match value {
            "systemd" => Ok(Manager::Systemd),
            "launchd" => Ok(Manager::Launchd),
            _ => Err(UnknownManager {
                value: value.to_owned(),
            }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Manager::Systemd => "systemd",
            Manager::Launchd => "launchd",
        }
    }
}

impl fmt::Display for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for m in [Manager::Systemd, Manager::Launchd] {
            assert_eq!(Manager::parse(m.as_str()).unwrap(), m);
        }
        let err = Manager::parse("upstart").unwrap_err().to_string();
        assert!(err.contains("HERMES_SERVICE_MANAGER=\"upstart\""), "{err}");
    }
}
