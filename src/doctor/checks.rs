//! The checks: one pure function per finding id, over a [`Snapshot`].
//!
//! None of them touches the bus or the disk, so each is tested here with a hand-built
//! snapshot: one case that produces the finding and one near miss that must not.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::doctor::snapshot::{PidProcess, ProfileSnap, Snapshot, UnitSnap};
use crate::doctor::{Finding, Severity};
use crate::linger::Linger;
use crate::profile::{profile_of_unit, ProfileName};
use crate::scope::Scope;
use crate::served_profile::{same_home, served_profile, ServedProfile};
use crate::unit_file::{provenance, Provenance};

/// A restart count at or above this, in one unit's lifetime, is a flap loop worth a look.
pub const FLAP_RESTARTS: u32 = 3;

/// Every check, in id order.
pub fn all(s: &Snapshot) -> Vec<Finding> {
    let checks: [fn(&Snapshot) -> Vec<Finding>; 18] = [
        hsv000_bus,
        hsv001_duplicate_units,
        hsv002_replace,
        hsv003_no_profile,
        hsv004_restart,
        hsv005_watchdog,
        hsv006_shared_token,
        hsv007_pid_file,
        hsv008_failed,
        hsv009_edited,
        hsv010_reload,
        hsv011_linger,
        hsv012_env_mode,
        hsv013_deaf,
        hsv014_exec_missing,
        hsv015_config,
        hsv016_unmanaged_gateway,
        hsv017_stale_settings,
    ];
    checks.iter().flat_map(|c| c(s)).collect()
}

fn served(u: &UnitSnap) -> Option<ServedProfile> {
    served_profile(
        &u.props.exec_argv(),
        u.props.environment.as_deref().unwrap_or_default(),
        u.sticky.as_ref(),
    )
}

/// The profile a unit serves, judged from its `ExecStart`, `HERMES_HOME` and sticky file.
pub fn profile_of(u: &UnitSnap) -> Option<ProfileName> {
    served(u).and_then(|s| s.profile)
}

/// Whether the unit carries our name (`hermes-gateway-<profile>.service`), so that its file
/// is install's to rewrite and never a migration target.
pub fn is_ours(u: &UnitSnap) -> bool {
    profile_of_unit(&u.name).is_some()
}

fn flag(u: &UnitSnap) -> &'static str {
    u.scope.unwrap_or(Scope::User).systemctl_flag()
}

/// `install` arguments that recreate the unit for `profile` in the unit's scope.
fn install_args(u: &UnitSnap, profile: &str) -> String {
    match u.scope {
        Some(Scope::System) => format!("--profile {profile} --system --run-as <user>"),
        _ => format!("--profile {profile}"),
    }
}

/// The fix for a unit whose definition is wrong: rewrite ours, or migrate away from a unit
/// that is not ours (install backs it up and replaces it with one of ours).
fn rewrite_fix(u: &UnitSnap) -> String {
    let profile = profile_of(u)
        .map(|p| p.to_string())
        .unwrap_or_else(|| "NAME".into());
    if profile_of_unit(&u.name).is_some() {
        format!("hermes-svc install {} --force", install_args(u, &profile))
    } else {
        format!("hermes-svc install {} --migrate", install_args(u, &profile))
    }
}

fn unit_finding(
    id: &'static str,
    severity: Severity,
    u: &UnitSnap,
    message: String,
    fix: String,
) -> Finding {
    Finding {
        id,
        severity,
        subject: u.name.clone(),
        message,
        fix,
        profile: profile_of(u),
        units: vec![u.key()],
    }
}

fn profile_finding(
    id: &'static str,
    severity: Severity,
    p: &ProfileSnap,
    message: String,
    fix: String,
) -> Finding {
    Finding {
        id,
        severity,
        subject: p.name.to_string(),
        message,
        fix,
        profile: Some(p.name.clone()),
        units: vec![],
    }
}

