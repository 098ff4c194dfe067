//! The one place the CLI picks a manager: systemd (a scope and its D-Bus connection) or
//! launchd (the user's LaunchAgents and `launchctl` in the right domain). Every command plans
//! the same way through either; this says where the files are, how to look at the job, how to
//! carry a plan out and how to show it.

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
use crate::service::settings::Settings;
use crate::systemd::effects as systemd_effects;
use crate::systemd::observed as systemd_observed;
use crate::systemd::scope::Scope;
use crate::systemd::unit_file::UnitSpec;
use crate::systemd::{Job, Systemd};

/// The manager a command works through, connected unless this is a dry run that could not
/// reach it (then plans are made from the files on disk alone).
pub(super) enum Service {
    Systemd {
        scope: Scope,
        bus: Option<Systemd>,
    },
    Launchd {
        /// The user's home directory, which holds `Library/LaunchAgents`.
        home: PathBuf,
        launchctl: Option<Launchctl>,
    },
}

/// A profile's job as the chosen manager's file describes it.
pub(super) enum Spec {
    Unit(UnitSpec),
    Agent(LaunchAgent),
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

/// Where the edit lock lives: beside the definitions it guards.
pub(super) fn lock_dir(manager: Manager, scope: Scope) -> Result<PathBuf, CliError> {
    match manager {
        Manager::Systemd => scope
            .unit_dir()
            .ok_or_else(|| systemd_observed::ObserveError::NoUnitDir(scope).into()),
        Manager::Launchd => Ok(home_dir()?.join(AGENTS_DIR)),
    }
}

/// The job definition `install` and `render` would write for `src`, checked before anything
/// is touched.
pub(super) fn spec(manager: Manager, src: &UnitSource) -> Result<Spec, CliError> {
    match manager {
        Manager::Systemd => Ok(Spec::Unit(unit_spec(src)?)),
        Manager::Launchd => agent_spec(src).map(Spec::Agent),
    }
}

/// The definition of an installed profile, for `set`, `unset` and `uninstall`, which take no
/// `--exec`: the program is this binary, as at install. A unit is never rendered from this
/// (systemd's settings live in the drop-in), so only its profile matters there.
pub(super) fn spec_for(manager: Manager, scope: Scope, profile: Profile) -> Result<Spec, CliError> {
    Ok(match manager {
        Manager::Systemd => Spec::Unit(UnitSpec {
            profile,
            scope,
            exec: PathBuf::new(),
            run_as: None,
        }),
        Manager::Launchd => Spec::Agent(LaunchAgent::new(profile, exec_path(None)?)),
    })
}

/// The user's home directory, where `Library/LaunchAgents` is.
fn home_dir() -> Result<PathBuf, CliError> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| usage("HOME is not set, so there is no ~/Library/LaunchAgents to use"))
}

impl Service {
    pub(super) async fn connect(
        manager: Manager,
        scope: Scope,
        dry_run: bool,
    ) -> Result<Service, CliError> {
        match manager {
            Manager::Systemd => {
                let bus = match Systemd::connect(scope).await {
                    Ok(s) => Some(s),
                    Err(e) if dry_run => {
                        eprintln!("warning: {e}; planning from the files on disk alone");
                        None
                    }
                    Err(e) => return Err(e.into()),
                };
                Ok(Service::Systemd { scope, bus })
            }
            Manager::Launchd => {
                let home = home_dir()?;
                let uid = nix::unistd::getuid().as_raw();
                let launchctl = match Launchctl::detect(Launchctl::DEFAULT_PROGRAM, uid).await {
                    Ok(l) => Some(l),
                    Err(e) if dry_run => {
                        eprintln!("warning: {e}; planning from the files on disk alone");
                        None
                    }
                    Err(e) => return Err(e.into()),
                };
                Ok(Service::Launchd { home, launchctl })
            }
        }
    }

    pub(super) async fn observe(
        &self,
        spec: &Spec,
        siblings: Siblings,
    ) -> Result<Observed, CliError> {
        match (self, spec) {
            (Service::Systemd { scope, bus }, Spec::Unit(u)) => {
                Ok(systemd_observed::observe(&u.profile, *scope, bus.as_ref(), siblings).await?)
            }
            (Service::Launchd { home, launchctl }, Spec::Agent(a)) => {
                let agents = home.join(AGENTS_DIR);
                Ok(launchd_observed::observe(a, &agents, launchctl.as_ref(), siblings).await?)
            }
            _ => unreachable!("a spec is made by its own service"),
        }
    }

