//! The one look at the world the systemd doctor takes per run: gateway units on the user and
//! system managers with their properties and the unit files they come from, beside the
//! manager-neutral profile homes ([`Homes`]) those units and the caller run with.
//!
//! All impure work happens here, so that the checks stay pure. A manager that cannot be
//! reached is recorded, not fatal: the disk can still be checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::doctor::homes::{Homes, ServiceSnap};
use crate::doctor::DoctorError;
use crate::profile::ProfileName;
use crate::service::observed::sticky_profile;
use crate::service::served_profile::{served_profile, unit_hermes_home, ServedProfile};
use crate::systemd::linger::Linger;
use crate::systemd::observed::GATEWAY_UNIT_PATTERNS;
use crate::systemd::scope::Scope;
use crate::systemd::{Fact, Systemd, SystemdError, UnitProperties};

/// A gateway unit as one manager reports it.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnitSnap {
    pub(crate) name: String,
    pub(crate) scope: Option<Scope>,
    pub(crate) props: UnitProperties,
    /// The text of the unit's fragment file, when it could be read.
    pub(crate) file_text: Option<String>,
    /// `HERMES_HOME` the unit runs with (its `Environment=`, else the default home).
    pub(crate) hermes_home: PathBuf,
    /// The sticky `active_profile` in that home, which a unit without `--profile` follows.
    pub(crate) sticky: Option<ProfileName>,
    /// `ExecStart` programs that do not exist on disk.
    pub(crate) missing_exec: Vec<String>,
    /// When the unit's files last changed: its fragment, its drop-ins, and their directories
    /// (a drop-in added or removed).
    pub(crate) config_changed_at: Option<std::time::SystemTime>,
}

impl UnitSnap {
    /// How a finding refers to this unit: the same name may exist in both scopes.
    pub(crate) fn key(&self) -> (Option<Scope>, String) {
        (self.scope, self.name.clone())
    }

    /// What the unit's `ExecStart`, `HERMES_HOME` and sticky file say about the profile it
    /// serves; `None` when it runs no gateway.
    pub(crate) fn served(&self) -> Option<ServedProfile> {
        served_profile(
            &self.props.exec_argv(),
            self.props.environment.as_deref().unwrap_or_default(),
            self.sticky.as_ref(),
        )
    }

    /// The unit as the profile-home checks see it. A unit built without a scope (by hand, in
    /// tests) is a user unit, the common case.
    pub(crate) fn as_service(&self) -> ServiceSnap {
        ServiceSnap {
            name: self.name.clone(),
            serves: self.served().and_then(|s| s.profile),
            hermes_home: self.hermes_home.clone(),
            scope: self.scope.unwrap_or(Scope::User),
            active: self.props.is_active(),
            pid: self.props.main_pid.filter(|pid| *pid != 0),
        }
    }
}

/// A manager that could not be asked, or a unit it listed but would not describe. Its checks
/// are skipped, and saying so beats a silently partial report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BusProblem {
    pub(crate) scope: Scope,
    /// The unit, when the manager answered but not about this unit.
    pub(crate) unit: Option<String>,
    pub(crate) why: String,
    /// The manager (or a bus policy) refused, rather than not being there.
    pub(crate) denied: bool,
}

impl BusProblem {
    fn new(scope: Scope, unit: Option<String>, e: &SystemdError) -> Self {
        Self {
            scope,
            unit,
            why: crate::error_chain::one_line(e),
            denied: matches!(e, SystemdError::AccessDenied { .. }),
        }
    }
}

/// Everything the systemd checks look at: the units, and the profile homes beside them.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// The profile homes and the units seen as services: all the manager-neutral checks read.
    pub(crate) homes: Homes,
    pub(crate) units: Vec<UnitSnap>,
    /// Managers, or single units, that could not be read.
    pub(crate) bus_problems: Vec<BusProblem>,
    pub(crate) linger: Linger,
    /// The account user units run as, for the linger fix.
    pub(crate) user: String,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self {
            homes: Homes::default(),
            units: vec![],
            bus_problems: vec![],
            linger: Linger::Unknown,
            user: "user".into(),
        }
    }
}

