//! `adopt`: switch a profile from Hermes's own gateway to hermes-svc, or back (`--undo`).
//!
//! The order is the switch's whole point (docs/adopt.md): everything slow (reading, mapping,
//! the backups) happens while Hermes still runs; then Hermes's gateway is stopped, its state
//! moved and the files written, the units installed with `--migrate`, and the gateway
//! started last. Each step checks before it acts, and the record (`agent/adopt/`) says how
//! far a run got, so a run killed anywhere converges when run again.

use std::path::{Path, PathBuf};

use super::args::{AdoptArgs, AgentKind, InstallArgs, OutputArgs, UninstallArgs, UnitArgs};
use super::error::CliError;
use super::service::{self, Service, Spec};
use crate::adopt::manifest::{HermesJob, Manifest, Phase, Record};
use crate::adopt::{self, switch, AdoptError};
use crate::edit_lock::EditLock;
use crate::exit_code;
use crate::service::observed::Siblings;
use crate::service::plan::{Plan, Step};
use crate::systemd::Job;

pub(super) async fn run(args: AdoptArgs) -> Result<u8, CliError> {
    let manager = service::manager(&args.source.scope)?;
    let spec = service::spec(manager, &args.source)?;
    let profile = spec.profile().clone();
    let home = profile.home();
    let agent_home = crate::agent::hermes::home(&profile);
    let record = Record::new(&profile.agent_dir());
    // One adopt (or undo) of a profile at a time: the lock is on the home itself, so a
    // refused run leaves nothing behind, not even a directory.
    let _lock = match args.dry_run || !home.is_dir() {
        true => None,
        false => Some(EditLock::acquire(&home, crate::edit_lock::WAIT).await?),
    };
    let manifest = record.read()?;
    if args.undo {
        return undo(&args, spec, &home, &agent_home, &record, manifest).await;
    }
    if let Some(m) = manifest.as_ref().filter(|m| m.phase == Phase::Done) {
        println!(
            "profile {}: unchanged: adopted at {} (hermes-svc adopt --undo --profile {} switches back)",
            profile.name(),
            m.started_at,
            profile.name()
        );
        return Ok(exit_code::OK);
    }
    // A run that backed up maps from its copies: the originals may be half switched by now.
    let source = match &manifest {
        Some(_) => record.backup_dir(),
        None => home.clone(),
    };
    let planned = adopt::plan::plan(&source, &home, args.relay_port)?;
    for line in &planned.report {
        println!("{line}");
    }
    if args.dry_run {
        return dry_run(&args, &home, &agent_home, &planned.switch).await;
    }
    let mut manifest = match manifest {
        Some(m) => m,
        None => first_run(&home, &agent_home, &record, &planned.switch)?,
    };
    crate::test_hook::kill_at("adopt", "backed-up");
    // From here the originals move and split: what the mapping read is in the record.
    let source = record.backup_dir();

    let agent = spec.with_role(crate::service::role::Role::Agent {
        hermes: Default::default(),
    });
    let mut service = spec
        .with_role(crate::service::role::Role::Gateway)
        .connect(false)
        .await?;
    service.watch_jobs(args.wait.timeout, None);
    stop_hermes(&service, &record, &mut manifest).await?;
    if let Some(pid) = crate::agent::hermes::look(&home).and_then(|seen| seen.pid) {
        return Err(CliError::Usage(format!(
            "a Hermes gateway (pid {pid}) runs in {} under no unit this manager knows (started by hand, or by launchd's detached fallback); stop it and run adopt again: nothing of it has moved",
            home.display()
        )));
    }
    crate::test_hook::kill_at("adopt", "stopped");
    for line in switch::apply(&home, &agent_home, &planned.switch)? {
        println!("{line}");
    }
    for line in adopt::plan::merge_pairings(&source, &planned, &profile)? {
        println!("{line}");
    }
    crate::test_hook::kill_at("adopt", "switched");
    super::install::install(install_args(&args, &planned.switch)).await?;
    crate::test_hook::kill_at("adopt", "installed");
    service.watch_jobs(args.wait.timeout, super::progress::watcher(false));
    let name = service.run_job(Job::Start).await?;
    // Under systemd the gateway's unit wants the agent's; a LaunchAgent starts only itself.
    let mut agent = agent.connect(false).await?;
    agent.watch_jobs(args.wait.timeout, None);
    agent.run_job(Job::Start).await?;
    manifest.phase = Phase::Done;
    record.write(&manifest)?;
    println!(
        "adopted: {name} holds the platforms, Hermes runs as the agent in {}; `hermes-svc adopt --undo --profile {}` switches back",
        agent_home.display(),
        profile.name()
    );
    Ok(exit_code::OK)
}

