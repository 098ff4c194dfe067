//! Planning install, set, unset and uninstall: pure decisions over an [`Observed`] world, the
//! same for every manager.
//!
//! The rules that keep people's work safe live here: a pristine definition (unit file, plist)
//! is rewritten only when its body changes; an edited one is left alone (settings go to the
//! settings file) unless `--force` backs it up first; a foreign job serving the same profile
//! makes install refuse unless `--migrate` is given. A backend lends only its formats
//! ([`Definition`], [`SettingsFile`]).

use std::path::{Path, PathBuf};

use crate::service::definition::{Definition, FormatError, Provenance, SettingsFile};
use crate::service::observed::{ForeignUnit, Observed};
use crate::service::plan::{Plan, Step};
use crate::service::settings::{Directive, Settings};

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
    #[error("cannot read our settings file {path}: {source}")]
    Settings {
        path: PathBuf,
        #[source]
        source: FormatError,
    },
    #[error(transparent)]
    Render(FormatError),
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

/// A validated `install` request.
#[derive(Clone, Debug)]
pub(crate) struct InstallRequest<D> {
    pub(crate) spec: D,
    pub(crate) settings: Settings,
    pub(crate) start: bool,
    pub(crate) force: bool,
    pub(crate) migrate: bool,
    /// Seconds since the epoch, for backup file names.
    pub(crate) now: u64,
}

/// Seconds since the epoch: what a backup's name carries (`<file>.bak.<now>`).
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn aside(path: &Path, tag: &str, now: u64) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{tag}.{now}"));
    path.with_file_name(name)
}

fn current_settings<S: SettingsFile>(observed: &Observed) -> Result<S, PlanError> {
    match &observed.settings_text {
        None => Ok(S::default()),
        Some(text) => {
            S::parse(text, &observed.settings_path).map_err(|source| PlanError::Settings {
                path: observed.settings_path.clone(),
                source,
            })
        }
    }
}

/// Write, or remove when empty, our settings file if its content changes.
fn plan_settings<S: SettingsFile>(
    plan: &mut Plan,
    observed: &Observed,
    settings: &mut S,
) -> Result<(), PlanError> {
    let path = observed.settings_path.clone();
    if settings.is_empty() {
        if observed.settings_text.is_some() {
            plan.push(Step::RemoveFile { path });
        }
        return Ok(());
    }
    let text = settings.render().map_err(|source| PlanError::Settings {
        path: path.clone(),
        source,
    })?;
    if observed.settings_text.as_deref() != Some(text.as_str()) {
        plan.push(Step::WriteFile {
            path,
            contents: text,
            mode: S::MODE,
        });
    }
    Ok(())
}

/// Write the definition as rendered, by the rules: a missing or pristine file whose body
/// differs is written; an edited one only with `--force` (backed up first); a foreign one only
/// with `--force` or `--migrate` (moved aside first).
fn plan_definition<D: Definition>(
    plan: &mut Plan,
    observed: &Observed,
    rendered: String,
    force: bool,
    migrate: bool,
    now: u64,
) -> Result<(), PlanError> {
    let Some(text) = observed.text.as_deref() else {
        plan.push(write_definition(observed, rendered));
        return Ok(());
    };
    match D::provenance(text) {
        Provenance::Pristine => {
            if !D::same_body(text, &rendered) {
                plan.push(write_definition(observed, rendered));
            }
        }
        Provenance::Edited if force => {
            plan.push(Step::Backup {
                from: observed.path.clone(),
                to: aside(&observed.path, "bak", now),
            });
            plan.push(write_definition(observed, rendered));
        }
        Provenance::Edited => plan.note(format!(
            "{} was edited by hand and is left as it is; {} (use --force to back it up and rewrite it)",
            observed.path.display(),
            if D::CARRIES_SETTINGS {
                "settings take effect only when hermes-svc may rewrite it"
            } else {
                "settings go to the drop-in"
            }
        )),
        Provenance::Foreign if force || migrate => {
            plan.push(Step::MoveAside {
                from: observed.path.clone(),
                to: aside(&observed.path, "migrated", now),
            });
            plan.push(write_definition(observed, rendered));
        }
        Provenance::Foreign => {
            return Err(PlanError::ForeignAtOurPath {
                path: observed.path.clone(),
            })
        }
    }
    Ok(())
}

