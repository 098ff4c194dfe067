//! The LaunchAgent plist and its overrides file in the planner's terms
//! (`service::definition`): launchd has no drop-ins, so the plist carries the settings and is
//! rendered again whenever they change.

use std::collections::BTreeMap;
use std::path::Path;

use crate::launchd::plist::{self, LaunchAgent, Overrides};
use crate::profile::Profile;
use crate::service::definition::{Definition, FormatError, Provenance, SettingsFile};
use crate::service::settings::Directive;

impl Definition for LaunchAgent {
    type Settings = Overrides;
    const CARRIES_SETTINGS: bool = true;

    fn profile(&self) -> &Profile {
        &self.profile
    }

    fn render(&self, overrides: &Overrides) -> Result<String, FormatError> {
        let mut agent = self.clone();
        overrides.apply(&mut agent);
        Ok(agent.render()?)
    }

    fn provenance(text: &str) -> Provenance {
        plist::provenance(text)
    }

    fn same_body(a: &str, b: &str) -> bool {
        plist::body(a) == plist::body(b)
    }

    fn package_file_hint(&self, name: &str) -> String {
        format!("`launchctl disable {name}` keeps it from loading")
    }
}

impl SettingsFile for Overrides {
    const MODE: u32 = 0o600;

    fn parse(text: &str, path: &Path) -> Result<Self, FormatError> {
        Ok(Overrides::parse(text, path)?)
    }

    fn render(&self) -> Result<String, FormatError> {
        Ok(Overrides::render(self))
    }

    fn env(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.env
    }

    fn directives(&mut self) -> &mut BTreeMap<Directive, u64> {
        &mut self.directives
    }
}
