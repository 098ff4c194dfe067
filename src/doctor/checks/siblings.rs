//! Findings about units that serve the same profile as one of ours, or serve it the legacy
//! way (`--replace`, no `--profile`): the SIGTERM flap loop and its causes. Their fix is
//! install's own migration of the unit that is not ours.

use std::path::PathBuf;

use crate::doctor::checks::{
    install_args, is_ours, profile_of, rewrite_fix, scope_of, unit_finding, Check,
};
use crate::doctor::fix::{Action, Planner};
use crate::doctor::snapshot::{Snapshot, UnitSnap};
use crate::doctor::{Finding, Severity};
use crate::profile::{profile_of_unit, Profile, ProfileName, DEFAULT_PROFILE};
use crate::service::definition::Provenance;
use crate::service::observed::Observed;
use crate::service::plan::Step;
use crate::service::planner::{plan_install, InstallRequest};
use crate::service::served_profile::same_home;
use crate::service::settings::Settings;
use crate::systemd::dropin::DROPIN_NAME;
use crate::systemd::observed::foreign_unit;
use crate::systemd::unit_file::{provenance, UnitSpec};

/// HSV001: two or more units serve the same profile; each one's gateway fights the others.
pub(super) const DUPLICATE_UNITS: Check = Check {
    id: "HSV001",
    find: duplicate_units,
    fix: fix_duplicate_units,
};

fn duplicate_units(s: &Snapshot) -> Vec<Finding> {
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
                id: DUPLICATE_UNITS.id,
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

/// Every unit but ours is migrated; ours is what remains.
fn fix_duplicate_units(p: &mut Planner, f: &Finding) {
    migrate_legacy(p, f);
}

/// HSV002: `--replace` makes a starting gateway kill whoever holds the profile: with two
/// units that is the SIGTERM flap loop.
pub(super) const REPLACE: Check = Check {
    id: "HSV002",
    find: replace,
    fix: fix_definition,
};

fn replace(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.served().is_some_and(|sp| sp.replace))
        .map(|u| {
            unit_finding(
                REPLACE.id,
                Severity::Error,
                u,
                "ExecStart runs the gateway with --replace, which kills any other gateway of the profile on start.".into(),
                rewrite_fix(u),
            )
        })
        .collect()
}

/// HSV003: without `--profile` the unit serves whatever `active_profile` says today.
pub(super) const NO_PROFILE: Check = Check {
    id: "HSV003",
    find: no_profile,
    fix: fix_definition,
};

fn no_profile(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.served().is_some_and(|sp| !sp.explicit))
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
            unit_finding(NO_PROFILE.id, severity, u, message, rewrite_fix(u))
        })
        .collect()
}

/// HSV033: a unit under our name whose file hermes-svc did not write, running Hermes's own
/// gateway. A
/// named profile's Hermes unit has our unit's very name and path, so `hermes gateway
/// install`, `start` or `restart`, run after a switch to hermes-svc, write Hermes's unit over
/// ours, and its gateway polls with the profile's tokens in the gateway's home
/// (docs/adopt.md, "After the switch").
pub(super) const NOT_OURS_AT_OUR_NAME: Check = Check {
    id: "HSV033",
    find: not_ours_at_our_name,
    fix: |p, f| {
        p.skip(
            f,
            "our unit must be written again over the other program's, and doctor never edits a unit file",
        )
    },
};

fn not_ours_at_our_name(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| is_ours(u) && u.served().is_some() && runs_hermes_own_gateway(u))
        .filter(|u| {
            u.file_text
                .as_deref()
                .is_some_and(|t| provenance(t) == Provenance::Foreign)
        })
        .map(|u| {
            let profile = profile_of(u).map_or_else(|| "NAME".to_owned(), |p| p.to_string());
            unit_finding(
                NOT_OURS_AT_OUR_NAME.id,
                Severity::Error,
                u,
                format!("{} has hermes-svc's name but runs Hermes's own gateway from a file Hermes wrote (`hermes gateway install`, `start` and `restart` write a named profile's unit under this very name), so it polls with the profile's tokens in the gateway's home.", u.name),
                format!("hermes-svc install {} --migrate", install_args(u, &profile)),
            )
        })
        .collect()
}

/// Whether `u` runs Hermes's own gateway: its installer's `python -m hermes_cli.main ...
/// gateway run`, or the `hermes` program itself.
fn runs_hermes_own_gateway(u: &UnitSnap) -> bool {
    u.props.exec_argv().iter().any(|argv| {
        argv.iter().any(|w| w == "hermes_cli.main")
            || argv
                .first()
                .and_then(|a| std::path::Path::new(a).file_name())
                .is_some_and(|n| n == "hermes")
    })
}

/// A unit that is not ours is migrated; ours is install's to rewrite.
fn fix_definition(p: &mut Planner, f: &Finding) {
    if !migrate_legacy(p, f) {
        p.skip(
            f,
            "the unit has our unit's name, and doctor never edits a unit file; install backs it up and rewrites it",
        );
    }
}

