//! The launchd job checks: what a gateway's LaunchAgent file says (its argv, its `Label`, its
//! `KeepAlive`, the program it runs) and whether launchd could be asked about it. Each finding
//! has the id of the systemd check of the same meaning (docs/doctor.md), so a script that
//! reads doctor's JSON reads both platforms alike.

use std::path::PathBuf;

use plist::Value;

use crate::doctor::launchd::snapshot::{JobSnap, Launchd, LaunchdSnapshot};
use crate::doctor::launchd::{job_finding, rewrite_fix, LaunchdCheck, NOT_YET};
use crate::doctor::{Finding, Severity};
use crate::launchd::plist::{FILE_SUFFIX, THROTTLE_INTERVAL_SEC};
use crate::profile::ProfileName;
use crate::service::served_profile::same_home;

/// The exit status the gateway asks launchd for a restart with (`EX_TEMPFAIL`), and one a
/// crash leaves: `KeepAlive` must restart both.
const RESTART_ME: u8 = 75;
const CRASHED: u8 = 1;

/// HSV000: launchctl could not be asked, about anything or about one job, or a gateway's job
/// file does not read. What could be read is still checked; saying what was not beats a
/// silently partial report.
pub(crate) const LAUNCHD: LaunchdCheck = LaunchdCheck {
    id: "HSV000",
    find: launchd,
    fix: |p, f| p.skip(f, "doctor cannot read it"),
};

fn launchd(s: &LaunchdSnapshot) -> Vec<Finding> {
    let mut out = vec![];
    let machine = |subject: String, message: String, fix: String| Finding {
        id: LAUNCHD.id,
        severity: Severity::Warn,
        subject,
        message,
        fix,
        profile: None,
        units: vec![],
    };
    if let Some(why) = &s.launchctl_problem {
        out.push(machine(
            "launchd".into(),
            format!("could not ask launchd ({why}); whether each job is loaded and running was not checked, its file was."),
            format!(
                "run doctor as the logged-in user, where `launchctl print {}` answers",
                s.domain
            ),
        ));
    }
    if let Some(why) = &s.agents_problem {
        out.push(machine(
            s.agents_dir.display().to_string(),
            format!("{why}; no job file was checked."),
            format!("ls -ld {}", s.agents_dir.display()),
        ));
    }
    for u in &s.unreadable {
        out.push(Finding {
            profile: crate::launchd::plist::profile_of_file(&u.file_name),
            units: vec![(None, u.file_name.clone())],
            ..machine(
                u.file_name.clone(),
                format!(
                    "{} could not be read as a launchd job ({}); it was not checked.",
                    u.path.display(),
                    u.why
                ),
                format!("plutil -lint {}", u.path.display()),
            )
        });
    }
    for j in &s.jobs {
        if let Launchd::Failed(why) = &j.launchd {
            out.push(job_finding(
                LAUNCHD.id,
                Severity::Warn,
                j,
                format!("launchd would not say whether the job is loaded ({why}); its file was still checked."),
                format!(
                    "launchctl print {}",
                    s.domain.target(j.job.label.as_deref().unwrap_or_default())
                ),
            ));
        }
    }
    out
}

/// HSV001: two or more jobs serve the same profile; each one's gateway fights the others.
pub(crate) const DUPLICATE_JOBS: LaunchdCheck = LaunchdCheck {
    id: "HSV001",
    find: duplicate_jobs,
    fix: |p, f| p.skip(f, NOT_YET),
};

fn duplicate_jobs(s: &LaunchdSnapshot) -> Vec<Finding> {
    let mut groups: Vec<(ProfileName, PathBuf, Vec<&JobSnap>)> = vec![];
    for j in &s.jobs {
        let Some(p) = j.served().and_then(|sp| sp.profile) else {
            continue;
        };
        match groups
            .iter_mut()
            .find(|(gp, gh, _)| *gp == p && same_home(gh, &j.hermes_home))
        {
            Some(g) => g.2.push(j),
            None => groups.push((p, j.hermes_home.clone(), vec![j])),
        }
    }
    groups
        .into_iter()
        .filter(|g| g.2.len() > 1)
        .map(|(p, _, jobs)| {
            let names: Vec<String> = jobs
                .iter()
                .map(|j| format!("{} ({})", j.file_name, state(&j.launchd)))
                .collect();
            Finding {
                id: DUPLICATE_JOBS.id,
                severity: Severity::Error,
                subject: p.to_string(),
                message: format!(
                    "{} launchd jobs serve profile {p}: {}, so their gateways fight over it.",
                    names.len(),
                    names.join(", ")
                ),
                fix: format!("hermes-svc install --profile {p} --migrate"),
                profile: Some(p),
                units: jobs.iter().map(|j| (None, j.file_name.clone())).collect(),
            }
        })
        .collect()
}

