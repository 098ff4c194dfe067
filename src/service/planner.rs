//! Planning install, set, unset and uninstall: pure decisions over an [`Observed`] world.
//!
//! The rules that keep people's work safe live here: a pristine unit is rewritten only when its
//! body changes; an edited one is left alone (settings go to the drop-in) unless `--force`
//! backs it up first; a foreign unit serving the same profile makes install refuse unless
//! `--migrate` is given.

use std::path::{Path, PathBuf};

use crate::service::plan::{Plan, Step};
use crate::systemd::dropin::{Directive, DropIn, DropInError};
use crate::systemd::observed::{ForeignUnit, Observed};
use crate::systemd::unit_file::{self, Provenance, RenderError, UnitSpec};

/// Why a plan could not be made. Nothing has been touched when one of these is returned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error(
        "refusing to install: {} already serve{} profile {profile}; rerun with --migrate to stop and disable {} and keep {} as backup",
        names(.units), if .units.len() == 1 { "s" } else { "" },
        if .units.len() == 1 { "it" } else { "them" },
        if .units.len() == 1 { "its file" } else { "their files" }
    )]
    Foreign {
        profile: String,
        units: Vec<ForeignUnit>,
    },
    #[error("{path} was not written by hermes-svc; rerun with --migrate (or --force) to back it up and replace it")]
    ForeignAtOurPath { path: PathBuf },
    #[error("profile {profile} is not installed ({path} does not exist); run `hermes-svc install --profile {profile}` first")]
    NotInstalled { profile: String, path: PathBuf },
    #[error("cannot read our drop-in {path}: {source}")]
    DropIn {
        path: PathBuf,
        #[source]
        source: DropInError,
    },
    #[error(transparent)]
    Render(#[from] RenderError),
}

