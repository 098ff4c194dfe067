//! `doctor` under launchd: the same report as under systemd, read from the user's
//! LaunchAgents directory and `launchctl` instead of systemd's bus.
//!
//! As on systemd, gathering happens once, in [`snapshot`], and every check in [`CHECKS`] is a
//! pure function of that snapshot, with the id of the systemd check of the same meaning. The
//! checks of a profile's home (`.env` mode, pid file, shared token, config), of a bot's
//! standing with its platform (a login to renew, a setting on the platform that keeps it deaf) and of the outbox do not
//! depend on the manager: they are systemd's own, run over the same neutral look at the profile
//! homes ([`Homes`](crate::doctor::homes::Homes)), with the jobs in the units' place.
//!
//! `doctor --fix` applies only the manager-neutral fixes here (`chmod 600` of a `.env`, and a
//! dead pid file's removal where `/proc` lets it be re-checked); it does not change launchd
//! jobs yet, and says so for each finding, with the command to run by hand.

mod checks;
pub(crate) mod snapshot;

use crate::doctor::checks::{
    access, agent, bot_account, cluster, on_homes, outbox, profile_home, reload, Check,
};
use crate::doctor::fix::Planner;
use crate::doctor::{self, DoctorError, Finding, FixOutcome, Report, Severity};
use crate::profile::ProfileName;

use snapshot::{JobSnap, LaunchdSnapshot};

/// Why `--fix` leaves a launchd job finding alone.
pub(crate) const NOT_YET: &str = "doctor --fix does not change launchd jobs yet; run the fix shown";

/// One finding under launchd, with the id of the systemd check of the same meaning, or a new one.
pub(crate) type LaunchdCheck = Check<LaunchdSnapshot>;

/// Every check, in id order.
pub(crate) const CHECKS: [LaunchdCheck; 24] = [
    checks::LAUNCHD,
    checks::DUPLICATE_JOBS,
    checks::REPLACE,
    checks::NO_PROFILE,
    checks::KEEP_ALIVE,
    on_homes!(profile_home::SHARED_TOKEN),
    on_homes!(profile_home::PID_FILE),
    on_homes!(profile_home::ENV_MODE),
    checks::PROGRAM_MISSING,
    on_homes!(profile_home::CONFIG),
    checks::LABEL_MISMATCH,
    on_homes!(bot_account::NEEDS_LOGIN),
    on_homes!(bot_account::PLATFORM_REFUSES),
    on_homes!(outbox::OUTBOX_UNAVAILABLE),
    on_homes!(agent::AGENT_IDLE),
    on_homes!(agent::HERMES_HOLDS_PLATFORM),
    on_homes!(cluster::CLUSTER_UNREACHABLE),
    on_homes!(cluster::NODE_NAME_CLASH),
    on_homes!(cluster::CLOCK_SKEW),
    on_homes!(cluster::LEFT_THE_CLUSTER),
    on_homes!(access::ANYONE_CAN_REACH),
    on_homes!(access::NOBODY_ADMITTED),
    on_homes!(access::PAIRING_STORE),
    on_homes!(reload::RELOAD_REFUSED),
];

/// Every finding in `s`, in id order.
pub(crate) fn all(s: &LaunchdSnapshot) -> Vec<Finding> {
    CHECKS.iter().flat_map(|c| (c.find)(s)).collect()
}

fn report(s: &LaunchdSnapshot, only: Option<&ProfileName>) -> Report {
    let mut report = Report { findings: all(s) };
    if let Some(p) = only {
        report.narrow(p);
    }
    report
}

/// Gather a snapshot and run every check over it.
pub(crate) async fn run(only: Option<&ProfileName>) -> Result<Report, DoctorError> {
    Ok(report(&snapshot::gather().await?, only))
}

/// `doctor --fix`: plan from one snapshot's findings, apply, then look again.
pub(crate) async fn run_fix(only: Option<&ProfileName>) -> Result<FixOutcome, DoctorError> {
    let snap = snapshot::gather().await?;
    let findings = report(&snap, only).findings;
    // No unit fixes: launchd jobs are left to the person, each finding with its command.
    let mut planner = Planner::new(&snap.homes, &[], &findings, crate::service::planner::now());
    for f in &findings {
        match CHECKS.iter().find(|c| c.id == f.id) {
            Some(check) => (check.fix)(&mut planner, f),
            None => planner.skip(f, "no automatic fix"),
        }
    }
    doctor::apply_and_look_again(planner.finish(), run(only)).await
}

/// A finding about one job file, named by its file.
pub(crate) fn job_finding(
    id: &'static str,
    severity: Severity,
    j: &JobSnap,
    message: String,
    fix: String,
) -> Finding {
    Finding {
        id,
        severity,
        subject: j.file_name.clone(),
        message,
        fix,
        profile: j.profile(),
        units: vec![(None, j.file_name.clone())],
    }
}

/// The fix for a job whose definition is wrong: install rewrites ours (`--force`, since the
/// file is not what it rendered), and migrates away from one that is not ours (it boots it
/// out and keeps its file as a backup).
pub(crate) fn rewrite_fix(j: &JobSnap) -> String {
    match (j.ours(), j.profile()) {
        (Some(p), _) => format!("hermes-svc install --profile {p} --force"),
        (None, Some(p)) => format!("hermes-svc install --profile {p} --migrate"),
        (None, None) => "hermes-svc install --profile NAME --migrate".into(),
    }
}