/// The first run's checks and backups, before anything of Hermes's changes.
fn first_run(
    home: &Path,
    agent_home: &Path,
    record: &Record,
    switch: &switch::Switch,
) -> Result<Manifest, CliError> {
    if home.join("gateway.toml").exists() {
        return Err(CliError::Usage(format!(
            "{} already exists: adopt switches a profile that Hermes's own gateway runs alone; move it aside (or adopt another profile) and run adopt again",
            home.join("gateway.toml").display()
        )));
    }
    let mut rewritten: Vec<String> = switch::REWRITTEN.iter().map(|p| (*p).to_owned()).collect();
    rewritten.extend(switch.files.iter().map(|f| f.0.display().to_string()));
    let read = adopt::plan::read_files(home);
    let rewritten: Vec<&str> = rewritten.iter().map(String::as_str).collect();
    let read: Vec<&str> = read.iter().map(String::as_str).collect();
    // The copies first: the manifest that names them is written last, so a run killed before
    // it starts over from the untouched originals.
    let copies = record.back_up(home, &read)?;
    let manifest = Manifest {
        version: 1,
        started_at: crate::service::planner::now(),
        phase: Phase::BackedUp,
        copies,
        originals: record.back_up(home, &rewritten)?,
        hermes_jobs: None,
        agent_home_existed: agent_home.exists(),
    };
    record.write(&manifest)?;
    Ok(manifest)
}

/// Stop every Hermes gateway job serving the profile, recording each as first seen (a later
/// run sees them stopped, or moved aside by `--migrate`), so that undo brings them back as
/// they were. The stop job returns once the unit's processes are gone: from here no poller runs.
async fn stop_hermes(
    service: &Service,
    record: &Record,
    manifest: &mut Manifest,
) -> Result<(), CliError> {
    let observed = service.observe(Siblings::Find).await?;
    let mut jobs: Vec<HermesJob> = observed
        .foreign
        .iter()
        .map(|f| HermesJob {
            name: f.name.clone(),
            path: f.fragment_path.clone(),
            enabled: f.enabled,
            active: f.active,
        })
        .collect();
    // A named profile's Hermes unit has our unit's name and path.
    if service.foreign_at_our_path(&observed) {
        jobs.push(HermesJob {
            name: observed.name.clone(),
            path: Some(observed.path.clone()),
            enabled: observed.enabled(),
            active: observed.active(),
        });
    }
    if manifest.hermes_jobs.is_none() {
        manifest.hermes_jobs = Some(jobs.clone());
        record.write(manifest)?;
    }
    let mut plan = Plan::new(observed.name.clone());
    for job in jobs.iter().filter(|j| j.active) {
        plan.push(Step::Stop {
            unit: job.name.clone(),
        });
    }
    if !plan.is_unchanged() {
        service.apply(&plan).await?;
        for step in &plan.steps {
            println!("{step}");
        }
    }
    Ok(())
}

/// What `install --agent hermes --migrate --no-start` would do, with adopt's own source.
fn install_args(args: &AdoptArgs, switch: &switch::Switch) -> InstallArgs {
    InstallArgs {
        source: args.source.clone(),
        env: switch
            .proxy
            .iter()
            .map(|p| format!("HTTPS_PROXY={p}"))
            .collect(),
        credentials: vec![],
        watchdog_sec: None,
        restart_sec: None,
        agent: Some(AgentKind::Hermes),
        agent_exec: args.agent_exec.clone(),
        no_start: true,
        force: false,
        migrate: true,
        dry_run: args.dry_run,
        json: false,
        wait: args.wait,
    }
}

