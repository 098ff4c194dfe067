//! `doctor --fix`: which findings get a safe, reversible fix, planned purely from the
//! snapshot and its findings, then carried out.
//!
//! The plan ([`plan`]) decides; [`apply`] only does what it says. Unit work reuses install's
//! planning (`plan_install` with `migrate`, keeping only the steps about the legacy unit) and
//! `effects::apply`, so a legacy unit is migrated by `doctor --fix` exactly as by
//! `install --migrate`. Nothing here kills a process (a unit is stopped through its manager),
//! edits a unit file, or touches a file it did not re-check just before.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde::Serialize;

use crate::doctor::checks::{is_ours, profile_of};
use crate::doctor::snapshot::{PidProcess, Snapshot, UnitSnap};
use crate::doctor::{Finding, Severity};
use crate::gateway::pid_file::PidFile;
use crate::install::{plan_install, InstallRequest, Settings};
use crate::observed::{ForeignUnit, Observed};
use crate::plan::{Plan, Step};
use crate::profile::{Profile, ProfileName, DEFAULT_PROFILE};
use crate::scope::Scope;
use crate::unit_file::{provenance, Provenance, UnitSpec};

/// One change `--fix` makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `Manager.Reload()` on one manager.
    Reload { scope: Scope },
    /// Remove a pid file whose process is dead (re-checked just before).
    RemovePidFile { path: PathBuf, pid: u32 },
    /// `chmod 600` a `.env`.
    ChmodEnv { path: PathBuf },
    /// Stop, disable and move aside a unit that is not ours (install's migrate steps).
    Migrate {
        scope: Scope,
        unit: String,
        profile: ProfileName,
        steps: Vec<Step>,
        /// Our unit for the profile in that scope, when there is one to carry on; otherwise
        /// the person is told to install it.
        successor: Option<String>,
    },
    /// `Manager.ResetFailedUnit()` on one of our units.
    ResetFailed { scope: Scope, unit: String },
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Reload { scope } => {
                write!(f, "systemctl{} daemon-reload", scope.systemctl_flag())
            }
            Action::RemovePidFile { path, pid } => {
                write!(f, "rm {} (pid {pid} is not running)", path.display())
            }
            Action::ChmodEnv { path } => write!(f, "chmod 600 {}", path.display()),
            Action::Migrate {
                scope,
                unit,
                profile,
                steps,
                successor,
            } => {
                let done: Vec<String> = steps.iter().map(ToString::to_string).collect();
                write!(f, "migrated {unit} ({}); ", done.join("; "))?;
                match successor {
                    Some(ours) => write!(f, "{ours} keeps serving profile {profile}"),
                    None => write!(
                        f,
                        "now run: hermes-svc install --profile {profile}{} --migrate",
                        match scope {
                            Scope::System => " --system --run-as <user>",
                            Scope::User => "",
                        }
                    ),
                }
            }
            Action::ResetFailed { scope, unit } => {
                write!(f, "systemctl{} reset-failed {unit}", scope.systemctl_flag())
            }
        }
    }
}

/// A fix, with the finding it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fix {
    pub id: &'static str,
    pub subject: String,
    pub action: Action,
}

/// A finding `--fix` leaves alone, with why and what to run by hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub id: &'static str,
    pub subject: String,
    pub why: String,
    pub manual: String,
}

/// What `--fix` will do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixPlan {
    pub fixes: Vec<Fix>,
    pub skipped: Vec<Skipped>,
}

/// One applied fix, as `--json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Fixed {
    pub id: &'static str,
    pub subject: String,
    pub action: String,
}

fn skip(f: &Finding, why: impl Into<String>) -> Skipped {
    Skipped {
        id: f.id,
        subject: f.subject.clone(),
        why: why.into(),
        manual: f.fix.clone(),
    }
}