/// Take the snapshot. Fails only when neither a manager nor a profile home can be looked at.
pub(crate) async fn gather() -> Result<Snapshot, DoctorError> {
    let home = crate::profile::hermes_home_from_env();
    let default_home = crate::profile::default_hermes_home()
        .ok()
        .or_else(|| home.as_ref().ok().cloned());
    let (user, system, linger) = tokio::join!(
        units_of(Scope::User, default_home.as_deref()),
        units_of(Scope::System, default_home.as_deref()),
        Linger::query(nix::unistd::getuid().as_raw())
    );
    let mut snap = Snapshot {
        linger,
        user: crate::systemd::linger::current_user(),
        ..Snapshot::default()
    };
    for (scope, result) in [(Scope::User, user), (Scope::System, system)] {
        match result {
            Ok((units, problems)) => {
                snap.units.extend(units);
                snap.bus_problems.extend(problems);
            }
            Err(e) => snap.bus_problems.push(BusProblem::new(scope, None, &e)),
        }
    }
    let mut homes: BTreeSet<PathBuf> = snap.units.iter().map(|u| u.hermes_home.clone()).collect();
    // With no manager to ask and no home to read, a clean report would claim a check that
    // never happened.
    let no_manager = snap
        .bus_problems
        .iter()
        .filter(|b| b.unit.is_none())
        .count()
        == 2;
    let nothing = |home: String| DoctorError::NothingToCheck {
        bus: snap.bus_problems[0].why.clone(),
        home,
    };
    match &home {
        Ok(h) if no_manager && !h.is_dir() => {
            return Err(nothing(format!("{} does not exist", h.display())))
        }
        Ok(h) => {
            homes.insert(h.clone());
        }
        Err(e) if no_manager => return Err(nothing(e.to_string())),
        Err(_) => {}
    }
    let services = snap.units.iter().map(UnitSnap::as_service).collect();
    snap.homes = Homes::gather(homes, services).await;
    Ok(snap)
}

/// Every gateway unit one manager knows of, loaded or merely installed (read from its files,
/// see [`Systemd::describe`]); and the units it listed but would not describe.
async fn units_of(
    scope: Scope,
    default_home: Option<&Path>,
) -> Result<(Vec<UnitSnap>, Vec<BusProblem>), SystemdError> {
    let systemd = Systemd::connect(scope).await?;
    let described = systemd.describe(&GATEWAY_UNIT_PATTERNS, &Fact::ALL).await?;
    let (mut out, mut unreadable) = (vec![], vec![]);
    let mut seen = BTreeSet::new();
    for (name, props) in described {
        let props = match props {
            // A unit that vanished between listing and reading has nothing left to diagnose.
            Err(SystemdError::NoSuchUnit { .. }) => continue,
            Err(e) => {
                unreadable.push(BusProblem::new(scope, Some(name), &e));
                continue;
            }
            Ok(p) if p.load_state.as_deref() == Some("not-found") => continue,
            Ok(p) => p,
        };
        // An alias (a symlink such as `hermes.service` to our unit) is the same unit under
        // another name: keep it once, under the name systemd calls it by.
        let name = props.id.clone().filter(|id| !id.is_empty()).unwrap_or(name);
        if !seen.insert(name.clone()) {
            continue;
        }
        let hermes_home = unit_hermes_home(props.environment.as_deref().unwrap_or_default())
            .or_else(|| default_home.map(Path::to_owned))
            .unwrap_or_default();
        let file_text = props
            .fragment_path
            .as_deref()
            .filter(|p| !p.is_empty())
            .and_then(|p| std::fs::read_to_string(p).ok());
        let missing_exec = props
            .exec_start
            .iter()
            .flatten()
            .map(|c| c.0.clone())
            .filter(|p| !Path::new(p).exists())
            .collect();
        let config_changed_at = config_changed_at(&props);
        out.push(UnitSnap {
            config_changed_at,
            sticky: sticky_profile(&hermes_home),
            name,
            scope: Some(scope),
            props,
            file_text,
            hermes_home,
            missing_exec,
        });
    }
    Ok((out, unreadable))
}

/// The newest modification time among a unit's fragment, its drop-ins and their
/// directories. Links are not followed: it is the unit's own files that changed or not.
fn config_changed_at(props: &UnitProperties) -> Option<std::time::SystemTime> {
    let fragment = props.fragment_path.iter().filter(|p| !p.is_empty());
    let dropins = props.drop_in_paths.iter().flatten();
    let mut paths: Vec<PathBuf> = fragment.chain(dropins).map(PathBuf::from).collect();
    let dirs: Vec<PathBuf> = props
        .drop_in_paths
        .iter()
        .flatten()
        .filter_map(|p| Path::new(p).parent().map(Path::to_owned))
        .collect();
    paths.extend(dirs);
    paths
        .iter()
        .filter_map(|p| std::fs::symlink_metadata(p).ok()?.modified().ok())
        .max()
}
