//! The one place the CLI picks a manager: systemd (a scope and its D-Bus connection) or
//! launchd (the user's LaunchAgents and `launchctl` in the right domain). Every command plans
//! the same way through either; this says where the files are, how to look at the job, how to
//! carry a plan out and how to show it.
//!
//! A command first makes a [`Spec`] (checked before anything is touched), then connects it to
//! its manager. The connected [`Service`] holds the spec, so a unit can never meet launchd.

use std::path::PathBuf;

use super::args::{ScopeArgs, UnitSource};
use super::error::{usage, CliError};
use super::validate::{exec_path, resolve_profile, unit_spec};
use crate::launchd::effects::{self as launchd_effects, Agent};
use crate::launchd::launchctl::{Domain, Launchctl};
use crate::launchd::observed as launchd_observed;
use crate::launchd::plist::{LaunchAgent, AGENTS_DIR};
use crate::profile::Profile;
use crate::service::manager::Manager;
use crate::service::observed::{Observed, Siblings};
use crate::service::plan::Plan;
use crate::service::planner::{self, InstallRequest, PlanError};
use crate::service::role::Role;
use crate::service::settings::Settings;
use crate::systemd::effects as systemd_effects;
use crate::systemd::observed as systemd_observed;
use crate::systemd::scope::Scope;
use crate::systemd::unit_file::UnitSpec;
use crate::systemd::{Job, Systemd};

/// A profile's job as the chosen manager's file describes it.
pub(super) enum Spec {
    Unit(UnitSpec),
    LaunchAgent(LaunchAgent),
}

/// A spec and its manager, connected unless this is a dry run that could not reach it (then
/// plans are made from the files on disk alone).
pub(super) enum Service {
    Systemd {
        unit: UnitSpec,
        bus: Option<Systemd>,
    },
    Launchd {
        agent: LaunchAgent,
        /// The user's home directory, which holds `Library/LaunchAgents`.
        home: PathBuf,
        launchctl: Option<Launchctl>,
    },
}

/// The manager to use, refusing flags that only mean something to the other one.
pub(super) fn manager(scope: &ScopeArgs) -> Result<Manager, CliError> {
    let manager = Manager::current().map_err(|e| usage(e.to_string()))?;
    if manager == Manager::Launchd && scope.system {
        return Err(usage(
            "--system is for systemd's system manager; under launchd a profile runs as a LaunchAgent of the user who installs it",
        ));
    }
    Ok(manager)
}

/// The job definition `install` and `render` would write for `src`, checked before anything
/// is touched.
pub(super) fn spec(manager: Manager, src: &UnitSource) -> Result<Spec, CliError> {
    match manager {
        Manager::Systemd => Ok(Spec::Unit(unit_spec(src)?)),
        Manager::Launchd => agent_spec(src).map(Spec::LaunchAgent),
    }
}

/// The definition of an installed profile, for `set`, `unset`, `uninstall` and the lifecycle
/// commands, which take no `--exec`: the program is this binary, as at install. A unit is never
/// rendered from this (systemd's settings live in the drop-in), so only its profile matters.
pub(super) fn spec_for(manager: Manager, scope: Scope, profile: Profile) -> Result<Spec, CliError> {
    Ok(match manager {
        Manager::Systemd => Spec::Unit(UnitSpec {
            profile,
            scope,
            exec: PathBuf::new(),
            run_as: None,
            role: Role::Gateway,
        }),
        Manager::Launchd => Spec::LaunchAgent(LaunchAgent::new(profile, exec_path(None)?)),
    })
}

/// The user's home directory, where `Library/LaunchAgents` is.
pub(super) fn home_dir() -> Result<PathBuf, CliError> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| usage("HOME is not set, so there is no ~/Library/LaunchAgents to use"))
}

/// `launchctl` for this user's domain.
pub(super) async fn launchctl() -> Result<Launchctl, CliError> {
    let uid = nix::unistd::getuid().as_raw();
    Ok(Launchctl::detect(Launchctl::DEFAULT_PROGRAM, uid).await?)
}

