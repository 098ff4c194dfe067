//! One look at the world before planning: our files on disk, the unit's state in the manager,
//! and any other unit that serves the same profile.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::profile::{Profile, ProfileName};
use crate::service::served_profile::served_profile;
use crate::systemd::dropin::DROPIN_NAME;
use crate::systemd::scope::Scope;
use crate::systemd::{Systemd, SystemdError, UnitProperties};

/// Unit names that gateway units have been given, by us and by older tools.
pub(crate) const GATEWAY_UNIT_PATTERNS: [&str; 2] = ["hermes-gateway*.service", "hermes.service"];

/// Another unit that runs a gateway for the same profile.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct ForeignUnit {
    pub(crate) name: String,
    pub(crate) fragment_path: Option<PathBuf>,
    pub(crate) active: bool,
    pub(crate) enabled: bool,
    pub(crate) failed: bool,
}

/// What is there now, as far as one profile's unit is concerned.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub(crate) unit_name: String,
    pub(crate) unit_path: PathBuf,
    pub(crate) unit_text: Option<String>,
    pub(crate) dropin_dir: PathBuf,
    pub(crate) dropin_text: Option<String>,
    /// Drop-ins in our directory that are not ours (a person's `override.conf`, ...).
    pub(crate) other_dropins: Vec<PathBuf>,
    /// Temporary files an earlier hermes-svc left behind when it was killed mid-write: ours to
    /// remove, never a person's drop-in.
    pub(crate) stale_temp_files: Vec<PathBuf>,
    /// When the unit's configuration last changed on disk: the newest of the unit file, the
    /// drop-in directory (an entry added, renamed or removed) and our drop-in.
    pub(crate) config_changed_at: Option<SystemTime>,
    /// Whether the profile's home directory exists (a system unit needs it before it starts).
    pub(crate) profile_home_exists: bool,
    /// `None` when the manager could not be asked (only allowed for `--dry-run`).
    pub(crate) unit: Option<UnitProperties>,
    pub(crate) foreign: Vec<ForeignUnit>,
}

impl Observed {
    pub(crate) fn dropin_path(&self) -> PathBuf {
        self.dropin_dir.join(DROPIN_NAME)
    }

    pub(crate) fn active(&self) -> bool {
        self.unit.as_ref().is_some_and(UnitProperties::is_active)
    }

    pub(crate) fn enabled(&self) -> bool {
        self.unit
            .as_ref()
            .and_then(|u| u.unit_file_state.as_deref())
            .is_some_and(|s| s == "enabled" || s == "enabled-runtime")
    }

    pub(crate) fn loaded(&self) -> bool {
        self.unit
            .as_ref()
            .and_then(|u| u.load_state.as_deref())
            .is_some_and(|s| s != "not-found")
    }

    pub(crate) fn needs_reload(&self) -> bool {
        self.unit
            .as_ref()
            .and_then(|u| u.need_daemon_reload)
            .unwrap_or(false)
    }

    /// The running gateway started before its unit's files last changed, so it runs older
    /// settings than the files say: what a hermes-svc killed between writing and restarting
    /// leaves behind. A rerun must restart it even though every file is already as wanted.
    pub(crate) fn running_stale(&self) -> bool {
        let Some(started) = self
            .unit
            .as_ref()
            .filter(|u| u.is_active())
            .and_then(|u| u.inactive_exit_timestamp)
            .filter(|t| *t > 0)
        else {
            return false;
        };
        let started = UNIX_EPOCH + Duration::from_micros(started);
        self.config_changed_at.is_some_and(|c| c > started)
    }
}

/// Is `name` a temporary file that `atomic_file` makes (`.NAME.tmp.PID`) for a process that is
/// gone? A live writer's file is left alone.
fn stale_temp(name: &str) -> bool {
    let Some(pid) = name
        .strip_prefix('.')
        .and_then(|n| n.rsplit_once(".tmp."))
        .and_then(|(_, pid)| pid.parse::<i32>().ok())
    else {
        return false;
    };
    pid > 0
        && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH)
}