fn write_definition(observed: &Observed, rendered: String) -> Step {
    Step::WriteFile {
        path: observed.path.clone(),
        contents: rendered,
        mode: 0o644,
    }
}

/// Clear what an earlier, killed run left half done: its temporary files.
fn plan_cleanup(plan: &mut Plan, observed: &Observed) {
    for path in &observed.stale_temp_files {
        plan.push(Step::RemoveLeftover { path: path.clone() });
    }
}

/// After file changes: reload, and restart the job if (and only if) it is running, either
/// because the files change now or because the running gateway started before they last
/// changed (an earlier run was killed between writing and restarting).
fn plan_apply_changes(plan: &mut Plan, observed: &Observed, restart: bool, reload: bool) {
    if plan.changes_files() || observed.needs_reload() || reload {
        plan.push(Step::Reload);
    }
    let stale = observed.running_stale();
    if (plan.changes_files() || stale) && observed.active() {
        if restart {
            if stale && !plan.changes_files() {
                plan.note(format!(
                    "{} was running older settings than its files; restarting it",
                    observed.name
                ));
            }
            plan.push(Step::Restart {
                unit: observed.name.clone(),
            });
        } else {
            plan.note(format!(
                "{} keeps running with its old settings until it is restarted",
                observed.name
            ));
        }
    }
}

/// `--migrate`: stop, disable and move aside every foreign job serving the profile.
fn plan_migrate<D: Definition>(plan: &mut Plan, spec: &D, observed: &Observed, now: u64) {
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
                    to: aside(path, "migrated", now),
                });
                plan.note(format!(
                    "migrated {}: stopped, disabled, file kept as backup",
                    foreign.name
                ));
            }
            _ => plan.note(format!(
                "migrated {}: stopped and disabled; its file belongs to a package and stays ({})",
                foreign.name,
                spec.package_file_hint(&foreign.name)
            )),
        }
        if foreign.active || foreign.failed {
            plan.push(Step::ResetFailed {
                unit: foreign.name.clone(),
            });
        }
    }
}

pub(crate) fn plan_install<D: Definition>(
    req: &InstallRequest<D>,
    observed: &Observed,
) -> Result<Plan, PlanError> {
    let mut plan = Plan::new(observed.name.clone());
    if !observed.foreign.is_empty() && !req.migrate {
        return Err(PlanError::Foreign {
            profile: req.spec.profile().name().to_string(),
            units: observed.foreign.clone(),
        });
    }
    plan_migrate(&mut plan, &req.spec, observed, req.now);

    // The sandbox's `ReadWritePaths=` names the profile home, and the unit cannot start
    // while it is missing; the gateway, read-only everywhere else, cannot create it either.
    if let (Some(user), false) = (req.spec.home_owner(), observed.profile_home_exists) {
        plan.push(Step::CreateDir {
            path: req.spec.profile().home(),
            user: user.to_owned(),
        });
    }
    let mut settings: D::Settings = current_settings(observed)?;
    merge(&mut settings, &req.settings);
    let rendered = req.spec.render(&settings).map_err(PlanError::Render)?;
    plan_definition::<D>(
        &mut plan,
        observed,
        rendered,
        req.force,
        req.migrate,
        req.now,
    )?;
    plan_settings(&mut plan, observed, &mut settings)?;
    plan_cleanup(&mut plan, observed);

    // Enabling links the job into what wants it (the agent's into its gateway's `.wants/`),
    // which the manager reads only on a reload, as `systemctl enable` reloads after it.
    let enable = !observed.enabled();
    if enable {
        plan.push(Step::Enable {
            unit: observed.name.clone(),
        });
    }
    plan_apply_changes(&mut plan, observed, true, enable);
    if req.start && !observed.active() {
        plan.push(Step::Start {
            unit: observed.name.clone(),
        });
    }
    for other in &observed.other_settings {
        plan.note(format!("your drop-in {} also applies", other.display()));
    }
    Ok(plan)
}

fn merge<S: SettingsFile>(file: &mut S, settings: &Settings) {
    for (k, v) in &settings.env {
        file.env().insert(k.clone(), v.clone());
    }
    for (d, v) in &settings.directives {
        file.directives().insert(*d, *v);
    }
    if let Some(credentials) = file.credentials() {
        for (name, path) in &settings.credentials {
            credentials.insert(name.clone(), path.clone());
        }
    }
}