    /// Carry out `plan` (never on a dry run: those have no connection to use).
    pub(super) async fn apply(&self, plan: &Plan, spec: &Spec) -> Result<(), CliError> {
        match (self, spec) {
            (Service::Systemd { bus, .. }, _) => {
                let bus = bus.as_ref().expect("connected unless dry-run");
                Ok(systemd_effects::apply(plan, bus).await?)
            }
            (Service::Launchd { launchctl, home }, Spec::Agent(a)) => {
                let launchctl = launchctl.as_ref().expect("connected unless dry-run");
                let plist = a.path(home);
                let stdout = a.stdout_path();
                let log_dir = stdout.parent().unwrap_or(home);
                let agent = Agent {
                    plist: &plist,
                    log_dir,
                };
                Ok(launchd_effects::apply(plan, launchctl, agent).await?)
            }
            _ => unreachable!("a spec is made by its own service"),
        }
    }

    /// `start`, `stop` or `restart` the profile's job, and return its name. Under launchd, stop
    /// is `bootout` (KeepAlive would start a stopped process again), and restart of a job that
    /// is not loaded starts it, as `systemctl restart` starts a stopped unit.
    pub(super) async fn run_job(&self, job: Job, spec: &Spec) -> Result<String, CliError> {
        match (self, spec) {
            (Service::Systemd { bus, .. }, Spec::Unit(u)) => {
                let unit = u.profile.unit_name();
                let bus = bus
                    .as_ref()
                    .expect("connected: lifecycle commands have no dry run");
                bus.run_job(job, &unit).await?;
                Ok(unit)
            }
            (Service::Launchd { home, launchctl }, Spec::Agent(a)) => {
                let launchctl = launchctl.as_ref().expect("connected: no dry run here");
                let label = a.label();
                let plist = a.path(home);
                if job != Job::Stop && !plist.exists() {
                    return Err(usage(format!(
                        "profile {} is not installed ({} does not exist); run `hermes-svc install --profile {}` first",
                        a.profile.name(),
                        plist.display(),
                        a.profile.name()
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
                        let stdout = a.stdout_path();
                        if let Some(dir) = stdout.parent() {
                            launchd_effects::ensure_dir(dir)?;
                        }
                        launchctl.start(&label, &plist).await?
                    }
                }
                Ok(label)
            }
            _ => unreachable!("a spec is made by its own service"),
        }
    }

    /// The plan's steps as this manager carries them out.
    pub(super) fn describe(&self, plan: &Plan, spec: &Spec) -> Vec<String> {
        match (self, spec) {
            (Service::Launchd { home, .. }, Spec::Agent(a)) => {
                launchd_effects::describe(plan, self.domain(), &a.path(home))
            }
            _ => systemd_effects::describe(plan),
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
            Service::Systemd { scope, .. } => scope.to_string(),
            Service::Launchd { .. } => self.domain().to_string(),
        }
    }

    pub(super) fn scope(&self) -> Option<Scope> {
        match self {
            Service::Systemd { scope, .. } => Some(*scope),
            Service::Launchd { .. } => None,
        }
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
                    spec: $spec,
                    settings,
                    start,
                    force,
                    migrate,
                    now,
                }
            };
        }
        match self {
            Spec::Unit(u) => planner::plan_install(&req!(u.clone()), observed),
            Spec::Agent(a) => planner::plan_install(&req!(a.clone()), observed),
        }
    }

    pub(super) fn plan_set(
        &self,
        settings: &Settings,
        observed: &Observed,
        restart: bool,
    ) -> Result<Plan, PlanError> {
        match self {
            Spec::Unit(u) => planner::plan_set(u, settings, observed, restart),
            Spec::Agent(a) => planner::plan_set(a, settings, observed, restart),
        }
    }

    pub(super) fn plan_unset(
        &self,
        keys: &[String],
        observed: &Observed,
        restart: bool,
    ) -> Result<Plan, PlanError> {
        match self {
            Spec::Unit(u) => planner::plan_unset(u, keys, observed, restart),
            Spec::Agent(a) => planner::plan_unset(a, keys, observed, restart),
        }
    }

    pub(super) fn plan_uninstall(&self, observed: &Observed, now: u64) -> Plan {
        match self {
            Spec::Unit(_) => planner::plan_uninstall::<UnitSpec>(observed, now),
            Spec::Agent(_) => planner::plan_uninstall::<LaunchAgent>(observed, now),
        }
    }
}
