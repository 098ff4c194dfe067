//! The launchd backend (macOS): a profile's LaunchAgent plist and the `launchctl` calls that
//! load, start, stop and read it. launchd has no drop-ins, no `RestartPreventExitStatus` and no
//! watchdog, so each of those is answered here or in the gateway; see docs/macos.md.

mod definition;
pub(crate) mod effects;
pub mod launchctl;
pub(crate) mod observed;
pub mod plist;