/// HSV000: a manager, or a unit of it, could not be read, so its checks were skipped.
pub fn hsv000_bus(s: &Snapshot) -> Vec<Finding> {
    s.bus_problems
        .iter()
        .map(|b| {
            let scope = b.scope;
            let fix = match (scope, b.denied) {
                (Scope::System, true) => "sudo hermes-svc doctor".into(),
                (Scope::User, true) => "grep -rl systemd1 /etc/dbus-1/session.d /usr/share/dbus-1/session.d   # find the policy that denies it".into(),
                (Scope::User, false) => "export XDG_RUNTIME_DIR=/run/user/$(id -u) DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$(id -u)/bus".into(),
                // Nothing to fix: many machines (containers, user-only setups) have no system
                // manager, and they need none.
                (Scope::System, false) => {
                    "none needed unless you run system units; then check `systemctl is-system-running`".into()
                }
            };
            match &b.unit {
                None => Finding {
                    id: "HSV000",
                    // The system bus is optional (containers, user-only setups); the user bus
                    // is not.
                    severity: match scope {
                        Scope::User => Severity::Warn,
                        Scope::System => Severity::Info,
                    },
                    subject: format!("{scope} bus"),
                    message: format!("{}; {scope} units were not checked.", b.why),
                    fix,
                    profile: None,
                    units: vec![],
                },
                Some(unit) => Finding {
                    id: "HSV000",
                    severity: Severity::Warn,
                    subject: unit.clone(),
                    message: format!("{}; the unit was not checked.", b.why),
                    fix,
                    profile: profile_of_unit(unit),
                    units: vec![(Some(scope), unit.clone())],
                },
            }
        })
        .collect()
}

/// HSV001: two or more units serve the same profile; each one's gateway fights the others.
pub fn hsv001_duplicate_units(s: &Snapshot) -> Vec<Finding> {
    let mut groups: Vec<(ProfileName, PathBuf, Vec<&UnitSnap>)> = vec![];
    for u in &s.units {
        let Some(p) = profile_of(u) else { continue };
        match groups
            .iter_mut()
            .find(|(gp, gh, _)| *gp == p && same_home(gh, &u.hermes_home))
        {
            Some(g) => g.2.push(u),
            None => groups.push((p, u.hermes_home.clone(), vec![u])),
        }
    }
    groups
        .into_iter()
        .filter(|g| g.2.len() > 1)
        .map(|(p, _, units)| {
            let names: Vec<_> = units.iter().map(|u| u.name.as_str()).collect();
            let ours = units
                .iter()
                .find(|u| profile_of_unit(&u.name).is_some())
                .unwrap_or(&units[0]);
            Finding {
                id: "HSV001",
                severity: Severity::Error,
                subject: p.to_string(),
                message: format!(
                    "{} units serve profile {p} ({}), so their gateways fight over it.",
                    names.len(),
                    names.join(", ")
                ),
                fix: format!(
                    "hermes-svc install {} --migrate",
                    install_args(ours, p.as_str())
                ),
                profile: Some(p),
                units: units.iter().map(|u| u.key()).collect(),
            }
        })
        .collect()
}

/// HSV002: `--replace` makes a starting gateway kill whoever holds the profile: with two
/// units that is the SIGTERM flap loop.
pub fn hsv002_replace(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| served(u).is_some_and(|sp| sp.replace))
        .map(|u| {
            unit_finding(
                "HSV002",
                Severity::Error,
                u,
                "ExecStart runs the gateway with --replace, which kills any other gateway of the profile on start.".into(),
                rewrite_fix(u),
            )
        })
        .collect()
}

/// HSV003: without `--profile` the unit serves whatever `active_profile` says today.
pub fn hsv003_no_profile(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| served(u).is_some_and(|sp| !sp.explicit))
        .map(|u| {
            let (severity, message) = match &u.sticky {
                Some(p) => (
                    Severity::Error,
                    format!("ExecStart has no --profile, so it follows the sticky active_profile file (now {p}) and changes profile when that file does."),
                ),
                None => (
                    Severity::Warn,
                    "ExecStart has no --profile, so it serves the default profile only until someone writes an active_profile file.".into(),
                ),
            };
            unit_finding("HSV003", severity, u, message, rewrite_fix(u))
        })
        .collect()
}

/// HSV004: anything but `Restart=always` leaves a gateway that exited cleanly (75) down.
pub fn hsv004_restart(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| served(u).is_some())
        .filter_map(|u| {
            let r = u.props.restart.as_deref()?;
            (r != "always").then(|| {
                unit_finding(
                    "HSV004",
                    Severity::Warn,
                    u,
                    format!(
                        "Restart={r}, so a gateway that exits asking for a restart stays down."
                    ),
                    rewrite_fix(u),
                )
            })
        })
        .collect()
}

/// HSV005: without `Type=notify` and a watchdog, a wedged gateway is never restarted.
pub fn hsv005_watchdog(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| served(u).is_some())
        .filter_map(|u| {
            let ty = u.props.service_type.as_deref()?;
            let wd = u.props.watchdog_usec.unwrap_or(0);
            (ty != "notify" || wd == 0).then(|| {
                unit_finding(
                    "HSV005",
                    Severity::Warn,
                    u,
                    format!("Type={ty} with WatchdogSec={}s, so systemd cannot tell a wedged gateway from a healthy one.", wd / 1_000_000),
                    rewrite_fix(u),
                )
            })
        })
        .collect()
}

