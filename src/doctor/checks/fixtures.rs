//! Hand-built snapshots for the checks' tests: a healthy unit of ours, a legacy unit, a
//! profile home, and the short forms tests compare findings and plans by.

use std::path::PathBuf;

use crate::doctor::checks::{all, plan};
use crate::doctor::fix::{Action, FixPlan};
use crate::doctor::homes::{Homes, ProfileSnap};
use crate::doctor::snapshot::{Snapshot, UnitSnap};
use crate::doctor::{Finding, Severity};
use crate::gateway::pid_file::PidRecord;
use crate::profile::ProfileName;
use crate::systemd::scope::Scope;
use crate::systemd::UnitProperties;

pub(crate) const HOME: &str = "/nonexistent-doctor/.hermes";

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
        standing: vec![],
        secret_vars: vec![],
        lock_holder: None,
        outbox_journal: home.join("outbox/journal.jsonl"),
        agent_idle_alarm: None,
        clustered: Some(false),
        membership: None,
        held: vec![],
        hermes: vec![],
        access: vec![],
        pairing_error: None,
        home,
    }
}

/// A snapshot of `units` and `profiles`, the units also seen as services beside the homes,
/// as gathering builds it.
pub(crate) fn snap(units: Vec<UnitSnap>, profiles: Vec<ProfileSnap>) -> Snapshot {
    Snapshot {
        homes: homes(&units, profiles),
        units,
        ..Snapshot::default()
    }
}

/// The profile homes alone, with `units` as the services that run them: what the
/// manager-neutral checks read.
pub(crate) fn homes(units: &[UnitSnap], profiles: Vec<ProfileSnap>) -> Homes {
    Homes {
        profiles,
        services: units.iter().map(UnitSnap::as_service).collect(),
        ..Homes::default()
    }
}

pub(crate) fn ids(f: &[Finding]) -> Vec<(&str, Severity)> {
    f.iter().map(|f| (f.id, f.severity)).collect()
}

pub(crate) fn pid_record(p: &ProfileSnap, pid: u32, profile: &str) -> PidRecord {
    PidRecord {
        pid,
        profile: profile.into(),
        home: p.home.clone(),
        started_at: "2026-01-01T00:00:00Z".into(),
    }
}

pub(crate) fn rendered(p: &str) -> String {
    crate::systemd::unit_file::UnitSpec {
        profile: crate::profile::Profile::new(ProfileName::parse(p).unwrap(), HOME.into()).unwrap(),
        scope: Scope::User,
        exec: "/usr/bin/hermes-svc".into(),
        run_as: None,
        role: crate::service::role::Role::Gateway,
    }
    .render()
    .unwrap()
}

pub(crate) fn fix_ids(p: &FixPlan) -> Vec<(&str, &str)> {
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

pub(crate) fn planned(s: &Snapshot) -> FixPlan {
    plan(s, &all(s), 1000)
}