fn names(units: &[ForeignUnit]) -> String {
    units
        .iter()
        .map(|u| match &u.fragment_path {
            Some(p) => format!("{} ({})", u.name, p.display()),
            None => u.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Settings destined for our drop-in.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub(crate) env: Vec<(String, String)>,
    pub(crate) directives: Vec<(Directive, u64)>,
}

/// A validated `install` request.
#[derive(Clone, Debug)]
pub(crate) struct InstallRequest {
    pub(crate) spec: UnitSpec,
    pub(crate) settings: Settings,
    pub(crate) start: bool,
    pub(crate) force: bool,
    pub(crate) migrate: bool,
    /// Seconds since the epoch, for backup file names.
    pub(crate) now: u64,
}

fn aside(path: &Path, tag: &str, now: u64) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{tag}.{now}"));
    path.with_file_name(name)
}

fn current_dropin(observed: &Observed) -> Result<DropIn, PlanError> {
    match &observed.dropin_text {
        None => Ok(DropIn::default()),
        Some(text) => DropIn::parse(text).map_err(|source| PlanError::DropIn {
            path: observed.dropin_path(),
            source,
        }),
    }
}

/// Write, or remove when empty, our drop-in if its content changes.
fn plan_dropin(plan: &mut Plan, observed: &Observed, dropin: &DropIn) -> Result<(), PlanError> {
    let path = observed.dropin_path();
    if dropin.is_empty() {
        if observed.dropin_text.is_some() {
            plan.push(Step::RemoveFile { path });
        }
        return Ok(());
    }
    let text = dropin.render().map_err(|source| PlanError::DropIn {
        path: path.clone(),
        source,
    })?;
    if observed.dropin_text.as_deref() != Some(text.as_str()) {
        plan.push(Step::WriteFile {
            path,
            contents: text,
            mode: 0o644,
        });
    }
    Ok(())
}

/// Clear what an earlier, killed run left half done: its temporary files.
fn plan_cleanup(plan: &mut Plan, observed: &Observed) {
    for path in &observed.stale_temp_files {
        plan.push(Step::RemoveLeftover { path: path.clone() });
    }
}

/// After file changes: reload, and restart the unit if (and only if) it is running, either
/// because the files change now or because the running gateway started before they last
/// changed (an earlier run was killed between writing and restarting).
fn plan_apply_changes(plan: &mut Plan, observed: &Observed, restart: bool) {
    if plan.changes_files() || observed.needs_reload() {
        plan.push(Step::Reload);
    }
    let stale = observed.running_stale();
    if (plan.changes_files() || stale) && observed.active() {
        if restart {
            if stale && !plan.changes_files() {
                plan.note(format!(
                    "{} was running older settings than its unit files; restarting it",
                    observed.unit_name
                ));
            }
            plan.push(Step::Restart {
                unit: observed.unit_name.clone(),
            });
        } else {
            plan.note(format!(
                "{} keeps running with its old settings until it is restarted",
                observed.unit_name
            ));
        }
    }
}

pub(crate) fn plan_install(req: &InstallRequest, observed: &Observed) -> Result<Plan, PlanError> {
    let mut plan = Plan::new(observed.unit_name.clone());
    if !observed.foreign.is_empty() && !req.migrate {
        return Err(PlanError::Foreign {
            profile: req.spec.profile.name().to_string(),
            units: observed.foreign.clone(),
        });
    }
    for foreign in &observed.foreign {
        if foreign.active {
            plan.push(Step::Stop {
                unit: foreign.name.clone(),
            });
        }
        if foreign.enabled {
            plan.push(Step::Disable {
                unit: foreign.name.clone(),
            });
        }
        match &foreign.fragment_path {
            // Only files a person or a tool put in a config directory are moved; a
            // package's file under /usr belongs to the package manager.
            Some(path) if !path.starts_with("/usr") => {
                plan.push(Step::MoveAside {
                    from: path.clone(),
                    to: aside(path, "migrated", req.now),
                });
                plan.note(format!(
                    "migrated {}: stopped, disabled, file kept as backup",
                    foreign.name
                ));
            }
            _ => plan.note(format!(
                "migrated {}: stopped and disabled; its file belongs to a package and stays (mask it with `systemctl{} mask {}` if it comes back)",
                foreign.name,
                req.spec.scope.systemctl_flag(),
                foreign.name
            )),
        }
        if foreign.active || foreign.failed {
            plan.push(Step::ResetFailed {
                unit: foreign.name.clone(),
            });
        }
    }

    // The sandbox's `ReadWritePaths=` names the profile home, and the unit cannot start
    // while it is missing; the gateway, read-only everywhere else, cannot create it either.
    if let (Some(user), false) = (&req.spec.run_as, observed.profile_home_exists) {
        plan.push(Step::CreateDir {
            path: req.spec.profile.home(),
            user: user.clone(),
        });
    }
    let rendered = req.spec.render()?;
    let write_unit = Step::WriteFile {
        path: observed.unit_path.clone(),
        contents: rendered.clone(),
        mode: 0o644,
    };
    match observed.unit_text.as_deref() {
        None => plan.push(write_unit),
        Some(text) => match unit_file::provenance(text) {
            Provenance::Pristine => {
                if unit_file::body(text) != unit_file::body(&rendered) {
                    plan.push(write_unit);
                }
            }
            Provenance::Edited if req.force => {
                plan.push(Step::Backup {
                    from: observed.unit_path.clone(),
                    to: aside(&observed.unit_path, "bak", req.now),
                });
                plan.push(write_unit);
            }
            Provenance::Edited => plan.note(format!(
                "{} was edited by hand and is left as it is; settings go to the drop-in (use --force to back it up and rewrite it)",
                observed.unit_path.display()
            )),
            Provenance::Foreign if req.force || req.migrate => {
                plan.push(Step::MoveAside {
                    from: observed.unit_path.clone(),
                    to: aside(&observed.unit_path, "migrated", req.now),
                });
                plan.push(write_unit);
            }
            Provenance::Foreign => {
                return Err(PlanError::ForeignAtOurPath {
                    path: observed.unit_path.clone(),
                })
            }
        },
    }

    let mut dropin = current_dropin(observed)?;
    merge(&mut dropin, &req.settings);
    plan_dropin(&mut plan, observed, &dropin)?;
    plan_cleanup(&mut plan, observed);

    plan_apply_changes(&mut plan, observed, true);
    if !observed.enabled() {
        plan.push(Step::Enable {
            unit: observed.unit_name.clone(),
        });
    }
    if req.start && !observed.active() {
        plan.push(Step::Start {
            unit: observed.unit_name.clone(),
        });
    }
    for other in &observed.other_dropins {
        plan.note(format!("your drop-in {} also applies", other.display()));
    }
    Ok(plan)
}

fn merge(dropin: &mut DropIn, settings: &Settings) {
    for (k, v) in &settings.env {
        dropin.env.insert(k.clone(), v.clone());
    }
    for (d, v) in &settings.directives {
        dropin.directives.insert(*d, *v);
    }
}

fn require_installed(profile: &str, observed: &Observed) -> Result<(), PlanError> {
    if observed.unit_text.is_none() {
        return Err(PlanError::NotInstalled {
            profile: profile.to_owned(),
            path: observed.unit_path.clone(),
        });
    }
    Ok(())
}

/// `set`: merge settings into our drop-in.
pub(crate) fn plan_set(
    profile: &str,
    settings: &Settings,
    observed: &Observed,
    restart: bool,
) -> Result<Plan, PlanError> {
    plan_dropin_edit(profile, observed, restart, |_, dropin| {
        merge(dropin, settings)
    })
}

/// `unset`: drop keys (environment names or directive names) from our drop-in.
pub(crate) fn plan_unset(
    profile: &str,
    keys: &[String],
    observed: &Observed,
    restart: bool,
) -> Result<Plan, PlanError> {
    plan_dropin_edit(profile, observed, restart, |plan, dropin| {
        for key in keys {
            let removed = match Directive::from_name(key) {
                Some(d) => dropin.directives.remove(&d).is_some(),
                None => dropin.env.remove(key).is_some(),
            };
            if !removed {
                plan.note(format!("{key} was not set"));
            }
        }
    })
}

/// What `set` and `unset` share around their one edit of our drop-in: only an installed unit
/// has one to edit, and the edit is written, cleaned up after and applied the same way.
fn plan_dropin_edit(
    profile: &str,
    observed: &Observed,
    restart: bool,
    edit: impl FnOnce(&mut Plan, &mut DropIn),
) -> Result<Plan, PlanError> {
    require_installed(profile, observed)?;
    let mut plan = Plan::new(observed.unit_name.clone());
    let mut dropin = current_dropin(observed)?;
    edit(&mut plan, &mut dropin);
    plan_dropin(&mut plan, observed, &dropin)?;
    plan_cleanup(&mut plan, observed);
    plan_apply_changes(&mut plan, observed, restart);
    Ok(plan)
}

/// `uninstall`: stop, disable, remove our files, reload. Profile data is never touched, and
/// a person's own drop-ins stay where they are.
pub(crate) fn plan_uninstall(observed: &Observed, now: u64) -> Plan {
    let unit = observed.unit_name.clone();
    let mut plan = Plan::new(unit.clone());
    if observed.active() {
        plan.push(Step::Stop { unit: unit.clone() });
    }
    if observed.enabled() {
        plan.push(Step::Disable { unit: unit.clone() });
    }
    if let Some(text) = &observed.unit_text {
        if unit_file::provenance(text) == Provenance::Pristine {
            plan.push(Step::RemoveFile {
                path: observed.unit_path.clone(),
            });
        } else {
            let to = aside(&observed.unit_path, "bak", now);
            plan.note(format!(
                "{} had hand edits; kept as {}",
                observed.unit_path.display(),
                to.display()
            ));
            plan.push(Step::MoveAside {
                from: observed.unit_path.clone(),
                to,
            });
        }
    }
    match &observed.dropin_text {
        // Ours as we wrote it: nothing in it that `install --env` cannot bring back.
        Some(text) if DropIn::parse(text).is_ok() => plan.push(Step::RemoveFile {
            path: observed.dropin_path(),
        }),
        Some(_) => {
            let to = aside(&observed.dropin_path(), "bak", now);
            plan.note(format!(
                "{} had hand edits; kept as {}",
                observed.dropin_path().display(),
                to.display()
            ));
            plan.push(Step::MoveAside {
                from: observed.dropin_path(),
                to,
            });
        }
        None => {}
    }
    plan_cleanup(&mut plan, observed);
    if observed.other_dropins.is_empty() {
        if observed.dropin_dir.exists() {
            plan.push(Step::RemoveEmptyDir {
                path: observed.dropin_dir.clone(),
            });
        }
    } else {
        for other in &observed.other_dropins {
            plan.note(format!("kept your drop-in {}", other.display()));
        }
    }
    if plan.changes_files() || observed.needs_reload() {
        plan.push(Step::Reload);
    }
    if observed.loaded() {
        plan.push(Step::ResetFailed { unit });
    }
    if plan.is_unchanged() {
        plan.note("not installed; nothing to do");
    }
    plan
}