/// One of our units in fact, not only in name: its file carries our header (a person may
/// have written a file at our unit's path).
fn rendered_by_us(u: &UnitSnap) -> bool {
    is_ours(u)
        && u.file_text
            .as_deref()
            .is_some_and(|t| provenance(t) != Provenance::Foreign)
}

fn scope_of(u: &UnitSnap) -> Scope {
    u.scope.unwrap_or(Scope::User)
}

/// Install's own migrate steps for one legacy unit: plan an install of `profile` with
/// `--migrate` over a world where `u` is the only other unit, and keep only the steps about
/// `u` (stop, disable, move aside, reset-failed). Ours is not written: that is install's job.
pub fn migrate_steps(u: &UnitSnap, profile: &ProfileName, now: u64) -> Option<Vec<Step>> {
    let scope = scope_of(u);
    let p = Profile::new(profile.clone(), u.hermes_home.clone()).ok()?;
    let foreign = ForeignUnit {
        name: u.name.clone(),
        fragment_path: u
            .props
            .fragment_path
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
        active: u.props.is_active(),
        enabled: matches!(
            u.props.unit_file_state.as_deref(),
            Some("enabled" | "enabled-runtime" | "linked" | "linked-runtime")
        ),
        failed: u.props.active_state.as_deref() == Some("failed"),
    };
    let ours = p.unit_name();
    let observed = Observed {
        unit_path: PathBuf::from(&ours),
        dropin_dir: PathBuf::from(format!("{ours}.d")),
        unit_name: ours,
        unit_text: None,
        dropin_text: None,
        other_dropins: vec![],
        stale_temp_files: vec![],
        config_changed_at: None,
        profile_home_exists: true,
        unit: None,
        foreign: vec![foreign.clone()],
    };
    let req = InstallRequest {
        spec: UnitSpec {
            profile: p,
            scope,
            exec: PathBuf::from("/usr/bin/hermes-svc"),
            run_as: None,
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

/// Decide, for every finding, the fix or why there is none. Pure: reads only `s` and
/// `findings`; `now` names backups.
pub fn plan(s: &Snapshot, findings: &[Finding], now: u64) -> FixPlan {
    let mut out = FixPlan::default();
    let mut reloads: Vec<Scope> = vec![];
    let mut migrated: Vec<(Option<Scope>, String)> = vec![];
    let mut reset: BTreeSet<String> = BTreeSet::new();
    let mut files: BTreeSet<PathBuf> = BTreeSet::new();
    for f in findings {
        match f.id {
            "HSV010" => match s.units.iter().find(|u| f.units.contains(&u.key())) {
                Some(u) => {
                    if !reloads.contains(&scope_of(u)) {
                        reloads.push(scope_of(u));
                        out.fixes.push(Fix {
                            id: f.id,
                            subject: f.subject.clone(),
                            action: Action::Reload { scope: scope_of(u) },
                        });
                    }
                }
                None => out.skipped.push(skip(f, "the unit is no longer listed")),
            },
            "HSV007" => {
                let mut any = false;
                for p in s.profiles.iter().filter(|p| p.name.as_str() == f.subject) {
                    match &p.pid {
                        Some((rec, PidProcess::Dead)) => {
                            any = true;
                            if files.insert(p.pid_path.clone()) {
                                out.fixes.push(Fix {
                                    id: f.id,
                                    subject: f.subject.clone(),
                                    action: Action::RemovePidFile {
                                        path: p.pid_path.clone(),
                                        pid: rec.pid,
                                    },
                                });
                            }
                        }
                        Some((_, PidProcess::Alive { .. })) => out.skipped.push(skip(
                            f,
                            "the process it names is alive; doctor never removes a live pid file or kills a process it cannot prove belongs to the profile",
                        )),
                        None => {}
                    }
                }
                if !any
                    && !out
                        .skipped
                        .iter()
                        .any(|k| k.id == f.id && k.subject == f.subject)
                {
                    out.skipped
                        .push(skip(f, "the pid file changed since it was read"));
                }
            }
            "HSV012" => {
                let leaky: Vec<_> = s
                    .profiles
                    .iter()
                    .filter(|p| {
                        p.name.as_str() == f.subject && p.env_mode.is_some_and(|m| m & 0o077 != 0)
                    })
                    .collect();
                if leaky.is_empty() {
                    out.skipped
                        .push(skip(f, "the .env file changed since it was read"));
                }
                for p in leaky {
                    if files.insert(p.env_path.clone()) {
                        out.fixes.push(Fix {
                            id: f.id,
                            subject: f.subject.clone(),
                            action: Action::ChmodEnv {
                                path: p.env_path.clone(),
                            },
                        });
                    }
                }
            }
            "HSV001" | "HSV002" | "HSV003" => {
                let units: Vec<&UnitSnap> = s
                    .units
                    .iter()
                    .filter(|u| f.units.contains(&u.key()))
                    .collect();
                let mut legacy = false;
                for u in units.iter().filter(|u| !is_ours(u)) {
                    legacy = true;
                    if migrated.contains(&u.key()) {
                        continue;
                    }
                    migrated.push(u.key());
                    let profile = profile_of(u).unwrap_or_else(|| {
                        ProfileName::parse(DEFAULT_PROFILE).expect("default is valid")
                    });
                    match migrate_steps(u, &profile, now) {
                        Some(steps) => {
                            if !reloads.contains(&scope_of(u)) {
                                reloads.push(scope_of(u));
                            }
                            let successor = s
                                .units
                                .iter()
                                .find(|o| {
                                    rendered_by_us(o)
                                        && scope_of(o) == scope_of(u)
                                        && profile_of(o).as_ref() == Some(&profile)
                                })
                                .map(|o| o.name.clone());
                            out.fixes.push(Fix {
                                id: f.id,
                                subject: u.name.clone(),
                                action: Action::Migrate {
                                    scope: scope_of(u),
                                    unit: u.name.clone(),
                                    profile,
                                    steps,
                                    successor,
                                },
                            });
                        }
                        None => out
                            .skipped
                            .push(skip(f, format!("cannot plan a migration of {}", u.name))),
                    }
                }
                if !legacy && f.id != "HSV001" {
                    out.skipped.push(skip(
                        f,
                        "the unit has our unit's name, and doctor never edits a unit file; install backs it up and rewrites it",
                    ));
                }
            }
            "HSV008" if f.severity == Severity::Error => {
                let unit = s.units.iter().find(|u| f.units.contains(&u.key()));
                let cause = findings.iter().find(|o| {
                    o.severity == Severity::Error
                        && o.id != "HSV008"
                        && (o.subject == f.subject
                            || (o.profile.is_some() && o.profile == f.profile))
                });
                let limit =
                    unit.is_some_and(|u| u.props.result.as_deref() == Some("start-limit-hit"));
                match (unit, cause) {
                    (Some(_), None) if limit => out.skipped.push(skip(
                        f,
                        "it hit its start limit: a crash loop whose cause doctor cannot see is gone; read the journal first",
                    )),
                    (Some(u), None) if is_ours(u) => {
                        if reset.insert(u.name.clone()) {
                            out.fixes.push(Fix {
                                id: f.id,
                                subject: f.subject.clone(),
                                action: Action::ResetFailed {
                                    scope: scope_of(u),
                                    unit: u.name.clone(),
                                },
                            });
                        }
                    }
                    (Some(_), None) => out.skipped.push(skip(
                        f,
                        "not one of our units; reset it yourself once you know why it failed",
                    )),
                    (_, Some(c)) => out.skipped.push(skip(
                        f,
                        format!("its cause may still be there ({} {})", c.id, c.subject),
                    )),
                    (None, None) => out.skipped.push(skip(f, "the unit is no longer listed")),
                }
            }
            "HSV008" => out.skipped.push(skip(
                f,
                "a restart loop needs its cause found in the journal first",
            )),
            // A missing system bus (info) is normal, not something left undone.
            "HSV000" if f.severity == Severity::Info => {}
            "HSV000" => out.skipped.push(skip(f, "doctor cannot read it")),
            "HSV004" | "HSV005" | "HSV014" => out.skipped.push(skip(
                f,
                "the unit file must be rewritten, and doctor never edits a unit file",
            )),
            "HSV006" => out
                .skipped
                .push(skip(f, "which profile keeps the credential is your choice")),
            "HSV009" => out
                .skipped
                .push(skip(f, "the hand edit is yours to move into a drop-in")),
            "HSV011" => out
                .skipped
                .push(skip(f, "linger is a machine-wide login setting")),
            "HSV013" | "HSV017" => out.skipped.push(skip(
                f,
                "restarting a running gateway interrupts it; do it when it suits you",
            )),
            "HSV015" => out
                .skipped
                .push(skip(f, "only a person can correct gateway.toml")),
            "HSV016" => out.skipped.push(skip(
                f,
                "doctor never kills a process; it may be someone's debugging session",
            )),
            _ => out.skipped.push(skip(f, "no automatic fix")),
        }
    }
    // One reload per manager, after every migration of that manager.
    let reload_fixes: Vec<Fix> = out
        .fixes
        .iter()
        .filter(|x| matches!(x.action, Action::Reload { .. }))
        .cloned()
        .collect();
    out.fixes
        .retain(|x| !matches!(x.action, Action::Reload { .. }));
    for scope in reloads {
        let fix = reload_fixes
            .iter()
            .find(|x| x.action == Action::Reload { scope })
            .cloned()
            .unwrap_or_else(|| Fix {
                // The reload a migration needs answers the migration's finding.
                id: out
                    .fixes
                    .iter()
                    .find(|x| matches!(&x.action, Action::Migrate { scope: s, .. } if *s == scope))
                    .map_or("HSV010", |x| x.id),
                subject: format!("{scope} manager"),
                action: Action::Reload { scope },
            });
        // Reset-failed after the reload; everything else before it.
        let at = out
            .fixes
            .iter()
            .position(|x| matches!(x.action, Action::ResetFailed { .. }))
            .unwrap_or(out.fixes.len());
        out.fixes.insert(at, fix);
    }
    out
}

/// Carry out `plan`. Each fix stands alone: one that fails is reported and the rest go on.
/// Returns the fixes applied and, for those that failed, why.
pub async fn apply(plan: &FixPlan) -> (Vec<Fixed>, Vec<String>) {
    let mut fixed = vec![];
    let mut failed = vec![];
    for fix in &plan.fixes {
        match apply_one(&fix.action).await {
            Ok(()) => fixed.push(Fixed {
                id: fix.id,
                subject: fix.subject.clone(),
                action: fix.action.to_string(),
            }),
            Err(e) => failed.push(format!("{} {}: {}: {e:#}", fix.id, fix.subject, fix.action)),
        }
    }
    (fixed, failed)
}

async fn bus_steps(scope: Scope, unit: &str, steps: Vec<Step>) -> anyhow::Result<()> {
    let systemd = crate::systemd::Systemd::connect(scope).await?;
    let plan = Plan {
        unit: unit.to_owned(),
        steps,
        notes: vec![],
    };
    crate::effects::apply(&plan, &systemd).await?;
    Ok(())
}

async fn apply_one(action: &Action) -> anyhow::Result<()> {
    match action {
        Action::Reload { scope } => bus_steps(*scope, "", vec![Step::Reload]).await,
        Action::RemovePidFile { path, pid } => {
            // Re-check: the same record, and its process still not running.
            let rec = PidFile::read(path)
                .ok_or_else(|| anyhow::anyhow!("{} is gone or changed", path.display()))?;
            if rec.pid != *pid || std::path::Path::new(&format!("/proc/{pid}")).exists() {
                anyhow::bail!("{} now names a running process; left alone", path.display());
            }
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            }
        }
        Action::ChmodEnv { path } => chmod_env(path),
        Action::Migrate {
            scope, unit, steps, ..
        } => bus_steps(*scope, unit, steps.clone()).await,
        Action::ResetFailed { scope, unit } => {
            bus_steps(*scope, unit, vec![Step::ResetFailed { unit: unit.clone() }]).await
        }
    }
}

/// `chmod 600` the `.env` itself, never what a link points at: opened without following a
/// link, checked to be a regular file owned by whoever owns the profile directory, and
/// changed through that open descriptor, so nothing can be swapped in between.
fn chmod_env(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A link is an error (ELOOP), and a FIFO does not block the open.
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => anyhow::anyhow!(
                "{} is a symbolic link; left alone (make it a regular file, then chmod 600 it)",
                path.display()
            ),
            _ => anyhow::Error::new(e).context(format!("failed to open {}", path.display())),
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        anyhow::bail!("{} is not a regular file; left alone", path.display());
    }
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    let owner = std::fs::symlink_metadata(dir)?.uid();
    if meta.uid() != owner {
        anyhow::bail!(
            "{} belongs to uid {}, not to the profile's owner (uid {owner}); left alone",
            path.display(),
            meta.uid()
        );
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::{self, tests as ct};

    fn fix_ids(p: &FixPlan) -> Vec<(&str, &str)> {
        p.fixes
            .iter()
            .map(|f| {
                (
                    f.id,
                    match f.action {
                        Action::Reload { .. } => "reload",
                        Action::RemovePidFile { .. } => "rm-pid",
                        Action::ChmodEnv { .. } => "chmod",
                        Action::Migrate { .. } => "migrate",
                        Action::ResetFailed { .. } => "reset-failed",
                    },
                )
            })
            .collect()
    }

    fn planned(s: &Snapshot) -> FixPlan {
        plan(s, &checks::all(s), 1000)
    }

    #[test]
    fn reload_for_need_daemon_reload() {
        let mut u = ct::ours("a");
        u.props.need_daemon_reload = Some(true);
        let p = planned(&ct::snap(vec![u], vec![]));
        assert_eq!(fix_ids(&p), [("HSV010", "reload")]);
        assert_eq!(
            p.fixes[0].action.to_string(),
            "systemctl --user daemon-reload"
        );
    }

    #[test]
    fn a_dead_pid_file_is_removed_and_an_alive_one_never() {
        let mut a = ct::profile("a");
        a.pid = Some((ct::pid_record(&a, 4242, "a"), PidProcess::Dead));
        let p = planned(&ct::snap(vec![], vec![a.clone()]));
        assert_eq!(fix_ids(&p), [("HSV007", "rm-pid")]);
        // Alive, foreign or misrouted: never removed.
        for (rec_profile, cmdline, units) in [
            ("a", "sleep 100", vec![]),
            ("b", "/usr/bin/hermes-svc gateway run --profile b", vec![]),
            (
                "a",
                "/usr/bin/hermes-svc gateway run --profile b",
                vec![ct::ours("b")],
            ),
        ] {
            a.pid = Some((
                ct::pid_record(&a, 4242, rec_profile),
                PidProcess::Alive {
                    cmdline: cmdline.into(),
                },
            ));
            let s = ct::snap(units, vec![a.clone()]);
            let fs = checks::all(&s);
            assert!(fs.iter().any(|f| f.id == "HSV007"), "{fs:?}");
            let p = plan(&s, &fs, 1000);
            assert!(p.fixes.is_empty(), "{p:?}");
            assert!(p
                .skipped
                .iter()
                .any(|k| k.id == "HSV007" && k.why.contains("alive")));
        }
    }

    #[test]
    fn a_leaky_env_is_chmodded() {
        let mut a = ct::profile("a");
        a.env_mode = Some(0o644);
        let p = planned(&ct::snap(vec![], vec![a.clone()]));
        assert_eq!(fix_ids(&p), [("HSV012", "chmod")]);
        assert_eq!(p.fixes[0].action, Action::ChmodEnv { path: a.env_path });
    }

    fn legacy_on_disk() -> UnitSnap {
        let mut l = ct::legacy();
        l.props.fragment_path = Some("/home/u/.config/systemd/user/hermes-gateway.service".into());
        l.props.unit_file_state = Some("enabled".into());
        l.sticky = Some(ProfileName::parse("a").unwrap());
        l
    }

    #[test]
    fn a_legacy_unit_is_migrated_once_with_installs_steps() {
        let s = ct::snap(vec![ct::ours("a"), legacy_on_disk()], vec![]);
        let fs = checks::all(&s);
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
        let s = ct::snap(vec![l], vec![]);
        let fs = checks::all(&s);
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
        let p = planned(&ct::snap(vec![user, system], vec![]));
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
        let mut mine = ct::unit(
            "hermes-gateway-a.service",
            "/usr/bin/hermes gateway run --profile a --replace",
        );
        mine.file_text =
            Some("[Service]\nExecStart=/usr/bin/hermes gateway run --profile a --replace\n".into());
        mine.props.need_daemon_reload = Some(false);
        let s = ct::snap(vec![mine], vec![]);
        let fs = checks::all(&s);
        assert!(fs.iter().any(|f| f.id == "HSV002"), "{fs:?}");
        let p = plan(&s, &fs, 1000);
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p
            .skipped
            .iter()
            .any(|k| k.id == "HSV002" && k.manual.starts_with("hermes-svc install")));
        // No fix ever writes, moves or removes one of our units' files.
        let s = ct::snap(vec![ct::ours("a"), legacy_on_disk()], vec![]);
        for f in plan(&s, &checks::all(&s), 1).fixes {
            if let Action::Migrate { unit, steps, .. } = f.action {
                assert!(crate::profile::profile_of_unit(&unit).is_none());
                assert!(steps
                    .iter()
                    .all(|st| !st.to_string().contains("hermes-gateway-a")));
            }
        }
    }

    #[test]
    fn reset_failed_only_for_our_units_once_the_cause_is_gone() {
        let mut u = ct::ours("a");
        u.props.active_state = Some("failed".into());
        u.props.result = Some("exit-code".into());
        let p = planned(&ct::snap(vec![u.clone()], vec![]));
        assert_eq!(fix_ids(&p), [("HSV008", "reset-failed")]);
        // The cause is still there: a broken config.
        let mut a = ct::profile("a");
        a.config_error = Some("gateway.toml:1: bad".into());
        let p = planned(&ct::snap(vec![u.clone()], vec![a]));
        assert!(p.fixes.is_empty(), "{p:?}");
        // A start limit: a crash loop, so the cause cannot be known to be gone.
        let mut hit = u.clone();
        hit.props.result = Some("start-limit-hit".into());
        let p = planned(&ct::snap(vec![hit], vec![]));
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p.skipped.iter().any(|k| k.why.contains("start limit")));
        // Not ours.
        let mut l = ct::unit("hermes.service", "/usr/bin/hermes gateway run --profile a");
        l.props.active_state = Some("failed".into());
        let p = planned(&ct::snap(vec![l], vec![]));
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p.skipped.iter().any(|k| k.id == "HSV008"));
    }

    #[test]
    fn unfixable_findings_say_why_and_show_the_command() {
        let mut u = ct::ours("a");
        u.props.restart = Some("no".into());
        let s = ct::snap(vec![u], vec![]);
        let fs = checks::all(&s);
        let p = plan(&s, &fs, 1);
        assert!(p.fixes.is_empty());
        assert_eq!(p.skipped.len(), fs.len());
        assert_eq!(
            p.skipped[0].manual,
            "hermes-svc install --profile a --force"
        );
    }
}
