//! The systemd unit file and drop-in in the planner's terms (`service::definition`): the unit
//! never carries settings, since systemd merges the drop-in itself.

use std::collections::BTreeMap;
use std::path::Path;

use crate::profile::Profile;
use crate::service::definition::{Definition, FormatError, Provenance, SettingsFile};
use crate::service::settings::Directive;
use crate::systemd::dropin::DropIn;
use crate::systemd::unit_file::{self, UnitSpec};

impl Definition for UnitSpec {
    type Settings = DropIn;
    const CARRIES_SETTINGS: bool = false;

    fn profile(&self) -> &Profile {
        &self.profile
    }

    fn render(&self, _: &DropIn) -> Result<String, FormatError> {
        Ok(UnitSpec::render(self)?)
    }

    fn provenance(text: &str) -> Provenance {
        unit_file::provenance(text)
    }

    fn same_body(a: &str, b: &str) -> bool {
        unit_file::body(a) == unit_file::body(b)
    }

    fn home_owner(&self) -> Option<&str> {
        self.run_as.as_deref()
    }

    fn package_file_hint(&self, name: &str) -> String {
        format!(
            "mask it with `systemctl{} mask {name}` if it comes back",
            self.scope.systemctl_flag()
        )
    }
}

impl SettingsFile for DropIn {
    const MODE: u32 = 0o644;

    fn parse(text: &str, _: &Path) -> Result<Self, FormatError> {
        Ok(DropIn::parse(text)?)
    }

    fn render(&self) -> Result<String, FormatError> {
        Ok(DropIn::render(self)?)
    }

    fn env(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.env
    }

    fn directives(&mut self) -> &mut BTreeMap<Directive, u64> {
        &mut self.directives
    }

    fn credentials(&mut self) -> Option<&mut BTreeMap<String, String>> {
        Some(&mut self.credentials)
    }
}