/// Plan the migration of every unit `f` names that is not ours, each once however many
/// findings name it. False when `f` names only units of ours.
fn migrate_legacy(p: &mut Planner, f: &Finding) -> bool {
    let all = p.units;
    let units: Vec<&UnitSnap> = all.iter().filter(|u| f.units.contains(&u.key())).collect();
    let mut legacy = false;
    for u in units.iter().filter(|u| !is_ours(u)) {
        legacy = true;
        if !p.first_migration_of(u.key()) {
            continue;
        }
        let profile = profile_of(u)
            .unwrap_or_else(|| ProfileName::parse(DEFAULT_PROFILE).expect("default is valid"));
        match migrate_steps(u, &profile, p.now) {
            Some(steps) => {
                p.reload(scope_of(u), f.id);
                let successor = all
                    .iter()
                    .find(|o| {
                        rendered_by_us(o)
                            && scope_of(o) == scope_of(u)
                            && profile_of(o).as_ref() == Some(&profile)
                    })
                    .map(|o| o.name.clone());
                p.fix(
                    f,
                    u.name.clone(),
                    Action::Migrate {
                        scope: scope_of(u),
                        unit: u.name.clone(),
                        profile,
                        steps,
                        successor,
                    },
                );
            }
            None => p.skip(f, format!("cannot plan a migration of {}", u.name)),
        }
    }
    legacy
}

/// One of our units in fact, not only in name: its file carries our header (a person may
/// have written a file at our unit's path).
fn rendered_by_us(u: &UnitSnap) -> bool {
    is_ours(u)
        && u.file_text
            .as_deref()
            .is_some_and(|t| provenance(t) != Provenance::Foreign)
}

