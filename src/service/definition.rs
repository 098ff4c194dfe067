//! What each backend lends the planner: how its definition file (a unit, a plist) is rendered
//! and recognised, and how its settings file (a drop-in, an overrides file) is read and written.
//!
//! The rules (a pristine file is rewritten only when its body changes, an edited one is left
//! alone, a foreign one is refused) are the planner's and the same for both; only these
//! formats differ.

use std::collections::BTreeMap;
use std::path::Path;

use crate::profile::Profile;
use crate::service::settings::Directive;

/// Who wrote a definition file, judged from its provenance header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    /// Written by hermes-svc and unchanged since.
    Pristine,
    /// Written by hermes-svc, then edited by a person: never overwritten without `--force`.
    Edited,
    /// Not written by hermes-svc.
    Foreign,
}

/// An error from a backend's renderer or settings format, boxed where the planner meets it:
/// the planner passes it on and never looks inside.
pub(crate) type FormatError = Box<dyn std::error::Error + Send + Sync>;

/// A profile's job, as one manager's file describes it.
pub(crate) trait Definition {
    type Settings: SettingsFile;
    /// launchd has no drop-ins, so its plist carries the settings and is rendered again when
    /// they change; a systemd unit never does (the manager merges the drop-in itself).
    const CARRIES_SETTINGS: bool;

    fn profile(&self) -> &Profile;
    fn render(&self, settings: &Self::Settings) -> Result<String, FormatError>;
    fn provenance(text: &str) -> Provenance;
    /// Whether two files say the same apart from their provenance headers.
    fn same_body(a: &str, b: &str) -> bool;
    /// The user a system unit runs as, whose profile home install creates before the first
    /// start; `None` when the gateway creates its own.
    fn home_owner(&self) -> Option<&str> {
        None
    }
    /// What a person can do about a foreign job whose file belongs to a package and stays.
    fn package_file_hint(&self, name: &str) -> String;
}

/// Our settings file for a profile: environment variables and the directives `set` may change.
pub(crate) trait SettingsFile: Default {
    fn parse(text: &str, path: &Path) -> Result<Self, FormatError>;
    fn render(&self) -> Result<String, FormatError>;
    fn env(&mut self) -> &mut BTreeMap<String, String>;
    fn directives(&mut self) -> &mut BTreeMap<Directive, u64>;
    /// Credentials by name, each a path the manager reads the secret from; `None` where the
    /// manager has no credentials (launchd), whose install refuses them before planning.
    fn credentials(&mut self) -> Option<&mut BTreeMap<String, String>> {
        None
    }
    /// The file's mode: a drop-in is world-readable like its unit; the overrides file lives in
    /// the profile home and is its owner's alone.
    const MODE: u32;

    fn is_empty(&mut self) -> bool {
        self.env().is_empty()
            && self.directives().is_empty()
            && self.credentials().is_none_or(|c| c.is_empty())
    }
}
