//! `doctor --fix`: the fixes there are, the plan they make, and the state a plan is built in.
//!
//! Which finding gets which fix is decided next to its check (see [`crate::doctor::checks`]),
//! through a [`Planner`]; [`apply()`] only does what the plan says. Unit work reuses install's
//! planning (`plan_install` with `migrate`, keeping only the steps about the legacy unit) and
//! `effects::apply`, so a legacy unit is migrated by `doctor --fix` exactly as by
//! `install --migrate`. Nothing here kills a process (a unit is stopped through its manager),
//! edits a unit file, or touches a file it did not re-check just before.

mod apply;

pub(crate) use apply::apply;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::doctor::homes::Homes;
use crate::doctor::snapshot::UnitSnap;
use crate::doctor::Finding;
use crate::profile::ProfileName;
use crate::service::plan::Step;
use crate::systemd::scope::Scope;

/// One change `--fix` makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
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
pub(crate) struct Fix {
    pub(crate) id: &'static str,
    pub(crate) subject: String,
    pub(crate) action: Action,
}

/// A finding `--fix` leaves alone, with why and what to run by hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub(crate) id: &'static str,
    pub(crate) subject: String,
    pub(crate) why: String,
    pub(crate) manual: String,
}

/// What `--fix` will do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FixPlan {
    pub(crate) fixes: Vec<Fix>,
    pub(crate) skipped: Vec<Skipped>,
}

/// One applied fix, as `--json` prints it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Fixed {
    pub(crate) id: &'static str,
    pub(crate) subject: String,
    pub(crate) action: String,
}

/// A plan being built. Each check's fix adds to it; what must happen once however many
/// findings ask (a manager's reload, a file's change, a unit's migration or reset) is
/// remembered here.
pub(crate) struct Planner<'a> {
    /// The profile homes, for the fixes of the checks both managers run.
    pub(crate) homes: &'a Homes,
    /// systemd's gateway units, for the unit fixes; none under launchd, which changes no job.
    pub(crate) units: &'a [UnitSnap],
    /// Every finding of the run: a fix holds back while another finding may be its cause.
    pub(crate) findings: &'a [Finding],
    /// Names backups.
    pub(crate) now: u64,
    plan: FixPlan,
    /// Managers to reload, in the order first asked, each with the finding that asked.
    reloads: Vec<(Scope, &'static str)>,
    migrated: Vec<(Option<Scope>, String)>,
    reset: BTreeSet<String>,
    files: BTreeSet<PathBuf>,
}

impl<'a> Planner<'a> {
    pub(crate) fn new(
        homes: &'a Homes,
        units: &'a [UnitSnap],
        findings: &'a [Finding],
        now: u64,
    ) -> Self {
        Self {
            homes,
            units,
            findings,
            now,
            plan: FixPlan::default(),
            reloads: vec![],
            migrated: vec![],
            reset: BTreeSet::new(),
            files: BTreeSet::new(),
        }
    }

    /// Fix `f` by `action`, reported under `subject`.
    pub(crate) fn fix(&mut self, f: &Finding, subject: String, action: Action) {
        self.plan.fixes.push(Fix {
            id: f.id,
            subject,
            action,
        });
    }

    /// Leave `f` alone, saying why; its own fix line is what to run by hand.
    pub(crate) fn skip(&mut self, f: &Finding, why: impl Into<String>) {
        self.plan.skipped.push(Skipped {
            id: f.id,
            subject: f.subject.clone(),
            why: why.into(),
            manual: f.fix.clone(),
        });
    }

    /// Whether a finding with `f`'s id and subject was already left alone.
    pub(crate) fn is_skipped(&self, f: &Finding) -> bool {
        self.plan
            .skipped
            .iter()
            .any(|k| k.id == f.id && k.subject == f.subject)
    }

    /// Ask for `scope`'s manager to be reloaded on behalf of finding `by`. True the first time
    /// for that manager: only then does the asker plan the reload itself.
    pub(crate) fn reload(&mut self, scope: Scope, by: &'static str) -> bool {
        if self.reloads.iter().any(|(s, _)| *s == scope) {
            return false;
        }
        self.reloads.push((scope, by));
        true
    }

    /// True the first time `path` is to be changed.
    pub(crate) fn first_change_of(&mut self, path: &Path) -> bool {
        self.files.insert(path.to_owned())
    }

    /// True the first time the unit `key` is to be migrated.
    pub(crate) fn first_migration_of(&mut self, key: (Option<Scope>, String)) -> bool {
        if self.migrated.contains(&key) {
            return false;
        }
        self.migrated.push(key);
        true
    }

    /// True the first time a unit named `unit` is to be reset.
    pub(crate) fn first_reset_of(&mut self, unit: &str) -> bool {
        self.reset.insert(unit.to_owned())
    }

    /// The plan, with one reload per manager: after every migration of that manager, and
    /// before any reset-failed.
    pub(crate) fn finish(self) -> FixPlan {
        let mut out = self.plan;
        let reload_fixes: Vec<Fix> = out
            .fixes
            .iter()
            .filter(|x| matches!(x.action, Action::Reload { .. }))
            .cloned()
            .collect();
        out.fixes
            .retain(|x| !matches!(x.action, Action::Reload { .. }));
        for (scope, by) in self.reloads {
            let fix = reload_fixes
                .iter()
                .find(|x| x.action == Action::Reload { scope })
                .cloned()
                // The reload a migration needs answers the migration's finding.
                .unwrap_or_else(|| Fix {
                    id: by,
                    subject: format!("{scope} manager"),
                    action: Action::Reload { scope },
                });
            let at = out
                .fixes
                .iter()
                .position(|x| matches!(x.action, Action::ResetFailed { .. }))
                .unwrap_or(out.fixes.len());
            out.fixes.insert(at, fix);
        }
        out
    }
}
