//! The one look at the world doctor takes per run: gateway units on the user and system
//! managers with their properties, the unit files they come from, every profile home, and
//! the Bot API's word on each Telegram token's webhook.
//!
//! All impure work happens here, so that the checks stay pure. A manager that cannot be
//! reached is recorded, not fatal: the disk can still be checked.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::bounded_read::Owner;
use crate::config;
use crate::doctor::telegram_webhook::{self, TelegramPoller};
use crate::doctor::DoctorError;
use crate::gateway::pid_file::{PidFile, PidRecord};
use crate::gateway::state_file::StateFile;
use crate::gateway::token_lock;
pub(crate) use crate::lock_holder::LockHolder;
use crate::lock_holder::LockLookup;
use crate::profile::{Profile, ProfileName};
use crate::service::observed::sticky_profile;
use crate::service::served_profile::unit_hermes_home;
use crate::systemd::linger::Linger;
use crate::systemd::observed::GATEWAY_UNIT_PATTERNS;
use crate::systemd::scope::Scope;
use crate::systemd::{Systemd, SystemdError, UnitProperties};

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
}

/// What the process a pid file names looks like now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PidProcess {
    Dead,
    /// Alive; its command line, NUL-separated arguments joined by spaces.
    // Only the Linux build makes one: macOS has no /proc to read a command line from.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Alive {
        cmdline: String,
    },
    /// Alive, but its command line can't be read on this platform (macOS has no `/proc`), so
    /// nothing is concluded from what it runs.
    // Only the macOS build makes one: Linux reads every command line it asks for from /proc.
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    AliveUnreadable,
}

/// One profile's home on disk.
#[derive(Clone, Debug)]
pub(crate) struct ProfileSnap {
    pub(crate) name: ProfileName,
    pub(crate) hermes_home: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) pid_path: PathBuf,
    pub(crate) pid: Option<(PidRecord, PidProcess)>,
    pub(crate) state: Option<StateFile>,
    pub(crate) env_path: PathBuf,
    /// Permission bits of `.env`, when it exists.
    pub(crate) env_mode: Option<u32>,
    pub(crate) config_path: PathBuf,
    /// Why `gateway.toml` does not load (the message names file and line, never a secret).
    pub(crate) config_error: Option<String>,
    /// `(adapter, short hash of its identity)` for every adapter whose credential is in `.env`.
    pub(crate) token_hashes: Vec<(String, String)>,
    /// Telegram adapters whose token is in `.env`, with whether the token has a webhook set.
    pub(crate) telegram: Vec<TelegramPoller>,
    /// `(adapter, variable)` for every adapter whose secret gateway.toml names a variable for.
    pub(crate) secret_vars: Vec<(String, String)>,
    /// The process holding the profile's instance lock: the kernel's word on which gateway
    /// serves the profile right now, whatever pid files say.
    pub(crate) lock_holder: Option<LockHolder>,
    /// The outbox's journal, for the fix of an outbox the gateway could not open.
    pub(crate) outbox_journal: PathBuf,
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

/// Everything the checks look at.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub(crate) now: SystemTime,
    pub(crate) units: Vec<UnitSnap>,
    pub(crate) profiles: Vec<ProfileSnap>,
    /// Managers, or single units, that could not be read.
    pub(crate) bus_problems: Vec<BusProblem>,
    pub(crate) linger: Linger,
    /// The account user units run as, for the linger fix.
    pub(crate) user: String,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self {
            now: SystemTime::now(),
            units: vec![],
            profiles: vec![],
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
    let main_pids = snap
        .units
        .iter()
        .filter_map(|u| u.props.main_pid)
        .filter(|pid| *pid != 0)
        .collect();
    snap.profiles = profiles_in(homes, main_pids);
    telegram_webhook::ask(&mut snap.profiles).await;
    Ok(snap)
}

/// Every profile home under `homes`, read for the profile checks. `main_pids` are the pids the
/// manager runs as services, whose instance locks need no look at the kernel's lock table.
/// Manager-neutral: the launchd doctor reads its profiles through this too.
pub(crate) fn profiles_in(
    mut homes: BTreeSet<PathBuf>,
    main_pids: BTreeSet<u32>,
) -> Vec<ProfileSnap> {
    homes.retain(|h| !h.as_os_str().is_empty());
    let locks = LockLookup::new(main_pids);
    let mut out = vec![];
    for h in homes {
        for name in crate::profile::names_in(&h) {
            if let Ok(p) = Profile::new(name, h.clone()) {
                out.push(profile_snap(&p, &locks));
            }
        }
    }
    out
}