/// Install's own migrate steps for one legacy unit: plan an install of `profile` with
/// `--migrate` over a world where `u` is the only other unit, and keep only the steps about
/// `u` (stop, disable, move aside, reset-failed). Ours is not written: that is install's job.
fn migrate_steps(u: &UnitSnap, profile: &ProfileName, now: u64) -> Option<Vec<Step>> {
    let scope = scope_of(u);
    let p = Profile::new(profile.clone(), u.hermes_home.clone()).ok()?;
    let foreign = foreign_unit(u.name.clone(), &u.props);
    let ours = p.unit_name();
    let observed = Observed {
        path: PathBuf::from(&ours),
        settings_path: PathBuf::from(format!("{ours}.d/{DROPIN_NAME}")),
        settings_dir: Some(PathBuf::from(format!("{ours}.d"))),
        name: ours,
        text: None,
        settings_text: None,
        other_settings: vec![],
        stale_temp_files: vec![],
        config_changed_at: None,
        profile_home_exists: true,
        job: None,
        foreign: vec![foreign.clone()],
    };
    let req = InstallRequest {
        spec: UnitSpec {
            profile: p,
            scope,
            exec: PathBuf::from("/usr/bin/hermes-svc"),
            run_as: None,
            role: crate::service::role::Role::Gateway,
        },
        settings: Settings::default(),
        start: false,
        force: false,
        migrate: true,
        now,
    };
    let plan = plan_install(&req, &observed).ok()?;
    let steps: Vec<Step> = plan
        .steps
        .into_iter()
        .filter(|s| match s {
            Step::Stop { unit } | Step::Disable { unit } | Step::ResetFailed { unit } => {
                *unit == foreign.name
            }
            Step::MoveAside { from, .. } => Some(from) == foreign.fragment_path.as_ref(),
            _ => false,
        })
        .collect();
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::doctor::checks::{all, plan};
    use crate::systemd::scope::Scope;

    #[test]
    fn hsv001_two_units_one_profile() {
        let mut l = legacy();
        l.sticky = Some(ProfileName::parse("a").unwrap());
        let f = duplicate_units(&snap(vec![ours("a"), l.clone()], vec![]));
        assert_eq!(ids(&f), [("HSV001", Severity::Error)]);
        assert!(f[0].message.contains("hermes-gateway.service"));
        assert_eq!(f[0].fix, "hermes-svc install --profile a --migrate");
        // Near miss: the legacy unit serves another profile.
        l.sticky = Some(ProfileName::parse("b").unwrap());
        assert!(duplicate_units(&snap(vec![ours("a"), l], vec![])).is_empty());
    }

    #[test]
    fn hsv002_replace_is_found() {
        assert_eq!(
            ids(&replace(&snap(vec![legacy()], vec![]))),
            [("HSV002", Severity::Error)]
        );
        assert!(replace(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv003_no_profile_is_worse_with_a_sticky_file() {
        let mut l = legacy();
        assert_eq!(
            ids(&no_profile(&snap(vec![l.clone()], vec![]))),
            [("HSV003", Severity::Warn)]
        );
        l.sticky = Some(ProfileName::parse("a").unwrap());
        let f = no_profile(&snap(vec![l], vec![]));
        assert_eq!(ids(&f), [("HSV003", Severity::Error)]);
        assert_eq!(f[0].profile.as_ref().unwrap().as_str(), "a");
        assert!(no_profile(&snap(vec![ours("a")], vec![])).is_empty());
    }

    fn legacy_on_disk() -> UnitSnap {
        let mut l = legacy();
        l.props.fragment_path = Some("/home/u/.config/systemd/user/hermes-gateway.service".into());
        l.props.unit_file_state = Some("enabled".into());
        l.sticky = Some(ProfileName::parse("a").unwrap());
        l
    }

    #[test]
    fn a_legacy_unit_is_migrated_once_with_installs_steps() {
        let s = snap(vec![ours("a"), legacy_on_disk()], vec![]);
        let fs = all(&s);
        for id in ["HSV001", "HSV002", "HSV003"] {
            assert!(fs.iter().any(|f| f.id == id), "{id}: {fs:?}");
        }
        let p = plan(&s, &fs, 1000);
        assert_eq!(fix_ids(&p), [("HSV001", "migrate"), ("HSV001", "reload")]);
        let Action::Migrate {
            unit,
            steps,
            profile,
            ..
        } = &p.fixes[0].action
        else {
            unreachable!()
        };
        assert_eq!(unit, "hermes-gateway.service");
        assert_eq!(profile.as_str(), "a");
        let path = PathBuf::from("/home/u/.config/systemd/user/hermes-gateway.service");
        assert_eq!(
            steps,
            &[
                Step::Stop { unit: unit.clone() },
                Step::Disable { unit: unit.clone() },
                Step::MoveAside {
                    from: path.clone(),
                    to: path.with_file_name("hermes-gateway.service.migrated.1000"),
                },
                Step::ResetFailed { unit: unit.clone() },
            ]
        );
        // Ours already serves the profile: nothing more to run.
        let said = p.fixes[0].action.to_string();
        assert!(
            said.ends_with("hermes-gateway-a.service keeps serving profile a"),
            "{said}"
        );
    }

    #[test]
    fn a_lone_legacy_unit_is_migrated_for_hsv002_and_hsv003() {
        let mut l = legacy_on_disk();
        l.sticky = None;
        let s = snap(vec![l], vec![]);
        let fs = all(&s);
        assert!(!fs.iter().any(|f| f.id == "HSV001"), "{fs:?}");
        let p = plan(&s, &fs, 7);
        assert_eq!(fix_ids(&p), [("HSV002", "migrate"), ("HSV002", "reload")]);
        let Action::Migrate { profile, .. } = &p.fixes[0].action else {
            unreachable!()
        };
        assert_eq!(profile.as_str(), "default");
        // Nothing of ours serves it yet: the person is told to install it.
        let said = p.fixes[0].action.to_string();
        assert!(
            said.ends_with("now run: hermes-svc install --profile default --migrate"),
            "{said}"
        );
        // HSV003 on the same unit is answered by the same migration, not a second one.
        assert!(!p.skipped.iter().any(|k| k.id == "HSV003"), "{p:?}");
    }

    #[test]
    fn one_legacy_name_in_both_scopes_is_migrated_in_each() {
        let user = legacy_on_disk();
        let mut system = legacy_on_disk();
        system.scope = Some(Scope::System);
        system.sticky = Some(ProfileName::parse("b").unwrap());
        system.props.fragment_path = Some("/etc/systemd/system/hermes-gateway.service".into());
        let p = planned(&snap(vec![user, system], vec![]));
        let migrations: Vec<_> = p
            .fixes
            .iter()
            .filter_map(|f| match &f.action {
                Action::Migrate { scope, profile, .. } => Some((*scope, profile.to_string())),
                _ => None,
            })
            .collect();
        assert_eq!(
            migrations,
            [(Scope::User, "a".into()), (Scope::System, "b".into())],
            "{p:?}"
        );
    }

    #[test]
    fn a_persons_file_at_our_units_path_is_never_a_target() {
        // Hand-written hermes-gateway-a.service with --replace: reported, not touched.
        let mut mine = unit(
            "hermes-gateway-a.service",
            "/usr/bin/hermes gateway run --profile a --replace",
        );
        mine.file_text =
            Some("[Service]\nExecStart=/usr/bin/hermes gateway run --profile a --replace\n".into());
        mine.props.need_daemon_reload = Some(false);
        let s = snap(vec![mine], vec![]);
        let fs = all(&s);
        assert!(fs.iter().any(|f| f.id == "HSV002"), "{fs:?}");
        let p = plan(&s, &fs, 1000);
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p
            .skipped
            .iter()
            .any(|k| k.id == "HSV002" && k.manual.starts_with("hermes-svc install")));
        // No fix ever writes, moves or removes one of our units' files.
        let s = snap(vec![ours("a"), legacy_on_disk()], vec![]);
        for f in plan(&s, &all(&s), 1).fixes {
            if let Action::Migrate { unit, steps, .. } = f.action {
                assert!(crate::profile::profile_of_unit(&unit).is_none());
                assert!(steps
                    .iter()
                    .all(|st| !st.to_string().contains("hermes-gateway-a")));
            }
        }
    }
}