/// HSV006: two profiles with one bot token: the second gateway cannot take the token lock.
/// Only the short hash is shown; the token never is.
pub fn hsv006_shared_token(s: &Snapshot) -> Vec<Finding> {
    let mut by_hash: BTreeMap<&str, Vec<(&ProfileSnap, &str)>> = BTreeMap::new();
    for p in &s.profiles {
        for (adapter, hash) in &p.token_hashes {
            by_hash.entry(hash).or_default().push((p, adapter));
        }
    }
    let mut out = vec![];
    for (hash, users) in by_hash {
        for (p, adapter) in &users {
            let others: Vec<String> = users
                .iter()
                .filter(|(o, _)| o.name != p.name || !same_home(&o.hermes_home, &p.hermes_home))
                .map(|(o, _)| o.name.to_string())
                .collect();
            if others.is_empty() {
                continue;
            }
            out.push(profile_finding(
                "HSV006",
                Severity::Error,
                p,
                format!(
                    "adapter {adapter} uses the same bot credential (hash {hash}) as profile {}, so only one gateway can connect.",
                    others.join(", ")
                ),
                format!("${{EDITOR:-vi}} {}", p.env_path.display()),
            ));
        }
    }
    out
}

/// HSV007: a pid file that is stale, names a foreign process, or lies in one profile's home
/// while its process serves another (the field's PID misrouting).
pub fn hsv007_pid_file(s: &Snapshot) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some((rec, proc)) = &p.pid else { continue };
        let rm = format!("rm {}", p.pid_path.display());
        let owner = s
            .units
            .iter()
            .find(|u| u.props.main_pid.is_some_and(|m| m != 0 && m == rec.pid));
        let finding = match proc {
            PidProcess::Dead => Some((
                Severity::Warn,
                format!("gateway.pid names pid {}, which is not running.", rec.pid),
            )),
            PidProcess::Alive { .. }
                if rec.profile != p.name.as_str() || !same_home(&rec.home, &p.home) =>
            {
                Some((
                    Severity::Error,
                    format!(
                        "gateway.pid in this profile's home names pid {} of profile {} ({}).",
                        rec.pid,
                        rec.profile,
                        rec.home.display()
                    ),
                ))
            }
            PidProcess::Alive { .. } => match owner.and_then(|u| Some((u, profile_of(u)?))) {
                Some((u, served)) if served != p.name => Some((
                    Severity::Error,
                    format!(
                        "gateway.pid names pid {}, which is {} serving profile {served}.",
                        rec.pid, u.name
                    ),
                )),
                Some(_) => None,
                None => match proc {
                    PidProcess::Alive { cmdline } if !cmdline.contains("gateway") => Some((
                        Severity::Warn,
                        format!(
                            "gateway.pid names pid {}, a process that is not a gateway.",
                            rec.pid
                        ),
                    )),
                    _ => None,
                },
            },
        };
        if let Some((severity, message)) = finding {
            out.push(profile_finding("HSV007", severity, p, message, rm));
        }
    }
    out
}

/// HSV008: failed, start limit hit, or restarting over and over.
pub fn hsv008_failed(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter_map(|u| {
            let restarts = u.props.n_restarts.unwrap_or(0);
            let failed = u.props.active_state.as_deref() == Some("failed");
            let limit = u.props.result.as_deref() == Some("start-limit-hit");
            let f = flag(u);
            let (severity, message, fix) = if failed || limit {
                let why = if limit {
                    "hit its start limit".to_owned()
                } else {
                    format!(
                        "failed (result {})",
                        u.props.result.as_deref().unwrap_or("unknown")
                    )
                };
                (
                    Severity::Error,
                    format!("The unit {why} and will not be started again on its own."),
                    format!(
                        "systemctl{f} reset-failed {n} && systemctl{f} restart {n}",
                        n = u.name
                    ),
                )
            } else if restarts >= FLAP_RESTARTS {
                (
                    Severity::Warn,
                    format!("The unit has restarted {restarts} times, a sign of a flap loop."),
                    format!("journalctl{f} -u {} -n 100", u.name),
                )
            } else {
                return None;
            };
            Some(unit_finding("HSV008", severity, u, message, fix))
        })
        .collect()
}

