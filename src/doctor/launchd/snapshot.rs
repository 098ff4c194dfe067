//! The one look at a launchd user the launchd doctor takes per run: the gateway job files in
//! `~/Library/LaunchAgents` and what launchd says of each, beside the manager-neutral profile
//! homes ([`Homes`]) they and the caller run with, the same look the systemd doctor takes.
//!
//! All impure work happens here, so the checks stay pure. launchctl that cannot be asked is
//! recorded, not fatal: every file-based finding is still made from what is on disk.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::bounded_read::{self, Owner};
use crate::doctor::homes::{Homes, ServiceSnap};
use crate::doctor::DoctorError;
use crate::launchd::launchctl::{Domain, JobState, JobStatus, Launchctl, Service};
use crate::launchd::plist::{profile_of_file, Job, AGENTS_DIR, FILE_SUFFIX};
use crate::profile::ProfileName;
use crate::service::observed::sticky_profile;
use crate::service::served_profile::{served_profile, unit_hermes_home, ServedProfile};
use crate::systemd::scope::Scope;

/// Every file or label that starts with this is a gateway job doctor looks at: ours
/// (`ai.hermes.gateway.<profile>`) and hermes-agent's own (`ai.hermes.gateway`,
/// `ai.hermes.gateway-<profile>`), as `hermes-gateway*.service` is on systemd.
pub(crate) const GATEWAY_JOB_PREFIX: &str = "ai.hermes.gateway";

/// launchd's `PATH` for a job that sets none, which `execvp(3)` searches for a bare
/// `ProgramArguments[0]` (launchd.plist(5): "Please read execvp(3) very carefully!"; launchd
/// exports `_PATH_STDPATH` to its jobs).
pub(crate) const LAUNCHD_DEFAULT_PATH: &str = "/usr/bin:/bin:/usr/sbin:/sbin";

/// What launchd said of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Launchd {
    /// launchctl could not be run at all; [`LaunchdSnapshot::launchctl_problem`] says why.
    NotAsked,
    /// The file has no `Label`, so there is nothing to ask launchd about.
    NoLabel,
    /// launchctl answered, but not about this job.
    Failed(String),
    NotLoaded,
    Loaded(JobStatus),
}

/// One gateway job file.
#[derive(Clone, Debug)]
pub(crate) struct JobSnap {
    /// `ai.hermes.gateway.coder.plist`: how findings name the job, unique on disk.
    pub(crate) file_name: String,
    pub(crate) path: PathBuf,
    pub(crate) job: Job,
    /// `HERMES_HOME` the job runs with (its `EnvironmentVariables`, else the default home).
    pub(crate) hermes_home: PathBuf,
    /// The sticky `active_profile` in that home, which a job without `--profile` follows.
    pub(crate) sticky: Option<ProfileName>,
    /// Why the program the job runs cannot run, when it cannot.
    pub(crate) program_problem: Option<String>,
    pub(crate) launchd: Launchd,
}

impl JobSnap {
    /// `EnvironmentVariables` as `KEY=value` entries, the shape systemd reports.
    fn environment(&self) -> Vec<String> {
        env_entries(&self.job.env)
    }

    /// What the job's argv says about the profile it serves; `None` when it runs no gateway.
    pub(crate) fn served(&self) -> Option<ServedProfile> {
        served_profile(
            std::slice::from_ref(&self.job.arguments),
            &self.environment(),
            self.sticky.as_ref(),
        )
    }

    /// The profile the job serves, judged from its argv; else the profile its file name says
    /// it is for, when it is one of ours.
    pub(crate) fn profile(&self) -> Option<ProfileName> {
        self.served()
            .and_then(|s| s.profile)
            .or_else(|| self.ours())
    }

    /// The profile, when the file carries our name (`ai.hermes.gateway.<profile>.plist`), so
    /// that it is install's to rewrite and never a migration target.
    pub(crate) fn ours(&self) -> Option<ProfileName> {
        profile_of_file(&self.file_name)
    }

    /// The pid launchd runs the job as, when it is running.
    pub(crate) fn pid(&self) -> Option<u32> {
        match &self.launchd {
            Launchd::Loaded(st) => st.pid,
            _ => None,
        }
    }