/// What launchd said of a job, in a few words.
fn state(l: &Launchd) -> String {
    match l {
        Launchd::Loaded(st) => match st.pid {
            Some(pid) => format!("loaded, pid {pid}"),
            None => format!("loaded, {}", st.state),
        },
        Launchd::NotLoaded => "not loaded".into(),
        Launchd::NoLabel => "no Label".into(),
        Launchd::NotAsked | Launchd::Failed(_) => "loaded or not: unknown".into(),
    }
}

/// HSV002: `--replace` makes a starting gateway kill whoever holds the profile: with two jobs
/// that is the SIGTERM flap loop.
pub(crate) const REPLACE: LaunchdCheck = LaunchdCheck {
    id: "HSV002",
    find: replace,
    fix: |p, f| p.skip(f, NOT_YET),
};

fn replace(s: &LaunchdSnapshot) -> Vec<Finding> {
    s.jobs
        .iter()
        .filter(|j| j.served().is_some_and(|sp| sp.replace))
        .map(|j| {
            job_finding(
                REPLACE.id,
                Severity::Error,
                j,
                "ProgramArguments run the gateway with --replace, which kills any other gateway of the profile on start.".into(),
                rewrite_fix(j),
            )
        })
        .collect()
}

/// HSV003: without `--profile` the job serves whatever `active_profile` says today.
pub(crate) const NO_PROFILE: LaunchdCheck = LaunchdCheck {
    id: "HSV003",
    find: no_profile,
    fix: |p, f| p.skip(f, NOT_YET),
};

fn no_profile(s: &LaunchdSnapshot) -> Vec<Finding> {
    s.jobs
        .iter()
        .filter(|j| j.served().is_some_and(|sp| !sp.explicit))
        .map(|j| {
            let (severity, message) = match &j.sticky {
                Some(p) => (
                    Severity::Error,
                    format!("ProgramArguments have no --profile, so the job follows the sticky active_profile file (now {p}) and changes profile when that file does."),
                ),
                None => (
                    Severity::Warn,
                    "ProgramArguments have no --profile, so the job serves the default profile only until someone writes an active_profile file.".into(),
                ),
            };
            job_finding(NO_PROFILE.id, severity, j, message, rewrite_fix(j))
        })
        .collect()
}

/// HSV004: a `KeepAlive` that leaves a gateway that exits on its own down (launchd's form of
/// `Restart=` other than `always`), or that respawns a conflict forever. Under launchd the
/// gateway exits 0 only when it must stay down (a token conflict, a bad `gateway.toml`) and
/// non-zero when it wants a restart, so `KeepAlive = { SuccessfulExit = false }` is the one
/// setting that does both (see `crate::launchd::plist`).
pub(crate) const KEEP_ALIVE: LaunchdCheck = LaunchdCheck {
    id: "HSV004",
    find: keep_alive,
    fix: |p, f| p.skip(f, NOT_YET),
};

fn keep_alive(s: &LaunchdSnapshot) -> Vec<Finding> {
    s.jobs
        .iter()
        .filter(|j| j.served().is_some())
        .filter_map(|j| {
            let written = match &j.job.keep_alive {
                None => "absent".to_owned(),
                Some(Value::Boolean(b)) => b.to_string(),
                Some(Value::Dictionary(d)) => match d.get("SuccessfulExit") {
                    Some(Value::Boolean(b)) => format!("a dictionary with SuccessfulExit={b}"),
                    _ => "a dictionary without SuccessfulExit=false".to_owned(),
                },
                Some(_) => "not a boolean or a dictionary".to_owned(),
            };
            let mut problems = vec![];
            if !j.job.restarts_after_exit(RESTART_ME) || !j.job.restarts_after_exit(CRASHED) {
                problems.push(format!(
                    "KeepAlive is {written}, so a gateway that exits asking for a restart (status {RESTART_ME}) or crashes stays down."
                ));
            }
            if j.job.restarts_after_exit(0) {
                let every = j.job.throttle_interval.unwrap_or(THROTTLE_INTERVAL_SEC);
                problems.push(format!(
                    "KeepAlive is {written}, so launchd also restarts a gateway that exits 0, which is how it stops for a token conflict or a bad gateway.toml: it is respawned every {every} s (ThrottleInterval) forever."
                ));
            }
            if problems.is_empty() {
                return None;
            }
            Some(job_finding(
                KEEP_ALIVE.id,
                Severity::Warn,
                j,
                format!("{} It should be {{SuccessfulExit=false}}.", problems.join(" ")),
                rewrite_fix(j),
            ))
        })
        .collect()
}