/// HSV009: our unit edited by hand. Not wrong, but install leaves it alone, so it no longer
/// gets fixes; a drop-in keeps both.
pub fn hsv009_edited(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| {
            u.file_text
                .as_deref()
                .is_some_and(|t| provenance(t) == Provenance::Edited)
        })
        .map(|u| {
            unit_finding(
                "HSV009",
                Severity::Info,
                u,
                "The unit file was edited by hand, so install will not update it; move the change into a drop-in and rewrite it with install --force.".into(),
                format!("systemctl{} edit {}", flag(u), u.name),
            )
        })
        .collect()
}

/// HSV010: the file on disk is not what the manager runs.
pub fn hsv010_reload(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.props.need_daemon_reload == Some(true))
        .map(|u| {
            unit_finding(
                "HSV010",
                Severity::Warn,
                u,
                "The unit file changed on disk since the manager last read it.".into(),
                format!("systemctl{} daemon-reload", flag(u)),
            )
        })
        .collect()
}

/// HSV017: the running gateway started before its unit's files last changed, and the manager
/// has read them (else HSV010 says so): it runs older settings than its unit says, which is
/// what a `set` or `install` killed between reload and restart leaves behind.
pub fn hsv017_stale_settings(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.props.is_active() && u.props.need_daemon_reload != Some(true))
        .filter_map(|u| {
            let started = u.props.inactive_exit_timestamp.filter(|t| *t > 0)?;
            let started = std::time::UNIX_EPOCH + std::time::Duration::from_micros(started);
            let changed = u.config_changed_at?;
            let behind = changed.duration_since(started).ok()?;
            Some(unit_finding(
                "HSV017",
                Severity::Warn,
                u,
                format!(
                    "The gateway runs older settings than its unit: the unit's files changed {} after it started.",
                    crate::gateway::health::short(behind)
                ),
                format!("systemctl{} restart {}", flag(u), u.name),
            ))
        })
        .collect()
}

/// HSV011: without linger, user units stop at logout and do not start at boot.
pub fn hsv011_linger(s: &Snapshot) -> Vec<Finding> {
    let has_user_units = s.units.iter().any(|u| u.scope == Some(Scope::User));
    if s.linger != Linger::Off || !has_user_units {
        return vec![];
    }
    vec![Finding {
        id: "HSV011",
        severity: Severity::Warn,
        subject: s.user.clone(),
        message: "Linger is off, so user units stop at logout and do not start at boot.".into(),
        fix: format!("loginctl enable-linger {}", s.user),
        profile: None,
        units: vec![],
    }]
}

/// HSV012: `.env` holds the bot's secrets and must be readable by its owner only.
pub fn hsv012_env_mode(s: &Snapshot) -> Vec<Finding> {
    s.profiles
        .iter()
        .filter_map(|p| {
            let mode = p.env_mode?;
            (mode & 0o077 != 0).then(|| {
                profile_finding(
                    "HSV012",
                    Severity::Warn,
                    p,
                    format!(
                        "{} has mode {mode:04o}, so other accounts can read the bot's secrets.",
                        p.env_path.display()
                    ),
                    format!("chmod 600 {}", p.env_path.display()),
                )
            })
        })
        .collect()
}

/// HSV013: deaf but alive: systemd says active, but the gateway's own health snapshot is
/// stale or an adapter has gone stale.
pub fn hsv013_deaf(s: &Snapshot) -> Vec<Finding> {
    let mut out = vec![];
    for u in &s.units {
        if u.props.active_state.as_deref() != Some("active") {
            continue;
        }
        let Some(name) = profile_of(u) else { continue };
        let Some(p) = s
            .profiles
            .iter()
            .find(|p| p.name == name && same_home(&p.hermes_home, &u.hermes_home))
        else {
            continue;
        };
        let Some(state) = &p.state else { continue };
        let stale: Vec<&str> = state
            .components
            .iter()
            .filter(|c| !c.fresh)
            .map(|c| c.name.as_str())
            .collect();
        let message = if state.is_stale(s.now) {
            format!(
                "The unit is active but the gateway's health snapshot was last written at {}.",
                state.updated_at
            )
        } else if !stale.is_empty() {
            format!(
                "The unit is active but these components are stale: {}.",
                stale.join(", ")
            )
        } else {
            continue;
        };
        out.push(unit_finding(
            "HSV013",
            Severity::Error,
            u,
            message,
            format!("systemctl{} restart {}", flag(u), u.name),
        ));
    }
    out
}

/// HSV014: the program ExecStart runs is gone (a moved or uninstalled binary).
pub fn hsv014_exec_missing(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| !u.missing_exec.is_empty())
        .map(|u| {
            unit_finding(
                "HSV014",
                Severity::Error,
                u,
                format!(
                    "ExecStart runs {}, which does not exist.",
                    u.missing_exec.join(", ")
                ),
                rewrite_fix(u),
            )
        })
        .collect()
}