    /// The job as the profile-home checks see it: what it serves (judged from its argv alone,
    /// as for a unit) and the process launchd runs it as. A LaunchAgent is the user's.
    pub(crate) fn as_service(&self) -> ServiceSnap {
        ServiceSnap {
            name: self.job.label.clone().unwrap_or(self.file_name.clone()),
            serves: self.served().and_then(|s| s.profile),
            hermes_home: self.hermes_home.clone(),
            scope: Scope::User,
            active: matches!(&self.launchd, Launchd::Loaded(st) if st.state == JobState::Running),
            pid: self.pid().filter(|pid| *pid != 0),
        }
    }
}

/// A file in the agents directory, named as a gateway job, that is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub(crate) file_name: String,
    pub(crate) path: PathBuf,
    pub(crate) why: String,
}

/// Everything the launchd checks look at.
#[derive(Clone, Debug)]
pub(crate) struct LaunchdSnapshot {
    /// `~/Library/LaunchAgents`.
    pub(crate) agents_dir: PathBuf,
    /// The domain launchd was asked in; `gui/<uid>` when it could not be asked, for fixes.
    pub(crate) domain: Domain,
    /// Why launchctl could not be asked at all.
    pub(crate) launchctl_problem: Option<String>,
    /// Why the agents directory could not be listed (a missing one is simply empty).
    pub(crate) agents_problem: Option<String>,
    pub(crate) jobs: Vec<JobSnap>,
    pub(crate) unreadable: Vec<Unreadable>,
    /// The profile homes the jobs and the caller run with, and the jobs seen as services: all
    /// the manager-neutral checks (`.env` mode, pid file, shared token, config, ...) read.
    pub(crate) homes: Homes,
}

impl LaunchdSnapshot {
    /// A snapshot of `jobs` alone, for tests and for [`gather`] to fill in.
    pub(crate) fn new(agents_dir: PathBuf, domain: Domain, jobs: Vec<JobSnap>) -> Self {
        let homes = Homes {
            services: jobs.iter().map(JobSnap::as_service).collect(),
            ..Homes::default()
        };
        Self {
            agents_dir,
            domain,
            launchctl_problem: None,
            agents_problem: None,
            jobs,
            unreadable: vec![],
            homes,
        }
    }
}