/// HSV014: the program the job runs is gone or cannot be run (a moved or uninstalled binary).
/// launchd then fails every start with EX_CONFIG, every ThrottleInterval.
pub(crate) const PROGRAM_MISSING: LaunchdCheck = LaunchdCheck {
    id: "HSV014",
    find: program_missing,
    fix: |p, f| p.skip(f, NOT_YET),
};

fn program_missing(s: &LaunchdSnapshot) -> Vec<Finding> {
    s.jobs
        .iter()
        .filter_map(|j| {
            let why = j.program_problem.as_deref()?;
            Some(job_finding(
                PROGRAM_MISSING.id,
                Severity::Error,
                j,
                format!("The program the job runs {why}, so launchd cannot start it."),
                rewrite_fix(j),
            ))
        })
        .collect()
}

/// HSV018: a `Label` that does not match the file name. launchd.plist(5) expects a job's file
/// to be `<Label>.plist`; with another name, a tool that finds the job by its file (or the file
/// by its label) acts on nothing, and `bootout` by label misses a job loaded under the other.
/// No systemd equivalent: a unit's name is its file name.
///
/// The comparison ignores ASCII case: macOS's file systems are case-insensitive by default, so
/// `<Label>.plist` opens this very file, which is what launchd asks for.
pub(crate) const LABEL_MISMATCH: LaunchdCheck = LaunchdCheck {
    id: "HSV018",
    find: label_mismatch,
    fix: |p, f| p.skip(f, NOT_YET),
};

fn label_mismatch(s: &LaunchdSnapshot) -> Vec<Finding> {
    s.jobs
        .iter()
        .filter_map(|j| {
            let stem = j.file_name.strip_suffix(FILE_SUFFIX)?;
            let message = match j.job.label.as_deref() {
                Some(label) if label.eq_ignore_ascii_case(stem) => return None,
                Some(label) => format!(
                    "The job's Label is {label}, not {stem} as its file name says, so it is loaded and booted out under a name its file does not show."
                ),
                None => "The job has no Label, which launchd requires, so it is never loaded.".into(),
            };
            let fix = match (j.job.label.as_deref(), j.served().is_some() || j.ours().is_some()) {
                // A gateway's job is rewritten by install, after the one loaded under the wrong
                // label is booted out: install boots out only the label it writes.
                (Some(label), true) => bootout_then(s, j, label, &rewrite_fix(j)),
                (None, true) => rewrite_fix(j),
                (Some(label), false) => {
                    let right = s.agents_dir.join(format!("{label}{FILE_SUFFIX}"));
                    bootout_then(
                        s,
                        j,
                        label,
                        &format!(
                            "mv {} {} && launchctl bootstrap {} {}",
                            j.path.display(),
                            right.display(),
                            s.domain,
                            right.display()
                        ),
                    )
                }
                (None, false) => format!("${{EDITOR:-vi}} {}", j.path.display()),
            };
            Some(job_finding(LABEL_MISMATCH.id, Severity::Warn, j, message, fix))
        })
        .collect()
}

/// `then`, after booting out the job loaded as `label`: only when launchd has it, or may.
fn bootout_then(s: &LaunchdSnapshot, j: &JobSnap, label: &str, then: &str) -> String {
    let target = s.domain.target(label);
    match j.launchd {
        Launchd::Loaded(_) => format!("launchctl bootout {target} && {then}"),
        Launchd::NotLoaded => then.to_owned(),
        // Unknown: a bootout of a job that is not loaded fails harmlessly, so go on regardless.
        _ => format!("launchctl bootout {target}; {then}"),
    }
}

#[cfg(test)]
mod tests;
