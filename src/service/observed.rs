//! One look at the world before planning, in terms both managers share: the definition file
//! (a unit, a plist), the settings file beside it (a drop-in, an overrides file), what the
//! manager says of the job, and any other job that serves the same profile.
//!
//! Each backend fills this in its own way (`systemd::observed`, `launchd::observed`); the
//! planner reads only this.

use std::path::PathBuf;

use crate::profile::ProfileName;
use std::time::SystemTime;

/// Another job that runs a gateway for the same profile: a legacy systemd unit, or one of
/// hermes-agent's own LaunchAgents.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct ForeignUnit {
    pub(crate) name: String,
    pub(crate) fragment_path: Option<PathBuf>,
    pub(crate) active: bool,
    pub(crate) enabled: bool,
    pub(crate) failed: bool,
}

/// What the manager says of our job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct JobView {
    /// The manager has the job (systemd: the unit is found; launchd: it is bootstrapped).
    pub(crate) loaded: bool,
    /// It will be started at boot or login (systemd: enabled; launchd: loaded, since a
    /// LaunchAgent in `~/Library/LaunchAgents` loads at every login).
    pub(crate) enabled: bool,
    /// The manager keeps its process running: systemd's active or activating; for launchd, a
    /// loaded job, which `KeepAlive` restarts whenever it is not running.
    pub(crate) active: bool,
    /// The manager still holds older files than the disk (systemd's `NeedDaemonReload`).
    pub(crate) needs_reload: bool,
    /// When the running process started, if the manager says.
    pub(crate) started_at: Option<SystemTime>,
}

/// What is there now, as far as one profile's job is concerned.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    /// The job's name in the manager: a unit name, a launchd label.
    pub(crate) name: String,
    /// The definition file and its text, if it exists.
    pub(crate) path: PathBuf,
    pub(crate) text: Option<String>,
    /// Our settings file and its text, if it exists.
    pub(crate) settings_path: PathBuf,
    pub(crate) settings_text: Option<String>,
    /// A directory of ours that holds only the settings file (systemd's `<unit>.d/`), removed
    /// on uninstall when nothing else is in it.
    pub(crate) settings_dir: Option<PathBuf>,
    /// Settings files beside ours that are a person's (a drop-in's `override.conf`, ...).
    pub(crate) other_settings: Vec<PathBuf>,
    /// Temporary files an earlier hermes-svc left behind when it was killed mid-write: ours to
    /// remove, never a person's file.
    pub(crate) stale_temp_files: Vec<PathBuf>,
    /// When the job's configuration last changed on disk.
    pub(crate) config_changed_at: Option<SystemTime>,
    /// Whether the profile's home directory exists (a system unit needs it before it starts).
    pub(crate) profile_home_exists: bool,
    /// `None` when the manager could not be asked (only allowed for `--dry-run`).
    pub(crate) job: Option<JobView>,
    pub(crate) foreign: Vec<ForeignUnit>,
}

impl Observed {
    pub(crate) fn active(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.active)
    }

    pub(crate) fn enabled(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.enabled)
    }

    pub(crate) fn loaded(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.loaded)
    }

    pub(crate) fn needs_reload(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.needs_reload)
    }

    /// The running gateway started before its files last changed, so it runs older settings
    /// than the files say: what a hermes-svc killed between writing and restarting leaves
    /// behind. A rerun must restart it even though every file is already as wanted.
    pub(crate) fn running_stale(&self) -> bool {
        let Some(started) = self
            .job
            .as_ref()
            .filter(|j| j.active)
            .and_then(|j| j.started_at)
        else {
            return false;
        };
        self.config_changed_at.is_some_and(|c| c > started)
    }
}

/// Is `name` a temporary file that `atomic_file` makes (`.NAME.tmp.PID.RANDOM`) for a process
/// that is gone? A live writer's file is left alone.
pub(crate) fn stale_temp(name: &str) -> bool {
    crate::atomic_file::temp_owner(name)
        .is_some_and(|pid| pid > 0 && !crate::process_probe::exists(pid))
}

/// The modification time of `path` itself (a link is not followed), if it exists.
pub(crate) fn mtime(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path).ok()?.modified().ok()
}

/// One of the job's files exists but could not be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to read {path}")]
pub(crate) struct ReadError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The file's text, or `None` if it does not exist.
pub(crate) fn read_optional(path: &std::path::Path) -> Result<Option<String>, ReadError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ReadError {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The legacy sticky profile file that units without `--profile` fall back to.
pub(crate) fn sticky_profile(hermes_home: &std::path::Path) -> Option<ProfileName> {
    let text = std::fs::read_to_string(hermes_home.join("active_profile")).ok()?;
    ProfileName::parse(text.trim()).ok()
}

/// Whether to look for other units serving the same profile: only `install` needs that, and
/// it costs a scan of every unit search path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Siblings {
    Find,
    Skip,
}