/// Take the snapshot. Fails only when there is nothing at all to look at: no home directory,
/// or launchctl that cannot be asked with neither an agents directory nor a profile home.
pub(crate) async fn gather() -> Result<LaunchdSnapshot, DoctorError> {
    let home_dir = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| {
            DoctorError::LaunchdBlind(
                "HOME is not set, so ~/Library/LaunchAgents cannot be found".into(),
            )
        })?;
    let agents_dir = home_dir.join(AGENTS_DIR);
    let default_home = home_dir.join(".hermes");
    let uid = nix::unistd::getuid().as_raw();
    let (launchctl, launchctl_problem) =
        match Launchctl::detect(Launchctl::DEFAULT_PROGRAM, uid).await {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(crate::error_chain::one_line(&e))),
        };
    let domain = launchctl
        .as_ref()
        .map_or(Domain::Gui(uid), Launchctl::domain);
    let (files, agents_problem) = match list_agents(&agents_dir) {
        Ok(files) => (files, None),
        Err(why) => (vec![], Some(why)),
    };
    let mut jobs = vec![];
    let mut unreadable = vec![];
    for (file_name, path) in files {
        let named = file_name.starts_with(GATEWAY_JOB_PREFIX);
        let job = match bounded_read::read(&path, bounded_read::LIMIT, Owner::SelfRootOrDirectory) {
            Ok(Some(bytes)) => Job::parse(&bytes).map_err(|e| e.to_string()),
            // Removed between listing and reading: nothing left to diagnose.
            Ok(None) => continue,
            Err(e) => Err(e.to_string()),
        };
        let job = match job {
            Ok(job) if named || job.label.as_deref().is_some_and(is_gateway_label) => job,
            // Not a gateway's file: not doctor's business.
            Ok(_) => continue,
            Err(why) if named => {
                unreadable.push(Unreadable {
                    file_name,
                    path,
                    why,
                });
                continue;
            }
            Err(_) => continue,
        };
        let hermes_home = unit_hermes_home(&env_entries(&job.env)).unwrap_or(default_home.clone());
        let launchd = match (&launchctl, job.label.as_deref()) {
            (None, _) => Launchd::NotAsked,
            (Some(_), None) => Launchd::NoLabel,
            (Some(l), Some(label)) => match l.status(label).await {
                Ok(Service::Loaded(st)) => Launchd::Loaded(st),
                Ok(Service::NotLoaded) => Launchd::NotLoaded,
                Err(e) => Launchd::Failed(crate::error_chain::one_line(&e)),
            },
        };
        jobs.push(JobSnap {
            sticky: sticky_profile(&hermes_home),
            program_problem: program_problem(&job),
            file_name,
            path,
            job,
            hermes_home,
            launchd,
        });
    }
    let env_home = crate::profile::hermes_home_from_env();
    if launchctl_problem.is_some()
        && !agents_dir.is_dir()
        && !env_home.as_ref().is_ok_and(|h| h.is_dir())
    {
        return Err(DoctorError::LaunchdBlind(format!(
            "launchd cannot be asked ({}) and neither {} nor a profile home exists",
            launchctl_problem.unwrap_or_default(),
            agents_dir.display()
        )));
    }
    let mut snap = LaunchdSnapshot::new(agents_dir, domain, jobs);
    snap.launchctl_problem = launchctl_problem;
    snap.agents_problem = agents_problem;
    snap.unreadable = unreadable;
    let mut homes: BTreeSet<PathBuf> = snap.jobs.iter().map(|j| j.hermes_home.clone()).collect();
    homes.extend(env_home.ok());
    snap.homes = Homes::gather(homes, std::mem::take(&mut snap.homes.services)).await;
    Ok(snap)
}

fn is_gateway_label(label: &str) -> bool {
    label.starts_with(GATEWAY_JOB_PREFIX)
}

fn env_entries(env: &BTreeMap<String, String>) -> Vec<String> {
    env.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The `*.plist` files in the agents directory, sorted by name. launchd loads only files
/// whose name ends in `.plist`, so a backup (`<name>.plist.migrated.<time>`) is not a job.
fn list_agents(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.ends_with(FILE_SUFFIX).then(|| (name, e.path()))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Why launchd could not start the job's program, or `None` when it can: `Program`, else
/// `ProgramArguments[0]`, which launchd hands to `execvp(3)`, so a bare name is looked up in
/// the job's `PATH` (launchd's default when it sets none). Symlinks are followed, as exec does.
pub(crate) fn program_problem(job: &Job) -> Option<String> {
    let Some(program) = job.program.as_deref().filter(|p| !p.is_empty()) else {
        return Some("is not named (the job has neither Program nor ProgramArguments)".into());
    };
    if !program.contains('/') {
        let path = job
            .env
            .get("PATH")
            .map_or(LAUNCHD_DEFAULT_PATH, String::as_str);
        let found = path
            .split(':')
            .filter(|d| !d.is_empty())
            .any(|d| runnable(&Path::new(d).join(program)).is_none());
        return (!found).then(|| format!("{program} is not found on the job's PATH ({path})"));
    }
    // launchd starts jobs in `/` unless WorkingDirectory says otherwise.
    let base = job
        .raw
        .get("WorkingDirectory")
        .and_then(plist::Value::as_string)
        .unwrap_or("/");
    runnable(&Path::new(base).join(program)).map(|why| format!("{program} {why}"))
}

/// Why `path` cannot be executed, or `None` when it can.
fn runnable(path: &Path) -> Option<String> {
    use nix::unistd::{access, AccessFlags};
    match std::fs::metadata(path) {
        Err(_) => Some("does not exist".into()),
        Ok(m) if !m.is_file() => Some("is not a regular file".into()),
        Ok(_) if access(path, AccessFlags::X_OK).is_err() => Some("is not executable".into()),
        Ok(_) => None,
    }
}