async fn dry_run(
    args: &AdoptArgs,
    home: &Path,
    agent_home: &Path,
    switch: &switch::Switch,
) -> Result<u8, CliError> {
    println!("would stop Hermes's gateway job(s) serving the profile");
    for name in crate::adopt::state::pending(home, agent_home)? {
        println!(
            "would move {} to {}",
            home.join(name).display(),
            agent_home.display()
        );
    }
    for line in switch::describe(home, agent_home, switch) {
        println!("would {line}");
    }
    // The agent unit's install checks gateway.toml, which is not written yet: the gateway's
    // plan shows every bus call, and the agent's is the same install's second job.
    let mut gateway_only = install_args(args, switch);
    gateway_only.agent = None;
    super::install::install(gateway_only).await?;
    println!(
        "would install hermes-agent-{}.service (install --agent hermes), then start the gateway, and with it the agent",
        args.source.profile
    );
    Ok(exit_code::OK)
}

async fn undo(
    args: &AdoptArgs,
    spec: Spec,
    home: &Path,
    agent_home: &Path,
    record: &Record,
    manifest: Option<Manifest>,
) -> Result<u8, CliError> {
    let Some(manifest) = manifest else {
        return Err(CliError::Usage(format!(
            "profile {} was not adopted (no {}): nothing to undo",
            spec.profile().name(),
            record.dir().display()
        )));
    };
    if args.dry_run {
        println!("would uninstall the gateway and agent units, move Hermes's state back from {}, restore each file adopt changed from {}, and bring back Hermes's gateway job", agent_home.display(), record.dir().display());
        return Ok(exit_code::OK);
    }
    super::install::uninstall(UninstallArgs {
        unit: UnitArgs {
            profile: args.source.profile.clone(),
            scope: args.source.scope.clone(),
        },
        output: OutputArgs {
            dry_run: false,
            json: false,
        },
    })
    .await?;
    for line in switch::undo(home, agent_home, record, &manifest)? {
        println!("{line}");
    }
    for line in adopt::plan::restore_cron(&record.backup_dir(), home)? {
        println!("{line}");
    }
    let mut service = spec.connect(false).await?;
    service.watch_jobs(args.wait.timeout, None);
    let plan = bring_back(&manifest);
    service.apply(&plan).await?;
    for step in &plan.steps {
        println!("{step}");
    }
    let jobs = manifest.hermes_jobs.clone().unwrap_or_default();
    for job in jobs.iter().filter(|j| j.active) {
        let Some(path) = &job.path else { continue };
        service.start_other(&job.name, path).await?;
        println!("start {}", job.name);
    }
    record.remove()?;
    println!("undone: Hermes's own gateway serves the profile again");
    Ok(exit_code::OK)
}

/// Hermes's jobs as the manifest found them: each file put back from where `--migrate` moved
/// it, and enabled again if it was (each started again after, from its file).
fn bring_back(manifest: &Manifest) -> Plan {
    let jobs = manifest.hermes_jobs.clone().unwrap_or_default();
    let mut plan = Plan::new(jobs.first().map(|j| j.name.clone()).unwrap_or_default());
    for job in &jobs {
        let Some(path) = &job.path else { continue };
        if !path.exists() {
            if let Some(aside) = newest_aside(path) {
                plan.push(Step::PutBack {
                    from: aside,
                    to: path.clone(),
                });
            }
        }
    }
    plan.push(Step::Reload);
    for job in &jobs {
        if job.enabled {
            plan.push(Step::Enable {
                unit: job.name.clone(),
            });
        }
    }
    if jobs.iter().any(|j| j.enabled) {
        plan.push(Step::Reload);
    }
    plan
}

/// The latest `NAME.migrated.SECONDS` beside `path`: where `--migrate` moved it.
fn newest_aside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let prefix = format!("{name}.migrated.");
    std::fs::read_dir(path.parent()?)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let file = e.file_name().to_str()?.to_owned();
            let at: u64 = file.strip_prefix(&prefix)?.parse().ok()?;
            Some((at, e.path()))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, p)| p)
}

impl From<AdoptError> for CliError {
    fn from(e: AdoptError) -> Self {
        CliError::Adopt(e)
    }
}