fn require_installed(profile: &str, observed: &Observed) -> Result<(), PlanError> {
    if observed.text.is_none() {
        return Err(PlanError::NotInstalled {
            profile: profile.to_owned(),
            path: observed.path.clone(),
        });
    }
    Ok(())
}

/// `set`: merge settings into our settings file.
pub(crate) fn plan_set<D: Definition>(
    spec: &D,
    settings: &Settings,
    observed: &Observed,
    restart: bool,
) -> Result<Plan, PlanError> {
    plan_settings_edit(spec, observed, restart, |_, file| merge(file, settings))
}

/// `unset`: drop keys (environment names or directive names) from our settings file.
pub(crate) fn plan_unset<D: Definition>(
    spec: &D,
    keys: &[String],
    observed: &Observed,
    restart: bool,
) -> Result<Plan, PlanError> {
    plan_settings_edit(spec, observed, restart, |plan, file| {
        for key in keys {
            let removed = match Directive::from_name(key) {
                Some(d) => file.directives().remove(&d).is_some(),
                // A name is an environment variable or a credential, or both: both go.
                None => {
                    let env = file.env().remove(key).is_some();
                    let credential = file.credentials().is_some_and(|c| c.remove(key).is_some());
                    env || credential
                }
            };
            if !removed {
                plan.note(format!("{key} was not set"));
            }
        }
    })
}

/// What `set` and `unset` share around their one edit of our settings file: only an installed
/// job has one to edit, and the edit is written, cleaned up after and applied the same way.
/// Where the definition carries the settings (launchd), it is rendered again by the usual
/// rules, so a hand-edited plist is kept and says so.
fn plan_settings_edit<D: Definition>(
    spec: &D,
    observed: &Observed,
    restart: bool,
    edit: impl FnOnce(&mut Plan, &mut D::Settings),
) -> Result<Plan, PlanError> {
    require_installed(spec.profile().name().as_str(), observed)?;
    let mut plan = Plan::new(observed.name.clone());
    let mut settings: D::Settings = current_settings(observed)?;
    edit(&mut plan, &mut settings);
    if D::CARRIES_SETTINGS {
        let rendered = spec.render(&settings).map_err(PlanError::Render)?;
        plan_definition::<D>(&mut plan, observed, rendered, false, false, 0)?;
    }
    plan_settings(&mut plan, observed, &mut settings)?;
    plan_cleanup(&mut plan, observed);
    plan_apply_changes(&mut plan, observed, restart, false);
    Ok(plan)
}

/// `uninstall`: stop, disable, remove our files, reload. Profile data is never touched, and
/// a person's own settings files stay where they are.
pub(crate) fn plan_uninstall<D: Definition>(observed: &Observed, now: u64) -> Plan {
    let unit = observed.name.clone();
    let mut plan = Plan::new(unit.clone());
    if observed.active() {
        plan.push(Step::Stop { unit: unit.clone() });
    }
    if observed.enabled() {
        plan.push(Step::Disable { unit: unit.clone() });
    }
    if let Some(text) = &observed.text {
        if D::provenance(text) == Provenance::Pristine {
            plan.push(Step::RemoveFile {
                path: observed.path.clone(),
            });
        } else {
            plan_keep_aside(&mut plan, &observed.path, now);
        }
    }
    match &observed.settings_text {
        // Ours as we wrote it: nothing in it that `install --env` cannot bring back.
        Some(text) if D::Settings::parse(text, &observed.settings_path).is_ok() => {
            plan.push(Step::RemoveFile {
                path: observed.settings_path.clone(),
            })
        }
        Some(_) => plan_keep_aside(&mut plan, &observed.settings_path, now),
        None => {}
    }
    plan_cleanup(&mut plan, observed);
    if observed.other_settings.is_empty() {
        if let Some(dir) = observed.settings_dir.as_ref().filter(|d| d.exists()) {
            plan.push(Step::RemoveEmptyDir { path: dir.clone() });
        }
    } else {
        for other in &observed.other_settings {
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

fn plan_keep_aside(plan: &mut Plan, path: &Path, now: u64) {
    let to = aside(path, "bak", now);
    plan.note(format!(
        "{} had hand edits; kept as {}",
        path.display(),
        to.display()
    ));
    plan.push(Step::MoveAside {
        from: path.to_owned(),
        to,
    });
}
