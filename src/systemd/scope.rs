//! Which systemd manager a unit belongs to: the per-user manager or the system one.

use std::path::PathBuf;

/// The systemd manager that runs a profile's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    User,
    System,
}

impl Scope {
    /// Where unit files written by a person (or by us on their behalf) live.
    pub(crate) fn unit_dir(self) -> Option<PathBuf> {
        match self {
            Scope::System => Some(PathBuf::from("/etc/systemd/system")),
            Scope::User => {
                let config = std::env::var_os("XDG_CONFIG_HOME")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME")
                            .filter(|v| !v.is_empty())
                            .map(|h| PathBuf::from(h).join(".config"))
                    })?;
                Some(config.join("systemd").join("user"))
            }
        }
    }

    /// The target that pulls enabled units in at boot or login.
    pub(crate) fn wanted_by(self) -> &'static str {
        match self {
            Scope::User => "default.target",
            Scope::System => "multi-user.target",
        }
    }

    /// The flag a person passes to systemctl for this scope (for hints we print).
    pub(crate) fn systemctl_flag(self) -> &'static str {
        match self {
            Scope::User => " --user",
            Scope::System => "",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scope::User => "user",
            Scope::System => "system",
        })
    }
}