/// Every gateway unit one manager knows of, loaded or merely installed (read from its files,
/// see [`Systemd::describe`]); and the units it listed but would not describe.
async fn units_of(
    scope: Scope,
    default_home: Option<&Path>,
) -> Result<(Vec<UnitSnap>, Vec<BusProblem>), SystemdError> {
    let systemd = Systemd::connect(scope).await?;
    let described = systemd.describe(&GATEWAY_UNIT_PATTERNS).await?;
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

#[cfg(target_os = "linux")]
fn pid_process(pid: u32) -> PidProcess {
    match crate::lock_holder::cmdline(pid) {
        Some(cmdline) => PidProcess::Alive { cmdline },
        None => PidProcess::Dead,
    }
}

#[cfg(not(target_os = "linux"))]
fn pid_process(pid: u32) -> PidProcess {
    if crate::process_probe::exists(pid) {
        PidProcess::AliveUnreadable
    } else {
        PidProcess::Dead
    }
}

fn profile_snap(p: &Profile, locks: &LockLookup) -> ProfileSnap {
    let env_path = p.env_file();
    // Bounded reads: a FIFO, a symlink to /dev/zero or a huge file must not hang doctor.
    let env_text = crate::env_file::read(&env_path, Owner::SelfRootOrDirectory)
        .ok()
        .flatten();
    let env_mode = std::fs::metadata(&env_path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777);
    let config_path = p.config_file();
    let vars = env_text
        .as_deref()
        .map(|t| crate::env_file::parse(t).0)
        .unwrap_or_default();
    let config = config::load_with(&config_path, Owner::SelfRootOrDirectory);
    let (config_error, token_hashes, telegram, secret_vars) = match config {
        Err(e) => (
            Some(redact(&crate::error_chain::one_line(&e), &vars)),
            vec![],
            vec![],
            vec![],
        ),
        Ok(cfg) => {
            let hashes = cfg
                .adapters
                .iter()
                .filter_map(|spec| {
                    let var = spec.credential_env()?;
                    let value = vars.iter().rev().find(|(k, _)| k == var)?.1.clone();
                    if value.is_empty() {
                        return None;
                    }
                    let secret = config::Secret::new(value);
                    Some((
                        spec.name.clone(),
                        token_lock::fingerprint(&spec.identity(Some(&secret))),
                    ))
                })
                .collect();
            let secret_vars = cfg
                .adapters
                .iter()
                .filter_map(|a| Some((a.name.clone(), a.credential_env()?.to_owned())))
                .collect();
            (
                None,
                hashes,
                telegram_webhook::pollers(&cfg, &vars),
                secret_vars,
            )
        }
    };
    let pid_path = p.pid_file();
    ProfileSnap {
        name: p.name().clone(),
        hermes_home: p.hermes_home().to_owned(),
        home: p.home(),
        outbox_journal: p.outbox_journal(),
        pid: PidFile::read(&pid_path).map(|r| {
            let proc = pid_process(r.pid);
            (r, proc)
        }),
        pid_path,
        state: StateFile::read(&p.state_file()),
        env_path,
        env_mode,
        config_path,
        config_error,
        token_hashes,
        telegram,
        secret_vars,
        lock_holder: locks.holder(&p.lock_file()),
    }
}

/// Hide every `.env` value in `text`. A parse error may quote a value, and a token pasted
/// into gateway.toml by mistake must not reach doctor's output through it.
pub(crate) fn redact(text: &str, vars: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (_, v) in vars {
        if v.len() >= 4 {
            out = out.replace(v.as_str(), "<redacted>");
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_are_redacted_from_messages() {
        let vars = vec![("T".to_owned(), "s3cr3t-token".to_owned())];
        assert_eq!(
            redact("invalid type: string \"s3cr3t-token\"", &vars),
            "invalid type: string \"<redacted>\""
        );
        assert_eq!(redact("line 3: unknown key", &vars), "line 3: unknown key");
    }
}
