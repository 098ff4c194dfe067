//! The registry of checks: one [`Check`] per finding id, each holding how the finding is
//! found and what `doctor --fix` does about it, side by side.
//!
//! Both halves are pure functions of one [`Snapshot`] (and, for the fix, the run's findings),
//! so each finding is tested in its group's file with a hand-built snapshot: one case that
//! produces it and one near miss that must not. The groups are named after what they look
//! at; the order of [`CHECKS`] is the order of the report. `profile_home`, `bot_account` and
//! `outbox` look at the profile homes alone ([`Homes`](crate::doctor::homes::Homes)), so
//! launchd's registry
//! (`doctor::launchd`) holds them too, through [`on_homes`].

pub(crate) mod access;
pub(crate) mod agent;
pub(crate) mod bot_account;
pub(crate) mod cluster;
mod machine;
pub(crate) mod outbox;
pub(crate) mod profile_home;
pub(crate) mod reload;
mod runtime;
mod secrets;
mod siblings;
mod unit_file;

#[cfg(test)]
pub(crate) mod fixtures;

use crate::doctor::fix::{FixPlan, Planner};
use crate::doctor::homes::ProfileSnap;
use crate::doctor::snapshot::{Snapshot, UnitSnap};
use crate::doctor::{Finding, Severity};
use crate::profile::{profile_of_unit, ProfileName};
use crate::systemd::scope::Scope;

/// One finding: how it is found and how `--fix` answers it. A new finding is one more entry
/// in [`CHECKS`], so that a finding without a decided fix cannot be written. `S` is what it
/// looks at: systemd's [`Snapshot`], launchd's (`doctor::launchd`), which keeps the ids, or
/// the profile homes alone ([`Homes`](crate::doctor::homes::Homes)), for a check both
/// managers run.
pub(crate) struct Check<S = Snapshot> {
    /// `HSVnnn`, never reused for another meaning: the stable key of docs/doctor.md.
    pub(crate) id: &'static str,
    /// Every instance of the finding in a snapshot.
    pub(crate) find: fn(&S) -> Vec<Finding>,
    /// Plan the fix of one instance, or record why there is none and what to run by hand.
    pub(crate) fix: fn(&mut Planner, &Finding),
}

/// A check of the profile homes alone, in the registry of a snapshot that holds them as its
/// `homes`: systemd's [`Snapshot`] or launchd's. Same id, same fix.
macro_rules! on_homes {
    ($check:expr) => {
        $crate::doctor::checks::Check {
            id: $check.id,
            find: |s| ($check.find)(&s.homes),
            fix: $check.fix,
        }
    };
}
pub(crate) use on_homes;

/// Every check, in id order.
pub(crate) const CHECKS: [Check; 33] = [
    machine::BUS,
    siblings::DUPLICATE_UNITS,
    siblings::REPLACE,
    siblings::NO_PROFILE,
    unit_file::RESTART,
    unit_file::WATCHDOG,
    on_homes!(profile_home::SHARED_TOKEN),
    on_homes!(profile_home::PID_FILE),
    runtime::FAILED,
    unit_file::EDITED,
    unit_file::RELOAD,
    machine::LINGER,
    on_homes!(profile_home::ENV_MODE),
    runtime::DEAF,
    unit_file::EXEC_MISSING,
    on_homes!(profile_home::CONFIG),
    runtime::UNMANAGED_GATEWAY,
    runtime::STALE_SETTINGS,
    on_homes!(bot_account::NEEDS_LOGIN),
    on_homes!(bot_account::PLATFORM_REFUSES),
    secrets::SECRET_IN_UNIT,
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
    siblings::NOT_OURS_AT_OUR_NAME,
];

/// Every finding in `s`, in id order.
pub(crate) fn all(s: &Snapshot) -> Vec<Finding> {
    CHECKS.iter().flat_map(|c| (c.find)(s)).collect()
}

/// Decide, for every finding, the fix or why there is none: each finding goes to the fix of
/// the check that found it. Pure: reads only `s` and `findings`; `now` names backups.
pub(crate) fn plan(s: &Snapshot, findings: &[Finding], now: u64) -> FixPlan {
    let mut planner = Planner::new(&s.homes, &s.units, findings, now);
    for f in findings {
        match CHECKS.iter().find(|c| c.id == f.id) {
            Some(check) => (check.fix)(&mut planner, f),
            None => planner.skip(f, "no automatic fix"),
        }
    }
    planner.finish()
}

/// The profile a unit serves, judged from its `ExecStart`, `HERMES_HOME` and sticky file.
pub(crate) fn profile_of(u: &UnitSnap) -> Option<ProfileName> {
    u.served().and_then(|s| s.profile)
}

/// Whether the unit carries our name (`hermes-gateway-<profile>.service`), so that its file
/// is install's to rewrite and never a migration target.
pub(crate) fn is_ours(u: &UnitSnap) -> bool {
    profile_of_unit(&u.name).is_some()
}

/// A snapshot's units always carry their scope; one built without (by hand) is a user unit,
/// the common case.
fn scope_of(u: &UnitSnap) -> Scope {
    u.scope.unwrap_or(Scope::User)
}

fn flag(u: &UnitSnap) -> &'static str {
    scope_of(u).systemctl_flag()
}

/// `install` arguments that recreate the unit for `profile` in the unit's scope.
fn install_args(u: &UnitSnap, profile: &str) -> String {
    match u.scope {
        Some(Scope::System) => format!("--profile {profile} --system --run-as <user>"),
        _ => format!("--profile {profile}"),
    }
}

/// The fix for a unit whose definition is wrong: rewrite ours, or migrate away from a unit
/// that is not ours (install backs it up and replaces it with one of ours).
fn rewrite_fix(u: &UnitSnap) -> String {
    let profile = profile_of(u)
        .map(|p| p.to_string())
        .unwrap_or_else(|| "NAME".into());
    if profile_of_unit(&u.name).is_some() {
        format!("hermes-svc install {} --force", install_args(u, &profile))
    } else {
        format!("hermes-svc install {} --migrate", install_args(u, &profile))
    }
}

fn unit_finding(
    id: &'static str,
    severity: Severity,
    u: &UnitSnap,
    message: String,
    fix: String,
) -> Finding {
    Finding {
        id,
        severity,
        subject: u.name.clone(),
        message,
        fix,
        profile: profile_of(u),
        units: vec![u.key()],
    }
}

fn profile_finding(
    id: &'static str,
    severity: Severity,
    p: &ProfileSnap,
    message: String,
    fix: String,
) -> Finding {
    Finding {
        id,
        severity,
        subject: p.name.to_string(),
        message,
        fix,
        profile: Some(p.name.clone()),
        units: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn clean_snapshot_has_no_findings() {
        let s = snap(vec![ours("a"), ours("b")], vec![profile("a"), profile("b")]);
        assert_eq!(all(&s), vec![]);
    }

    #[test]
    fn unfixable_findings_say_why_and_show_the_command() {
        let mut u = ours("a");
        u.props.restart = Some("no".into());
        let s = snap(vec![u], vec![]);
        let fs = all(&s);
        let p = plan(&s, &fs, 1);
        assert!(p.fixes.is_empty());
        assert_eq!(p.skipped.len(), fs.len());
        assert_eq!(
            p.skipped[0].manual,
            "hermes-svc install --profile a --force"
        );
    }

    #[test]
    fn the_registry_holds_each_id_once_in_id_order() {
        let ids: Vec<_> = CHECKS.iter().map(|c| c.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
    }
}