/// The modification time of `path` itself (a link is not followed), if it exists.
fn mtime(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path).ok()?.modified().ok()
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ObserveError {
    #[error("cannot tell where {0} units live: set HOME or XDG_CONFIG_HOME")]
    NoUnitDir(Scope),
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Systemd(#[from] SystemdError),
}

fn read_optional(path: &std::path::Path) -> Result<Option<String>, ObserveError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ObserveError::Read {
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

/// Look at disk and, when given a manager, at the manager.
/// Whether to look for other units serving the same profile: only `install` needs that, and
/// it costs a scan of every unit search path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Siblings {
    Find,
    Skip,
}

pub(crate) async fn observe(
    profile: &Profile,
    scope: Scope,
    systemd: Option<&Systemd>,
    siblings: Siblings,
) -> Result<Observed, ObserveError> {
    let unit_name = profile.unit_name();
    let unit_dir = scope.unit_dir().ok_or(ObserveError::NoUnitDir(scope))?;
    let unit_path = unit_dir.join(&unit_name);
    let dropin_dir = unit_dir.join(format!("{unit_name}.d"));
    let mut other_dropins = vec![];
    let mut stale_temp_files = vec![];
    for path in std::fs::read_dir(&dropin_dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
    {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if stale_temp(&name) {
            stale_temp_files.push(path);
        } else if name != DROPIN_NAME {
            other_dropins.push(path);
        }
    }
    let unit_temp_prefix = format!(".{unit_name}.tmp.");
    stale_temp_files.extend(
        std::fs::read_dir(&unit_dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with(&unit_temp_prefix) && stale_temp(&name)
            }),
    );
    other_dropins.sort();
    stale_temp_files.sort();
    let config_changed_at = [
        mtime(&unit_path),
        mtime(&dropin_dir),
        mtime(&dropin_dir.join(DROPIN_NAME)),
    ]
    .into_iter()
    .flatten()
    .max();
    let mut observed = Observed {
        unit_text: read_optional(&unit_path)?,
        dropin_text: read_optional(&dropin_dir.join(DROPIN_NAME))?,
        unit_name,
        unit_path,
        dropin_dir,
        other_dropins,
        stale_temp_files,
        config_changed_at,
        profile_home_exists: profile.home().is_dir(),
        unit: None,
        foreign: vec![],
    };
    if let Some(systemd) = systemd {
        observed.unit = Some(systemd.properties(&observed.unit_name).await?);
        if siblings == Siblings::Find {
            observed.foreign = foreign_units(systemd, profile, &observed.unit_name).await?;
        }
    }
    Ok(observed)
}

/// Every other gateway unit, loaded or merely installed, that serves `profile`.
async fn foreign_units(
    systemd: &Systemd,
    profile: &Profile,
    ours: &str,
) -> Result<Vec<ForeignUnit>, ObserveError> {
    let mut names: Vec<String> = systemd.list_units(&GATEWAY_UNIT_PATTERNS).await?;
    names.extend(systemd.unit_files(&GATEWAY_UNIT_PATTERNS).await?);
    names.sort();
    names.dedup();
    names.retain(|n| n != ours);
    let sticky = sticky_profile(profile.hermes_home());
    let default_home =
        crate::profile::default_hermes_home().unwrap_or_else(|_| profile.hermes_home().to_owned());
    let props = systemd.properties_many(&names).await;
    let mut out = vec![];
    for (name, props) in names.into_iter().zip(props) {
        // A unit that vanished between listing and reading is simply not a conflict.
        let Ok(props) = props else { continue };
        // Nor is an alias of ours (`hermes.service` linked to it): stopping that would stop us.
        if props.id.as_deref() == Some(ours) {
            continue;
        }
        let Some(served) = served_profile(
            &props.exec_argv(),
            props.environment.as_deref().unwrap_or_default(),
            sticky.as_ref(),
        ) else {
            continue;
        };
        if served.serves(profile.name(), profile.hermes_home(), &default_home) {
            out.push(ForeignUnit {
                active: props.is_active(),
                enabled: matches!(
                    props.unit_file_state.as_deref(),
                    Some("enabled" | "enabled-runtime" | "linked" | "linked-runtime")
                ),
                failed: props.active_state.as_deref() == Some("failed"),
                fragment_path: props
                    .fragment_path
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from),
                name,
            });
        }
    }
    Ok(out)
}
