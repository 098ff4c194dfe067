//! Each launchd check over hand-built snapshots: one job that produces the finding and a near
//! miss that must not.

use std::path::PathBuf;

use plist::{Dictionary, Value};

use super::*;
use crate::doctor::launchd::all;
use crate::launchd::launchctl::{Domain, JobState, JobStatus, LastExit};
use crate::launchd::plist::{Job, LaunchAgent};
use crate::profile::Profile;

const HOME: &str = "/Users/u/.hermes";

fn strings(words: &[&str]) -> Value {
    Value::Array(words.iter().map(|w| Value::String((*w).into())).collect())
}

fn keep_alive_dict(pairs: &[(&str, bool)]) -> Value {
    let mut d = Dictionary::new();
    for (k, v) in pairs {
        d.insert((*k).into(), Value::Boolean(*v));
    }
    Value::Dictionary(d)
}

/// A healthy job of ours for `profile`, as a dictionary to spoil.
fn good(profile: &str) -> Dictionary {
    let mut d = Dictionary::new();
    d.insert(
        "Label".into(),
        format!("ai.hermes.gateway.{profile}").into(),
    );
    d.insert(
        "ProgramArguments".into(),
        strings(&[
            "/opt/bin/hermes-svc",
            "gateway",
            "run",
            "--profile",
            profile,
        ]),
    );
    d.insert(
        "KeepAlive".into(),
        keep_alive_dict(&[("SuccessfulExit", false)]),
    );
    d
}

fn job(file: &str, d: Dictionary) -> JobSnap {
    let mut bytes = vec![];
    Value::Dictionary(d).to_writer_xml(&mut bytes).unwrap();
    JobSnap {
        file_name: file.into(),
        path: PathBuf::from("/Users/u/Library/LaunchAgents").join(file),
        job: Job::parse(&bytes).unwrap(),
        hermes_home: HOME.into(),
        sticky: None,
        program_problem: None,
        launchd: Launchd::NotLoaded,
    }
}

fn ours(profile: &str) -> JobSnap {
    job(&format!("ai.hermes.gateway.{profile}.plist"), good(profile))
}

fn snap(jobs: Vec<JobSnap>) -> LaunchdSnapshot {
    LaunchdSnapshot::new(
        "/Users/u/Library/LaunchAgents".into(),
        Domain::Gui(501),
        jobs,
    )
}

fn ids(fs: &[Finding]) -> Vec<(&'static str, Severity)> {
    fs.iter().map(|f| (f.id, f.severity)).collect()
}

fn loaded(pid: u32) -> Launchd {
    Launchd::Loaded(JobStatus {
        state: JobState::Running,
        raw_state: Some("running".into()),
        pid: Some(pid),
        last_exit: LastExit::NeverExited,
        runs: Some(1),
    })
}

#[test]
fn a_rendered_agent_has_no_findings() {
    let profile = Profile::new(ProfileName::parse("coder").unwrap(), HOME.into()).unwrap();
    let agent = LaunchAgent::new(profile, "/opt/bin/hermes-svc".into());
    let j = job("ai.hermes.gateway.coder.plist", agent.dictionary().unwrap());
    assert_eq!(all(&snap(vec![j, ours("other")])), vec![]);
}

#[test]
fn hsv001_two_jobs_for_one_profile_name_both_and_their_state() {
    let mut theirs = good("coder");
    theirs.insert("Label".into(), "ai.hermes.gateway-coder".into());
    theirs.insert(
        "ProgramArguments".into(),
        strings(&[
            "/usr/bin/python3",
            "-m",
            "hermes_cli.main",
            "gateway",
            "run",
            "--profile",
            "coder",
        ]),
    );
    let mut a = ours("coder");
    a.launchd = loaded(4242);
    let b = job("ai.hermes.gateway-coder.plist", theirs.clone());
    let f = duplicate_jobs(&snap(vec![a.clone(), b]));
    assert_eq!(ids(&f), [("HSV001", Severity::Error)]);
    assert!(
        f[0].message
            .contains("ai.hermes.gateway.coder.plist (loaded, pid 4242)"),
        "{f:?}"
    );
    assert!(
        f[0].message
            .contains("ai.hermes.gateway-coder.plist (not loaded)"),
        "{f:?}"
    );
    assert_eq!(f[0].fix, "hermes-svc install --profile coder --migrate");
    // Near miss: the same profile name under another HERMES_HOME is another profile.
    let mut elsewhere = job("ai.hermes.gateway-coder.plist", theirs);
    elsewhere.hermes_home = "/srv/other".into();
    assert!(duplicate_jobs(&snap(vec![a, elsewhere])).is_empty());
}

