//! The settings `install --env`, `set` and `unset` change, whichever manager keeps them: the
//! environment and the few directives both managers can express (systemd as unit directives,
//! launchd as `ThrottleInterval` and the gateway's self-watchdog).

use std::fmt;

/// The service directives `set` may change, besides environment variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Directive {
    WatchdogSec,
    RestartSec,
}

impl Directive {
    pub(crate) const ALL: [Directive; 2] = [Directive::WatchdogSec, Directive::RestartSec];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Directive::WatchdogSec => "WatchdogSec",
            Directive::RestartSec => "RestartSec",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for Directive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The most seconds `WatchdogSec` and `RestartSec` may be set to. systemd silently ignores
/// values past what its microsecond clock holds; a day is far beyond any useful setting.
pub(crate) const MAX_SECONDS: u64 = 24 * 60 * 60;

/// Settings asked for on the command line, destined for the settings file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub(crate) env: Vec<(String, String)>,
    pub(crate) directives: Vec<(Directive, u64)>,
    /// `(NAME, PATH)`: secrets the manager loads from PATH and hands the gateway as the
    /// credential NAME (systemd's `LoadCredential=`; launchd has no such thing).
    pub(crate) credentials: Vec<(String, String)>,
}