/// A manager's connection, or on a dry run that cannot make it, `None` and a warning.
fn unless_dry_run<T>(dry_run: bool, made: Result<T, CliError>) -> Result<Option<T>, CliError> {
    match made {
        Ok(made) => Ok(Some(made)),
        Err(e) if dry_run => {
            eprintln!("warning: {e}; planning from the files on disk alone");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A LaunchAgent for `src`: `--run-as` and `--system` are systemd's.
fn agent_spec(src: &UnitSource) -> Result<LaunchAgent, CliError> {
    if src.scope.system {
        return Err(usage(
            "--system is for systemd's system manager; a LaunchAgent runs as the user who installs it",
        ));
    }
    if src.run_as.is_some() {
        return Err(usage(
            "--run-as is for systemd system units; a LaunchAgent runs as the user who installs it",
        ));
    }
    let exec = exec_path(src.exec.as_deref())?;
    let profile = resolve_profile(&src.profile, Scope::User, None)?;
    let agent = LaunchAgent::new(profile, exec);
    // Render once now, so bad values are usage errors before anything is touched.
    agent.render().map_err(|e| usage(e.to_string()))?;
    Ok(agent)
}

impl Spec {
    /// The same profile's job in `role`: the agent's beside the gateway's.
    pub(super) fn with_role(&self, role: Role) -> Spec {
        match self {
            Spec::Unit(u) => Spec::Unit(UnitSpec { role, ..u.clone() }),
            Spec::LaunchAgent(a) => Spec::LaunchAgent(a.clone().with_role(role)),
        }
    }

    pub(super) fn profile(&self) -> &Profile {
        match self {
            Spec::Unit(u) => &u.profile,
            Spec::LaunchAgent(a) => &a.profile,
        }
    }

    /// Where the job's definition file (unit, plist) is.
    pub(super) fn definition_path(&self) -> Result<PathBuf, CliError> {
        match self {
            Spec::Unit(u) => Ok(self.lock_dir()?.join(u.unit_name())),
            Spec::LaunchAgent(a) => Ok(a.path(&home_dir()?)),
        }
    }

    /// Where the edit lock lives: beside the definitions it guards.
    pub(super) fn lock_dir(&self) -> Result<PathBuf, CliError> {
        match self {
            Spec::Unit(u) => u
                .scope
                .unit_dir()
                .ok_or_else(|| systemd_observed::ObserveError::NoUnitDir(u.scope).into()),
            Spec::LaunchAgent(_) => Ok(home_dir()?.join(AGENTS_DIR)),
        }
    }

    pub(super) async fn connect(self, dry_run: bool) -> Result<Service, CliError> {
        match self {
            Spec::Unit(unit) => {
                let bus = Systemd::connect(unit.scope).await.map_err(CliError::from);
                Ok(Service::Systemd {
                    bus: unless_dry_run(dry_run, bus)?,
                    unit,
                })
            }
            Spec::LaunchAgent(agent) => Ok(Service::Launchd {
                agent,
                home: home_dir()?,
                launchctl: unless_dry_run(dry_run, launchctl().await)?,
            }),
        }
    }
}

impl Service {
    pub(super) async fn observe(&self, siblings: Siblings) -> Result<Observed, CliError> {
        match self {
            Service::Systemd { unit, bus } => {
                Ok(systemd_observed::observe(unit, bus.as_ref(), siblings).await?)
            }
            Service::Launchd {
                agent,
                home,
                launchctl,
            } => Ok(launchd_observed::observe(
                agent,
                &home.join(AGENTS_DIR),
                launchctl.as_ref(),
                siblings,
            )
            .await?),
        }
    }

    /// Carry out `plan` (never on a dry run: those have no connection to use).
    pub(super) async fn apply(&self, plan: &Plan) -> Result<(), CliError> {
        match self {
            Service::Systemd { bus, .. } => {
                let bus = bus.as_ref().expect("connected unless dry-run");
                Ok(systemd_effects::apply(plan, bus).await?)
            }
            Service::Launchd {
                agent,
                home,
                launchctl,
            } => {
                let launchctl = launchctl.as_ref().expect("connected unless dry-run");
                let plist = agent.path(home);
                let stdout = agent.stdout_path();
                let log_dir = stdout.parent().unwrap_or(home);
                let agent = Agent {
                    plist: &plist,
                    log_dir,
                };
                Ok(launchd_effects::apply(plan, launchctl, agent).await?)
            }
        }
    }

    /// Wait at most `timeout` for each manager job, showing `watch` the gateway's `STATUS=`
    /// meanwhile (systemd only: launchctl's calls return at once).
    pub(super) fn watch_jobs(
        &mut self,
        timeout: std::time::Duration,
        watch: Option<Box<dyn crate::systemd::JobWatch>>,
    ) {
        if let Service::Systemd { bus: Some(bus), .. } = self {
            bus.watch_jobs(timeout, watch);
        }
    }

    /// `start`, `stop` or `restart` the profile's job, and return its name. Under launchd, stop
    /// is `bootout` (KeepAlive would start a stopped process again), and restart of a job that
    /// is not loaded starts it, as `systemctl restart` starts a stopped unit.
    pub(super) async fn run_job(&self, job: Job) -> Result<String, CliError> {
        match self {
            Service::Systemd { unit, bus } => {
                let name = unit.unit_name();
                let bus = bus
                    .as_ref()
                    .expect("connected: lifecycle commands have no dry run");
                bus.run_job(job, &name).await?;
                Ok(name)
            }
            Service::Launchd {
                agent,
                home,
                launchctl,
            } => {
                let launchctl = launchctl.as_ref().expect("connected: no dry run here");
                let label = agent.label();
                let plist = agent.path(home);
                if job != Job::Stop && !plist.exists() {
                    let name = agent.profile.name();
                    return Err(usage(format!(
                        "profile {name} is not installed ({} does not exist); run `hermes-svc install --profile {name}` first",
                        plist.display(),
                    )));
                }
                match job {
                    Job::Stop => {
                        launchctl.stop(&label).await?;
                    }
                    Job::Restart if launchctl.is_loaded(&label).await? => {
                        launchctl.restart(&label).await?
                    }
                    Job::Start | Job::Restart => {
                        if let Some(dir) = agent.stdout_path().parent() {
                            launchd_effects::ensure_dir(dir)?;
                        }
                        launchctl.start(&label, &plist).await?
                    }
                }
                Ok(label)
            }
        }
    }

    /// Whether the file at our job's path was written by another program: a named profile's
    /// Hermes unit has our unit's very name (launchd labels differ, so never there).
    pub(super) fn foreign_at_our_path(&self, observed: &Observed) -> bool {
        use crate::service::definition::{Definition, Provenance};
        let Some(text) = observed.text.as_deref() else {
            return false;
        };
        match self {
            Service::Systemd { .. } => UnitSpec::provenance(text) == Provenance::Foreign,
            Service::Launchd { .. } => LaunchAgent::provenance(text) == Provenance::Foreign,
        }
    }

    /// Start a job that is not ours, from its file `path`: a unit by name, a LaunchAgent
    /// bootstrapped from its plist (the undo of an adopt bringing Hermes's own job back).
    pub(super) async fn start_other(
        &self,
        name: &str,
        path: &std::path::Path,
    ) -> Result<(), CliError> {
        match self {
            Service::Systemd { bus, .. } => {
                let bus = bus.as_ref().expect("connected: no dry run here");
                Ok(bus.start(name).await?)
            }
            Service::Launchd { launchctl, .. } => {
                let launchctl = launchctl.as_ref().expect("connected: no dry run here");
                Ok(launchctl.load_and_start(name, path).await?)
            }
        }
    }

    /// The plan's steps as this manager carries them out.
    pub(super) fn describe(&self, plan: &Plan) -> Vec<String> {
        match self {
            Service::Systemd { .. } => systemd_effects::describe(plan),
            Service::Launchd { agent, home, .. } => {
                launchd_effects::describe(plan, self.domain(), &agent.path(home))
            }
        }
    }

    fn domain(&self) -> Domain {
        match self {
            Service::Launchd {
                launchctl: Some(l), ..
            } => l.domain(),
            _ => Domain::Gui(nix::unistd::getuid().as_raw()),
        }
    }

    /// Where the job runs, for reports: `user` or `system` scope, or the launchd domain.
    pub(super) fn place(&self) -> String {
        match self {
            Service::Systemd { unit, .. } => unit.scope.to_string(),
            Service::Launchd { .. } => self.domain().to_string(),
        }
    }

    pub(super) fn scope(&self) -> Option<Scope> {
        match self {
            Service::Systemd { unit, .. } => Some(unit.scope),
            Service::Launchd { .. } => None,
        }
    }

    pub(super) fn plan_install(
        &self,
        settings: Settings,
        start: bool,
        force: bool,
        migrate: bool,
        now: u64,
        observed: &Observed,
    ) -> Result<Plan, PlanError> {
        macro_rules! req {
            ($spec:expr) => {
                InstallRequest {
                    spec: $spec.clone(),
                    settings,
                    start,
                    force,
                    migrate,
                    now,
                }
            };
        }
        match self {
            Service::Systemd { unit, .. } => planner::plan_install(&req!(unit), observed),
            Service::Launchd { agent, .. } => planner::plan_install(&req!(agent), observed),
        }
    }

    pub(super) fn plan_set(
        &self,
        settings: &Settings,
        observed: &Observed,
        restart: bool,
    ) -> Result<Plan, PlanError> {
        match self {
            Service::Systemd { unit, .. } => planner::plan_set(unit, settings, observed, restart),
            Service::Launchd { agent, .. } => planner::plan_set(agent, settings, observed, restart),
        }
    }

    pub(super) fn plan_unset(
        &self,
        keys: &[String],
        observed: &Observed,
        restart: bool,
    ) -> Result<Plan, PlanError> {
        match self {
            Service::Systemd { unit, .. } => planner::plan_unset(unit, keys, observed, restart),
            Service::Launchd { agent, .. } => planner::plan_unset(agent, keys, observed, restart),
        }
    }

    pub(super) fn plan_uninstall(&self, observed: &Observed, now: u64) -> Plan {
        match self {
            Service::Systemd { .. } => planner::plan_uninstall::<UnitSpec>(observed, now),
            Service::Launchd { .. } => planner::plan_uninstall::<LaunchAgent>(observed, now),
        }
    }
}