#[test]
fn hsv002_replace_but_not_replace_all() {
    let mut d = good("coder");
    let argv = [
        "/opt/bin/hermes-svc",
        "gateway",
        "run",
        "--profile",
        "coder",
    ];
    d.insert(
        "ProgramArguments".into(),
        strings(&[&argv[..], &["--replace"]].concat()),
    );
    let f = replace(&snap(vec![job("ai.hermes.gateway.coder.plist", d.clone())]));
    assert_eq!(ids(&f), [("HSV002", Severity::Error)]);
    assert_eq!(f[0].fix, "hermes-svc install --profile coder --force");
    d.insert(
        "ProgramArguments".into(),
        strings(&[&argv[..], &["--replace-all"]].concat()),
    );
    assert!(replace(&snap(vec![job("ai.hermes.gateway.coder.plist", d)])).is_empty());
}

#[test]
fn hsv003_no_profile_follows_the_sticky_file() {
    let mut d = good("coder");
    d.insert("Label".into(), "ai.hermes.gateway".into());
    d.insert(
        "ProgramArguments".into(),
        strings(&["/usr/local/bin/hermes", "gateway", "run"]),
    );
    let mut j = job("ai.hermes.gateway.plist", d);
    assert_eq!(
        ids(&no_profile(&snap(vec![j.clone()]))),
        [("HSV003", Severity::Warn)]
    );
    j.sticky = Some(ProfileName::parse("coder").unwrap());
    let f = no_profile(&snap(vec![j]));
    assert_eq!(ids(&f), [("HSV003", Severity::Error)]);
    assert_eq!(f[0].fix, "hermes-svc install --profile coder --migrate");
    // Near miss: `--profile=coder` is explicit.
    let mut d = good("coder");
    d.insert(
        "ProgramArguments".into(),
        strings(&["/opt/bin/hermes-svc", "gateway", "run", "--profile=coder"]),
    );
    assert!(no_profile(&snap(vec![job("ai.hermes.gateway.coder.plist", d)])).is_empty());
}

#[test]
fn hsv004_keep_alive_that_leaves_a_gateway_down_or_respawns_a_conflict() {
    let with = |ka: Option<Value>| {
        let mut d = good("coder");
        d.remove("KeepAlive");
        if let Some(ka) = ka {
            d.insert("KeepAlive".into(), ka);
        }
        d.insert("ThrottleInterval".into(), Value::Integer(30.into()));
        keep_alive(&snap(vec![job("ai.hermes.gateway.coder.plist", d)]))
    };
    for down in [
        None,
        Some(Value::Boolean(false)),
        Some(keep_alive_dict(&[("Crashed", true)])),
    ] {
        let f = with(down.clone());
        assert_eq!(ids(&f), [("HSV004", Severity::Warn)], "{down:?}");
        assert!(f[0].message.contains("stays down"), "{f:?}");
        assert!(!f[0].message.contains("forever"), "{f:?}");
    }
    let f = with(Some(Value::Boolean(true)));
    assert!(f[0].message.contains("every 30 s"), "{f:?}");
    assert!(!f[0].message.contains("stays down"), "{f:?}");
    let f = with(Some(keep_alive_dict(&[("SuccessfulExit", true)])));
    assert!(
        f[0].message.contains("stays down") && f[0].message.contains("forever"),
        "{f:?}"
    );
    // Near miss: SuccessfulExit=false beside other conditions.
    let ok = keep_alive_dict(&[
        ("SuccessfulExit", false),
        ("Crashed", true),
        ("NetworkState", true),
    ]);
    assert!(with(Some(ok)).is_empty());
}

