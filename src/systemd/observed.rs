//! systemd's side of the one look before planning: the unit file and our drop-in on disk, the
//! unit's state in the manager, and any other unit that serves the same profile.

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use crate::profile::Profile;
use crate::service::observed::{
    self, mtime, stale_temp, sticky_profile, ForeignUnit, JobView, Observed, ReadError, Siblings,
};
use crate::service::role::Role;
use crate::service::served_profile::served_profile;
use crate::systemd::dropin::DROPIN_NAME;
use crate::systemd::scope::Scope;
use crate::systemd::unit_file::UnitSpec;
use crate::systemd::{Systemd, SystemdError, UnitProperties};

/// Unit names that gateway units have been given, by us and by older tools.
pub(crate) const GATEWAY_UNIT_PATTERNS: [&str; 2] = ["hermes-gateway*.service", "hermes.service"];

/// What systemd says of a unit, in the planner's terms.
fn job_view(props: &UnitProperties) -> JobView {
    JobView {
        loaded: props
            .load_state
            .as_deref()
            .is_some_and(|s| s != "not-found"),
        enabled: props
            .unit_file_state
            .as_deref()
            .is_some_and(|s| s == "enabled" || s == "enabled-runtime"),
        active: props.is_active(),
        needs_reload: props.need_daemon_reload.unwrap_or(false),
        started_at: props
            .inactive_exit_timestamp
            .filter(|t| *t > 0)
            .map(|t| UNIX_EPOCH + Duration::from_micros(t)),
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ObserveError {
    #[error("cannot tell where {0} units live: set HOME or XDG_CONFIG_HOME")]
    NoUnitDir(Scope),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Systemd(#[from] SystemdError),
}

pub(crate) async fn observe(
    unit: &UnitSpec,
    systemd: Option<&Systemd>,
    siblings: Siblings,
) -> Result<Observed, ObserveError> {
    let (profile, scope) = (&unit.profile, unit.scope);
    let unit_name = unit.unit_name();
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
    let settings_path = dropin_dir.join(DROPIN_NAME);
    let mut observed = Observed {
        text: observed::read_optional(&unit_path)?,
        settings_text: observed::read_optional(&settings_path)?,
        name: unit_name,
        path: unit_path,
        settings_path,
        settings_dir: Some(dropin_dir),
        other_settings: other_dropins,
        stale_temp_files,
        config_changed_at,
        profile_home_exists: profile.home().is_dir(),
        job: None,
        foreign: vec![],
    };
    if let Some(systemd) = systemd {
        observed.job = Some(job_view(&systemd.properties(&observed.name).await?));
        // Other gateway units serving the profile conflict with its gateway; its agent's
        // unit sits beside them by design.
        if siblings == Siblings::Find && unit.role == Role::Gateway {
            observed.foreign = foreign_units(systemd, profile, &observed.name).await?;
        }
    }
    Ok(observed)
}

/// A unit serving our profile, as the planner sees it.
pub(crate) fn foreign_unit(name: String, props: &UnitProperties) -> ForeignUnit {
    ForeignUnit {
        active: props.is_active(),
        enabled: matches!(
            props.unit_file_state.as_deref(),
            Some("enabled" | "enabled-runtime" | "linked" | "linked-runtime")
        ),
        failed: props.active_state.as_deref() == Some("failed"),
        fragment_path: props
            .fragment_path
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
        name,
    }
}

/// Every other gateway unit, loaded or merely installed, that serves `profile`.
async fn foreign_units(
    systemd: &Systemd,
    profile: &Profile,
    ours: &str,
) -> Result<Vec<ForeignUnit>, ObserveError> {
    // Whether a unit runs, its files and its enablement are all it is judged by: no fact.
    let described = systemd.describe(&GATEWAY_UNIT_PATTERNS, &[]).await?;
    let sticky = sticky_profile(profile.hermes_home());
    let default_home =
        crate::profile::default_hermes_home().unwrap_or_else(|_| profile.hermes_home().to_owned());
    let mut out = vec![];
    for (name, props) in described.into_iter().filter(|(n, _)| n != ours) {
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
            out.push(foreign_unit(name, &props));
        }
    }
    Ok(out)
}