/// HSV015: a gateway.toml that does not load makes the gateway exit 78 at every start.
pub fn hsv015_config(s: &Snapshot) -> Vec<Finding> {
    s.profiles
        .iter()
        .filter_map(|p| {
            let e = p.config_error.as_deref()?;
            Some(profile_finding(
                "HSV015",
                Severity::Error,
                p,
                format!("gateway.toml does not load: {e}."),
                format!("${{EDITOR:-vi}} {}", p.config_path.display()),
            ))
        })
        .collect()
}

/// HSV016: a process holds the profile's instance lock, but no gateway unit doctor looked at
/// runs it: a gateway started by hand, or by a service outside the `hermes-gateway*` names.
/// Ours cannot start while it does (and, exiting 78, stays down).
pub fn hsv016_unmanaged_gateway(s: &Snapshot) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some(h) = &p.lock_holder else { continue };
        if h.unit
            .as_ref()
            .is_some_and(|n| s.units.iter().any(|u| &u.name == n))
        {
            continue;
        }
        let ours = s.units.iter().find(|u| {
            is_ours(u)
                && profile_of(u).as_ref() == Some(&p.name)
                && same_home(&u.hermes_home, &p.hermes_home)
        });
        let runner = match &h.unit {
            Some(unit) => format!("the service {unit}"),
            None => "no service (it was started by hand)".to_owned(),
        };
        let what = if h.cmdline.is_empty() {
            String::new()
        } else {
            format!(" ({})", h.cmdline)
        };
        let (severity, consequence, fix) = match ours {
            Some(u) => (
                Severity::Error,
                format!(", so {} cannot start", u.name),
                format!("kill {} && systemctl{} restart {}", h.pid, flag(u), u.name),
            ),
            None => (
                Severity::Warn,
                String::new(),
                format!("kill {} && hermes-svc install --profile {}", h.pid, p.name),
            ),
        };
        out.push(profile_finding(
            "HSV016",
            severity,
            p,
            format!(
                "PID {}{what} holds this profile and is run by {runner}{consequence}.",
                h.pid
            ),
            fix,
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::doctor::snapshot::BusProblem;
    use crate::gateway::pid_file::PidRecord;
    use crate::gateway::state_file::{ComponentState, StateFile};
    use crate::systemd::UnitProperties;
    use std::time::{Duration, SystemTime};

    const HOME: &str = "/nonexistent-doctor/.hermes";

    pub(crate) fn unit(name: &str, exec: &str) -> UnitSnap {
        let exec_start = vec![(
            exec.split(' ').next().unwrap().to_owned(),
            exec.split(' ').map(str::to_owned).collect(),
            false,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        )];
        UnitSnap {
            name: name.into(),
            scope: Some(Scope::User),
            props: UnitProperties {
                id: Some(name.into()),
                active_state: Some("active".into()),
                restart: Some("always".into()),
                service_type: Some("notify".into()),
                watchdog_usec: Some(30_000_000),
                n_restarts: Some(0),
                result: Some("success".into()),
                need_daemon_reload: Some(false),
                main_pid: Some(4242),
                environment: Some(vec![format!("HERMES_HOME={HOME}")]),
                exec_start: Some(exec_start),
                ..UnitProperties::default()
            },
            hermes_home: HOME.into(),
            ..UnitSnap::default()
        }
    }

    /// Our unit for `p`, as install renders it.
    pub(crate) fn ours(p: &str) -> UnitSnap {
        let mut u = unit(
            &format!("hermes-gateway-{p}.service"),
            &format!("/usr/bin/hermes-svc gateway run --profile {p}"),
        );
        u.file_text = Some(rendered(p));
        u
    }

    pub(crate) fn legacy() -> UnitSnap {
        unit(
            "hermes-gateway.service",
            "/usr/bin/hermes gateway run --replace",
        )
    }

    pub(crate) fn profile(name: &str) -> ProfileSnap {
        let home = PathBuf::from(HOME).join("profiles").join(name);
        ProfileSnap {
            name: ProfileName::parse(name).unwrap(),
            hermes_home: HOME.into(),
            pid_path: home.join("gateway.pid"),
            pid: None,
            state: None,
            env_path: home.join(".env"),
            env_mode: Some(0o600),
            config_path: home.join("gateway.toml"),
            config_error: None,
            token_hashes: vec![],
            lock_holder: None,
            home,
        }
    }

    pub(crate) fn snap(units: Vec<UnitSnap>, profiles: Vec<ProfileSnap>) -> Snapshot {
        Snapshot {
            units,
            profiles,
            ..Snapshot::default()
        }
    }

    fn ids(f: &[Finding]) -> Vec<(&str, Severity)> {
        f.iter().map(|f| (f.id, f.severity)).collect()
    }

    #[test]
    fn clean_snapshot_has_no_findings() {
        let s = snap(vec![ours("a"), ours("b")], vec![profile("a"), profile("b")]);
        assert_eq!(all(&s), vec![]);
    }

    #[test]
    fn hsv000_bus_problem_is_reported() {
        let mut s = snap(vec![], vec![]);
        assert!(hsv000_bus(&s).is_empty());
        s.bus_problems.push(BusProblem {
            scope: Scope::User,
            unit: None,
            why: "no bus".into(),
            denied: false,
        });
        assert_eq!(ids(&hsv000_bus(&s)), [("HSV000", Severity::Warn)]);
        assert!(hsv000_bus(&s)[0].fix.starts_with("export XDG_RUNTIME_DIR="));
        // A unit the manager would not describe: named, with the policy to look at.
        s.bus_problems = vec![BusProblem {
            scope: Scope::User,
            unit: Some("hermes-gateway-a.service".into()),
            why: "systemd on the user bus denied read properties".into(),
            denied: true,
        }];
        let f = hsv000_bus(&s);
        assert_eq!(ids(&f), [("HSV000", Severity::Warn)]);
        assert_eq!(f[0].subject, "hermes-gateway-a.service");
        assert_eq!(f[0].profile.as_ref().map(|p| p.as_str()), Some("a"));
        assert!(f[0].fix.contains("/etc/dbus-1/session.d"), "{f:?}");
    }

    #[test]
    fn hsv001_two_units_one_profile() {
        let mut l = legacy();
        l.sticky = Some(ProfileName::parse("a").unwrap());
        let f = hsv001_duplicate_units(&snap(vec![ours("a"), l.clone()], vec![]));
        assert_eq!(ids(&f), [("HSV001", Severity::Error)]);
        assert!(f[0].message.contains("hermes-gateway.service"));
        assert_eq!(f[0].fix, "hermes-svc install --profile a --migrate");
        // Near miss: the legacy unit serves another profile.
        l.sticky = Some(ProfileName::parse("b").unwrap());
        assert!(hsv001_duplicate_units(&snap(vec![ours("a"), l], vec![])).is_empty());
    }

    #[test]
    fn hsv002_replace_is_found() {
        assert_eq!(
            ids(&hsv002_replace(&snap(vec![legacy()], vec![]))),
            [("HSV002", Severity::Error)]
        );
        assert!(hsv002_replace(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv003_no_profile_is_worse_with_a_sticky_file() {
        let mut l = legacy();
        assert_eq!(
            ids(&hsv003_no_profile(&snap(vec![l.clone()], vec![]))),
            [("HSV003", Severity::Warn)]
        );
        l.sticky = Some(ProfileName::parse("a").unwrap());
        let f = hsv003_no_profile(&snap(vec![l], vec![]));
        assert_eq!(ids(&f), [("HSV003", Severity::Error)]);
        assert_eq!(f[0].profile.as_ref().unwrap().as_str(), "a");
        assert!(hsv003_no_profile(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv004_restart_not_always() {
        let mut u = ours("a");
        u.props.restart = Some("on-failure".into());
        let f = hsv004_restart(&snap(vec![u], vec![]));
        assert_eq!(ids(&f), [("HSV004", Severity::Warn)]);
        assert_eq!(f[0].fix, "hermes-svc install --profile a --force");
        assert!(hsv004_restart(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv005_no_watchdog() {
        let mut u = ours("a");
        u.props.watchdog_usec = Some(0);
        assert_eq!(
            ids(&hsv005_watchdog(&snap(vec![u], vec![]))),
            [("HSV005", Severity::Warn)]
        );
        let mut u = ours("a");
        u.props.service_type = Some("simple".into());
        assert_eq!(hsv005_watchdog(&snap(vec![u], vec![])).len(), 1);
        assert!(hsv005_watchdog(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv006_shared_token_shows_only_the_hash() {
        let mut a = profile("a");
        let mut b = profile("b");
        a.token_hashes = vec![("qq".into(), "abcdef012345".into())];
        b.token_hashes = vec![("qq".into(), "abcdef012345".into())];
        let f = hsv006_shared_token(&snap(vec![], vec![a.clone(), b.clone()]));
        assert_eq!(
            ids(&f),
            [("HSV006", Severity::Error), ("HSV006", Severity::Error)]
        );
        assert!(f[0].message.contains("abcdef012345") && f[0].message.contains("profile b"));
        b.token_hashes = vec![("qq".into(), "999999999999".into())];
        assert!(hsv006_shared_token(&snap(vec![], vec![a, b])).is_empty());
    }

    pub(crate) fn pid_record(p: &ProfileSnap, pid: u32, profile: &str) -> PidRecord {
        PidRecord {
            pid,
            profile: profile.into(),
            home: p.home.clone(),
            started_at: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn hsv007_pid_file_stale_foreign_or_misrouted() {
        let alive = PidProcess::Alive {
            cmdline: "/usr/bin/hermes-svc gateway run --profile a".into(),
        };
        let mut a = profile("a");
        // Healthy: the unit's MainPID and the record agree.
        a.pid = Some((pid_record(&a, 4242, "a"), alive.clone()));
        assert!(hsv007_pid_file(&snap(vec![ours("a")], vec![a.clone()])).is_empty());
        // Dead.
        a.pid = Some((pid_record(&a, 4242, "a"), PidProcess::Dead));
        assert_eq!(
            ids(&hsv007_pid_file(&snap(vec![], vec![a.clone()]))),
            [("HSV007", Severity::Warn)]
        );
        // Foreign process.
        a.pid = Some((
            pid_record(&a, 77, "a"),
            PidProcess::Alive {
                cmdline: "sleep 100".into(),
            },
        ));
        assert_eq!(
            ids(&hsv007_pid_file(&snap(vec![], vec![a.clone()]))),
            [("HSV007", Severity::Warn)]
        );
        // Lies in a's home, but the process is b's unit.
        a.pid = Some((pid_record(&a, 4242, "a"), alive.clone()));
        let f = hsv007_pid_file(&snap(vec![ours("b")], vec![a.clone()]));
        assert_eq!(ids(&f), [("HSV007", Severity::Error)]);
        assert!(f[0].message.contains("profile b"));
        // The record itself names another profile.
        a.pid = Some((pid_record(&a, 4242, "b"), alive));
        assert_eq!(
            ids(&hsv007_pid_file(&snap(vec![], vec![a]))),
            [("HSV007", Severity::Error)]
        );
    }

    #[test]
    fn hsv008_failed_limit_or_flapping() {
        let mut u = ours("a");
        u.props.active_state = Some("failed".into());
        u.props.result = Some("exit-code".into());
        assert_eq!(
            ids(&hsv008_failed(&snap(vec![u], vec![]))),
            [("HSV008", Severity::Error)]
        );
        let mut u = ours("a");
        u.props.n_restarts = Some(FLAP_RESTARTS);
        assert_eq!(
            ids(&hsv008_failed(&snap(vec![u], vec![]))),
            [("HSV008", Severity::Warn)]
        );
        let mut u = ours("a");
        u.props.n_restarts = Some(FLAP_RESTARTS - 1);
        assert!(hsv008_failed(&snap(vec![u], vec![])).is_empty());
    }

    pub(crate) fn rendered(p: &str) -> String {
        crate::unit_file::UnitSpec {
            profile: crate::profile::Profile::new(ProfileName::parse(p).unwrap(), HOME.into())
                .unwrap(),
            scope: Scope::User,
            exec: "/usr/bin/hermes-svc".into(),
            run_as: None,
        }
        .render()
        .unwrap()
    }

    #[test]
    fn hsv009_edited_by_hand() {
        let mut u = ours("a");
        u.file_text = Some(rendered("a"));
        assert!(hsv009_edited(&snap(vec![u.clone()], vec![])).is_empty());
        u.file_text = Some(rendered("a").replace("RestartSec=5", "RestartSec=9"));
        let f = hsv009_edited(&snap(vec![u], vec![]));
        assert_eq!(ids(&f), [("HSV009", Severity::Info)]);
        assert_eq!(f[0].fix, "systemctl --user edit hermes-gateway-a.service");
    }

    #[test]
    fn hsv010_need_daemon_reload() {
        let mut u = ours("a");
        assert!(hsv010_reload(&snap(vec![u.clone()], vec![])).is_empty());
        u.props.need_daemon_reload = Some(true);
        assert_eq!(
            ids(&hsv010_reload(&snap(vec![u], vec![]))),
            [("HSV010", Severity::Warn)]
        );
    }

    #[test]
    fn hsv011_linger_off_with_user_units() {
        let mut s = snap(vec![ours("a")], vec![]);
        s.linger = Linger::Off;
        s.user = "bot".into();
        let f = hsv011_linger(&s);
        assert_eq!(ids(&f), [("HSV011", Severity::Warn)]);
        assert_eq!(f[0].fix, "loginctl enable-linger bot");
        s.linger = Linger::Unknown;
        assert!(hsv011_linger(&s).is_empty());
    }

    #[test]
    fn hsv012_env_readable_by_others() {
        let mut p = profile("a");
        assert!(hsv012_env_mode(&snap(vec![], vec![p.clone()])).is_empty());
        p.env_mode = Some(0o640);
        let f = hsv012_env_mode(&snap(vec![], vec![p]));
        assert_eq!(ids(&f), [("HSV012", Severity::Warn)]);
        assert!(f[0].fix.starts_with("chmod 600 "));
    }

    fn state(updated: SystemTime, fresh: bool) -> StateFile {
        StateFile {
            updated_at: humantime::format_rfc3339_millis(updated).to_string(),
            pid: 4242,
            profile: "a".into(),
            stale_after_ms: 10_000,
            summary: "ok".into(),
            components: vec![ComponentState {
                name: "qq".into(),
                kind: "qqbot".into(),
                state: "connected".into(),
                fresh,
                last_beat_age_ms: 0,
                deadline_ms: 0,
                reconnects: 0,
                attempts: 0,
                last_error: None,
                outage_ms: None,
            }],
        }
    }

    #[test]
    fn hsv013_deaf_but_alive() {
        let now = SystemTime::now();
        let mut p = profile("a");
        p.state = Some(state(now, true));
        let mut s = snap(vec![ours("a")], vec![p.clone()]);
        s.now = now;
        assert!(hsv013_deaf(&s).is_empty());
        s.profiles[0].state = Some(state(now - Duration::from_secs(60), true));
        assert_eq!(ids(&hsv013_deaf(&s)), [("HSV013", Severity::Error)]);
        s.profiles[0].state = Some(state(now, false));
        assert!(hsv013_deaf(&s)[0].message.contains("qq"));
        // Near miss: an inactive unit's old snapshot says nothing.
        s.units[0].props.active_state = Some("inactive".into());
        assert!(hsv013_deaf(&s).is_empty());
    }

    #[test]
    fn hsv014_missing_binary_is_found() {
        let mut u = ours("a");
        assert!(hsv014_exec_missing(&snap(vec![u.clone()], vec![])).is_empty());
        u.missing_exec = vec!["/usr/bin/hermes-svc".into()];
        assert_eq!(
            ids(&hsv014_exec_missing(&snap(vec![u], vec![]))),
            [("HSV014", Severity::Error)]
        );
    }

    #[test]
    fn hsv015_invalid_config() {
        let mut p = profile("a");
        assert!(hsv015_config(&snap(vec![], vec![p.clone()])).is_empty());
        p.config_error = Some("gateway.toml:3: unknown key".into());
        assert_eq!(
            ids(&hsv015_config(&snap(vec![], vec![p]))),
            [("HSV015", Severity::Error)]
        );
    }

    #[test]
    fn hsv016_a_gateway_no_unit_runs() {
        use crate::doctor::snapshot::LockHolder;
        let mut a = profile("a");
        let mut ours_a = ours("a");
        ours_a.props.active_state = Some("failed".into());
        a.lock_holder = Some(LockHolder {
            pid: 4242,
            cmdline: "hermes-svc gateway run --profile a".into(),
            unit: None,
        });
        let f = hsv016_unmanaged_gateway(&snap(vec![ours_a.clone()], vec![a.clone()]));
        assert_eq!(ids(&f), [("HSV016", Severity::Error)]);
        assert!(f[0].message.contains("started by hand"), "{f:?}");
        assert_eq!(
            f[0].fix,
            "kill 4242 && systemctl --user restart hermes-gateway-a.service"
        );
        // Without a unit of ours it is only a warning, and the fix installs one.
        let f = hsv016_unmanaged_gateway(&snap(vec![], vec![a.clone()]));
        assert_eq!(ids(&f), [("HSV016", Severity::Warn)]);
        assert_eq!(f[0].fix, "kill 4242 && hermes-svc install --profile a");
        // A service outside our names runs it: named.
        a.lock_holder.as_mut().unwrap().unit = Some("mybot.service".into());
        let f = hsv016_unmanaged_gateway(&snap(vec![ours_a.clone()], vec![a.clone()]));
        assert!(f[0].message.contains("the service mybot.service"), "{f:?}");
        // Near miss: the holder is in our unit's cgroup.
        a.lock_holder.as_mut().unwrap().unit = Some("hermes-gateway-a.service".into());
        assert!(hsv016_unmanaged_gateway(&snap(vec![ours("a")], vec![a])).is_empty());
    }
}