#[test]
fn hsv014_a_program_that_cannot_run() {
    let mut j = ours("coder");
    j.program_problem = Some("/opt/bin/hermes-svc does not exist".into());
    let f = program_missing(&snap(vec![j]));
    assert_eq!(ids(&f), [("HSV014", Severity::Error)]);
    assert!(program_missing(&snap(vec![ours("coder")])).is_empty());
}

#[test]
fn hsv018_a_label_that_is_not_the_file_name() {
    let mut d = good("coder");
    d.insert("Label".into(), "ai.hermes.gateway.coder2".into());
    let mut j = job("ai.hermes.gateway.coder.plist", d);
    let f = label_mismatch(&snap(vec![j.clone()]));
    assert_eq!(ids(&f), [("HSV018", Severity::Warn)]);
    assert_eq!(f[0].fix, "hermes-svc install --profile coder --force");
    // Loaded under the wrong label: booted out by that label first.
    j.launchd = loaded(7);
    let f = label_mismatch(&snap(vec![j]));
    assert_eq!(
        f[0].fix,
        "launchctl bootout gui/501/ai.hermes.gateway.coder2 && hermes-svc install --profile coder --force"
    );
    // No Label at all.
    let mut d = good("coder");
    d.remove("Label");
    let f = label_mismatch(&snap(vec![job("ai.hermes.gateway.coder.plist", d)]));
    assert!(f[0].message.contains("no Label"), "{f:?}");
    // Near miss: a label differing only in case names this very file on macOS.
    let mut d = good("coder");
    d.insert("Label".into(), "AI.Hermes.Gateway.coder".into());
    assert!(label_mismatch(&snap(vec![job("ai.hermes.gateway.coder.plist", d)])).is_empty());
}

#[test]
fn hsv000_launchd_that_cannot_be_asked_is_said_once_and_the_files_are_still_checked() {
    let mut d = good("coder");
    d.insert("KeepAlive".into(), Value::Boolean(true));
    let mut j = job("ai.hermes.gateway.coder.plist", d);
    j.launchd = Launchd::NotAsked;
    let mut s = snap(vec![j]);
    s.launchctl_problem = Some("failed to run launchctl: No such file or directory".into());
    let fs = all(&s);
    assert_eq!(
        ids(&fs),
        [("HSV000", Severity::Warn), ("HSV004", Severity::Warn)]
    );
    assert!(fs[0].message.contains("could not ask launchd"), "{fs:?}");
}

#[test]
fn hsv007_a_pid_file_naming_another_profiles_running_job_names_that_job() {
    use crate::doctor::checks::fixtures::{pid_record, profile};
    use crate::doctor::homes::PidProcess;
    // Profile a's pid file names pid 4242, which launchd runs as b's job: the neutral check
    // sees the jobs as it sees units.
    let mut a = profile("a");
    a.pid = Some((pid_record(&a, 4242, "a"), PidProcess::AliveUnreadable));
    let mut b = ours("b");
    b.launchd = loaded(4242);
    let mut s = snap(vec![ours("a"), b]);
    s.homes.profiles = vec![a.clone()];
    let f = all(&s);
    assert_eq!(ids(&f), [("HSV007", Severity::Error)]);
    assert_eq!(
        f[0].message,
        "gateway.pid names pid 4242, which is ai.hermes.gateway.b serving profile b."
    );
    // Near miss: a's own job runs as that pid.
    let mut own = ours("a");
    own.launchd = loaded(4242);
    let mut s = snap(vec![own, ours("b")]);
    s.homes.profiles = vec![a];
    assert_eq!(all(&s), vec![]);
}

#[test]
fn the_registry_holds_each_id_once_in_id_order() {
    let ids: Vec<_> = crate::doctor::launchd::CHECKS
        .iter()
        .map(|c| c.id)
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted);
}
