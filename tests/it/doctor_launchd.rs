//! `doctor` under launchd: the real binary, with `HERMES_SERVICE_MANAGER=launchd`, a temporary
//! `HOME` whose `Library/LaunchAgents` each test fills with fixture plists, and the recording
//! fake `launchctl` first on `PATH`. Each misconfiguration has a fixture that produces its
//! finding and a near miss that must not; a plist `LaunchAgent::render` wrote has none.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use hermes_svc::launchd::plist::LaunchAgent;
use hermes_svc::profile::{Profile, ProfileName};
use serde_json::Value;

use crate::doctor::findings;
use crate::fake_launchctl::Fake;
use crate::harness::{scratch_dir, stderr, stdout, TempDir, BIN};

/// A Mac, as far as doctor can tell: a home directory, its LaunchAgents, and launchd.
struct Mac {
    home: TempDir,
    fake: Fake,
    uid: u32,
}

/// One job file, written as a person or hermes-agent would: XML, keys in any order.
struct Plist<'a> {
    label: Option<&'a str>,
    argv: Vec<String>,
    env: Vec<(&'a str, String)>,
    /// Raw XML for the keys after these, such as `KeepAlive`.
    extra: &'a str,
}

const KEEP_ALIVE_OK: &str = "<key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>";

impl Plist<'_> {
    fn text(&self) -> String {
        let mut x = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n",
        );
        if let Some(label) = self.label {
            x.push_str(&format!("<key>Label</key><string>{label}</string>\n"));
        }
        x.push_str("<key>ProgramArguments</key><array>\n");
        for a in &self.argv {
            x.push_str(&format!("<string>{a}</string>\n"));
        }
        x.push_str("</array>\n");
        if !self.env.is_empty() {
            x.push_str("<key>EnvironmentVariables</key><dict>\n");
            for (k, v) in &self.env {
                x.push_str(&format!("<key>{k}</key><string>{v}</string>\n"));
            }
            x.push_str("</dict>\n");
        }
        x.push_str(self.extra);
        x.push_str("\n</dict>\n</plist>\n");
        x
    }
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

impl Mac {
    /// Profile `coder` has a home; launchd answers for the user's GUI domain and has no job.
    fn new() -> Mac {
        let home = scratch_dir("doctor-launchd");
        std::fs::create_dir_all(home.path().join("Library/LaunchAgents")).unwrap();
        let mac = Mac {
            home,
            fake: Fake::new(),
            uid: nix::unistd::getuid().as_raw(),
        };
        std::fs::create_dir_all(mac.profile_home("coder")).unwrap();
        mac.fake
            .answer_call(&format!("print gui/{}", mac.uid), 0, "", "");
        mac
    }

    fn hermes_home(&self) -> PathBuf {
        self.home.path().join(".hermes")
    }

    fn profile_home(&self, profile: &str) -> PathBuf {
        self.hermes_home().join("profiles").join(profile)
    }

    fn agents(&self) -> PathBuf {
        self.home.path().join("Library/LaunchAgents")
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let path = self.agents().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Our job for `profile` as install writes it, running this very binary.
    fn rendered(&self, profile: &str) -> String {
        let p = Profile::new(ProfileName::parse(profile).unwrap(), self.hermes_home()).unwrap();
        LaunchAgent::new(p, BIN.into()).render().unwrap()
    }

    /// Our job for `profile`, with `argv_tail` after `gateway run` and `extra` keys.
    fn ours(&self, profile: &str, argv_tail: &[&str], extra: &str) -> String {
        let label = format!("ai.hermes.gateway.{profile}");
        let mut argv = words(&[BIN, "gateway", "run"]);
        argv.extend(words(argv_tail));
        Plist {
            label: Some(&label),
            argv,
            env: vec![("HERMES_HOME", self.hermes_home().display().to_string())],
            extra,
        }
        .text()
    }

    /// launchd has `label` loaded, running as `pid`.
    fn running(&self, label: &str, pid: u32) {
        let target = format!("gui/{}/{label}", self.uid);
        let out = format!(
            "{target} = {{\n\tactive count = 1\n\tpath = {}/{label}.plist\n\tstate = running\n\n\tprogram = {BIN}\n\truns = 1\n\tpid = {pid}\n\tlast exit code = (never exited)\n}}\n",
            self.agents().display()
        );
        self.fake
            .answer_call(&format!("print {target}"), 0, &out, "");
    }

    fn command(&self, path: &str) -> Command {
        let mut c = Command::new(BIN);
        c.env("HOME", self.home.path())
            .env("HERMES_SERVICE_MANAGER", "launchd")
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env_remove("HERMES_HOME")
            .stdin(Stdio::null());
        c
    }

    fn path_with_fake(&self) -> String {
        format!("{}:/usr/bin:/bin", self.fake.dir.path().display())
    }

    fn doctor(&self, args: &[&str]) -> Output {
        self.command(&self.path_with_fake())
            .arg("doctor")
            .args(args)
            .output()
            .unwrap()
    }

    fn findings(&self) -> Vec<Value> {
        findings(&self.doctor(&["--json"]))
    }
}

fn with_id<'a>(fs: &'a [Value], id: &str) -> Vec<&'a Value> {
    fs.iter().filter(|f| f["id"] == id).collect()
}

fn ids(fs: &[Value]) -> Vec<String> {
    fs.iter()
        .map(|f| {
            format!(
                "{} {}",
                f["id"].as_str().unwrap(),
                f["subject"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_rendered_agent_that_launchd_runs_has_no_findings() {
    let mac = Mac::new();
    mac.write("ai.hermes.gateway.coder.plist", &mac.rendered("coder"));
    mac.running("ai.hermes.gateway.coder", 4242);
    let out = mac.doctor(&["--json"]);
    assert_eq!(findings(&out), Vec::<Value>::new(), "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
    let text = mac.doctor(&[]);
    assert_eq!(stdout(&text), "no problems found\n", "{}", stderr(&text));
    // launchd was asked about the job, in the domain it found.
    let calls = mac.fake.calls();
    let status = format!("print gui/{}/ai.hermes.gateway.coder", mac.uid);
    assert!(calls.contains(&status), "{calls:?}");
}

#[test]
fn hsv001_two_jobs_for_one_profile_whoever_wrote_them() {
    let mac = Mac::new();
    mac.write("ai.hermes.gateway.coder.plist", &mac.rendered("coder"));
    mac.running("ai.hermes.gateway.coder", 4242);
    // hermes-agent's per-profile job, with an explicit profile.
    let theirs = |profile: &str| Plist {
        label: Some("ai.hermes.gateway-x"),
        argv: words(&[BIN, "gateway", "run", "--profile", profile]),
        env: vec![],
        extra: KEEP_ALIVE_OK,
    };
    let mut t = theirs("coder");
    let label = "ai.hermes.gateway-coder";
    t.label = Some(label);
    mac.write("ai.hermes.gateway-coder.plist", &t.text());
    let fs = mac.findings();
    let dup = with_id(&fs, "HSV001");
    assert_eq!(dup.len(), 1, "{fs:#?}");
    assert_eq!(dup[0]["subject"], "coder");
    assert_eq!(dup[0]["severity"], "error");
    let message = dup[0]["message"].as_str().unwrap();
    assert!(
        message.contains("ai.hermes.gateway.coder.plist (loaded, pid 4242)"),
        "{message}"
    );
    assert!(
        message.contains("ai.hermes.gateway-coder.plist (not loaded)"),
        "{message}"
    );
    assert_eq!(
        dup[0]["fix"],
        "hermes-svc install --profile coder --migrate"
    );

    // Near miss: hermes-agent's job serves another profile.
    std::fs::remove_file(mac.agents().join("ai.hermes.gateway-coder.plist")).unwrap();
    let mut t = theirs("writer");
    t.label = Some("ai.hermes.gateway-writer");
    mac.write("ai.hermes.gateway-writer.plist", &t.text());
    let fs = mac.findings();
    assert!(with_id(&fs, "HSV001").is_empty(), "{fs:#?}");
}

#[test]
fn hsv001_and_hsv003_hermes_agents_job_without_profile_follows_its_home() {
    let mac = Mac::new();
    mac.write("ai.hermes.gateway.coder.plist", &mac.rendered("coder"));
    std::fs::write(mac.hermes_home().join("active_profile"), "coder\n").unwrap();
    let legacy = |home: &Path| Plist {
        label: Some("ai.hermes.gateway"),
        argv: words(&[BIN, "gateway", "run"]),
        env: vec![("HERMES_HOME", home.display().to_string())],
        extra: KEEP_ALIVE_OK,
    };
    mac.write(
        "ai.hermes.gateway.plist",
        &legacy(&mac.hermes_home()).text(),
    );
    let fs = mac.findings();
    assert_eq!(with_id(&fs, "HSV001").len(), 1, "{fs:#?}");
    let np = with_id(&fs, "HSV003");
    assert_eq!(np.len(), 1, "{fs:#?}");
    assert_eq!(np[0]["subject"], "ai.hermes.gateway.plist");
    assert_eq!(np[0]["severity"], "error");
    assert_eq!(np[0]["fix"], "hermes-svc install --profile coder --migrate");

    // Near miss: the same job for another HERMES_HOME serves another profile `coder`, and
    // names one explicitly.
    let other = mac.home.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let mut l = legacy(&other);
    l.argv.push("--profile=coder".into());
    mac.write("ai.hermes.gateway.plist", &l.text());
    let fs = mac.findings();
    assert!(with_id(&fs, "HSV001").is_empty(), "{fs:#?}");
    assert!(with_id(&fs, "HSV003").is_empty(), "{fs:#?}");
}

#[test]
fn hsv002_replace_in_program_arguments_but_not_replace_all() {
    let mac = Mac::new();
    let file = "ai.hermes.gateway.coder.plist";
    mac.write(
        file,
        &mac.ours("coder", &["--profile", "coder", "--replace"], KEEP_ALIVE_OK),
    );
    let fs = mac.findings();
    assert_eq!(ids(&fs), [format!("HSV002 {file}")], "{fs:#?}");
    assert_eq!(fs[0]["fix"], "hermes-svc install --profile coder --force");
    assert_eq!(mac.doctor(&[]).status.code(), Some(1));

    mac.write(
        file,
        &mac.ours(
            "coder",
            &["--profile", "coder", "--replace-all"],
            KEEP_ALIVE_OK,
        ),
    );
    assert_eq!(mac.findings(), Vec::<Value>::new());
}

#[test]
fn hsv018_a_label_that_is_not_the_file_name_but_not_one_differing_in_case() {
    let mac = Mac::new();
    let file = "ai.hermes.gateway.coder.plist";
    let text = mac.rendered("coder");
    let wrong = text.replace(
        "<string>ai.hermes.gateway.coder</string>",
        "<string>ai.hermes.gateway.coder-old</string>",
    );
    assert_ne!(wrong, text);
    mac.write(file, &wrong);
    mac.running("ai.hermes.gateway.coder-old", 4242);
    let fs = mac.findings();
    assert_eq!(ids(&fs), [format!("HSV018 {file}")], "{fs:#?}");
    assert_eq!(
        fs[0]["fix"],
        format!(
            "launchctl bootout gui/{}/ai.hermes.gateway.coder-old && hermes-svc install --profile coder --force",
            mac.uid
        )
    );

    let case = text.replace(
        "<string>ai.hermes.gateway.coder</string>",
        "<string>AI.Hermes.Gateway.coder</string>",
    );
    mac.write(file, &case);
    assert_eq!(mac.findings(), Vec::<Value>::new());
}

#[test]
fn hsv004_keep_alive_that_leaves_a_gateway_down_or_respawns_a_conflict_forever() {
    let mac = Mac::new();
    let file = "ai.hermes.gateway.coder.plist";
    let argv = ["--profile", "coder"];
    for (extra, says) in [
        ("", "KeepAlive is absent, so a gateway that exits asking for a restart (status 75) or crashes stays down."),
        ("<key>KeepAlive</key><false/>", "stays down"),
        ("<key>KeepAlive</key><dict><key>Crashed</key><true/></dict>", "a dictionary without SuccessfulExit=false"),
        ("<key>KeepAlive</key><true/><key>ThrottleInterval</key><integer>30</integer>", "respawned every 30 s (ThrottleInterval) forever"),
    ] {
        mac.write(file, &mac.ours("coder", &argv, extra));
        let fs = mac.findings();
        assert_eq!(ids(&fs), [format!("HSV004 {file}")], "{extra}: {fs:#?}");
        let message = fs[0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{extra}: {message}");
        assert_eq!(fs[0]["fix"], "hermes-svc install --profile coder --force");
    }
    // Near miss: SuccessfulExit=false beside other conditions.
    let ok = "<key>KeepAlive</key><dict><key>Crashed</key><true/><key>SuccessfulExit</key><false/><key>NetworkState</key><true/></dict>";
    mac.write(file, &mac.ours("coder", &argv, ok));
    assert_eq!(mac.findings(), Vec::<Value>::new());
}

#[test]
fn hsv014_a_program_missing_or_not_executable_but_not_one_reached_by_a_symlink() {
    let mac = Mac::new();
    let file = "ai.hermes.gateway.coder.plist";
    let text = mac.rendered("coder");
    let bin_dir = mac.home.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let plain = bin_dir.join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (program, says) in [
        (bin_dir.join("gone"), "does not exist"),
        (plain, "is not executable"),
    ] {
        let p = program.display().to_string();
        mac.write(file, &text.replace(BIN, &p));
        let fs = mac.findings();
        assert_eq!(ids(&fs), [format!("HSV014 {file}")], "{fs:#?}");
        let message = fs[0]["message"].as_str().unwrap();
        assert!(message.contains(&format!("{p} {says}")), "{message}");
        assert_eq!(fs[0]["severity"], "error");
    }
    let link = bin_dir.join("hermes-svc");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    mac.write(file, &text.replace(BIN, &link.display().to_string()));
    assert_eq!(mac.findings(), Vec::<Value>::new());
}

#[test]
fn hsv012_env_mode_is_checked_in_the_homes_the_jobs_serve() {
    let mac = Mac::new();
    mac.write("ai.hermes.gateway.coder.plist", &mac.rendered("coder"));
    let env = mac.profile_home("coder").join(".env");
    std::fs::write(&env, "X=1\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    let fs = mac.findings();
    assert_eq!(ids(&fs), ["HSV012 coder"], "{fs:#?}");
    assert_eq!(fs[0]["fix"], format!("chmod 600 {}", env.display()));
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(mac.findings(), Vec::<Value>::new());
}

/// A live process for a pid file to name, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("600").spawn().unwrap())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn hsv007_a_stale_or_misrouted_pid_file_but_not_the_one_launchd_runs() {
    let mac = Mac::new();
    mac.write("ai.hermes.gateway.coder.plist", &mac.rendered("coder"));
    mac.write("ai.hermes.gateway.writer.plist", &mac.rendered("writer"));
    std::fs::create_dir_all(mac.profile_home("writer")).unwrap();
    let pid_file = mac.profile_home("coder").join("gateway.pid");
    let record = |pid: u32| {
        serde_json::json!({
            "pid": pid,
            "profile": "coder",
            "home": mac.profile_home("coder"),
            "started_at": "2026-01-01T00:00:00Z"
        })
        .to_string()
    };
    // Stale: the process is gone.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    std::fs::write(&pid_file, record(dead)).unwrap();
    let fs = mac.findings();
    assert_eq!(ids(&fs), ["HSV007 coder"], "{fs:#?}");
    assert_eq!(fs[0]["severity"], "warn");
    assert_eq!(fs[0]["fix"], format!("rm {}", pid_file.display()));

    // Misrouted: it names the process launchd runs as writer's gateway.
    let live = Sleeper::start();
    std::fs::write(&pid_file, record(live.0.id())).unwrap();
    mac.running("ai.hermes.gateway.writer", live.0.id());
    let fs = mac.findings();
    assert_eq!(ids(&fs), ["HSV007 coder"], "{fs:#?}");
    assert_eq!(fs[0]["severity"], "error");
    let message = fs[0]["message"].as_str().unwrap();
    assert!(message.contains("serving profile writer"), "{message}");

    // Near miss: the process launchd runs as coder's own gateway.
    mac.fake.answer_call(
        &format!("print gui/{}/ai.hermes.gateway.writer", mac.uid),
        113,
        "",
        "",
    );
    mac.running("ai.hermes.gateway.coder", live.0.id());
    assert_eq!(mac.findings(), Vec::<Value>::new());
}

#[test]
fn without_launchctl_doctor_says_so_and_still_checks_the_files() {
    let mac = Mac::new();
    mac.write(
        "ai.hermes.gateway.coder.plist",
        &mac.ours(
            "coder",
            &["--profile", "coder"],
            "<key>KeepAlive</key><true/>",
        ),
    );
    // Only this binary's directory: no launchctl anywhere on PATH.
    let empty = scratch_dir("no-launchctl");
    let out = mac
        .command(&empty.path().display().to_string())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let fs = findings(&out);
    assert_eq!(
        ids(&fs),
        ["HSV000 launchd", "HSV004 ai.hermes.gateway.coder.plist"],
        "{fs:#?}"
    );
    let message = fs[0]["message"].as_str().unwrap();
    assert!(message.contains("could not ask launchd"), "{message}");
    assert_eq!(fs[0]["severity"], "warn");
    // With nothing on disk either, doctor could not look at anything: exit 2, not "healthy".
    let bare = scratch_dir("doctor-launchd-bare");
    let out = Command::new(BIN)
        .args(["doctor", "--json"])
        .env("HOME", bare.path())
        .env("HERMES_SERVICE_MANAGER", "launchd")
        .env("PATH", empty.path())
        .env_remove("HERMES_HOME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("nothing to check under launchd"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_gateway_job_file_that_does_not_parse_is_named_but_a_strangers_is_not_ours_to_judge() {
    let mac = Mac::new();
    mac.write(
        "ai.hermes.gateway.coder.plist",
        "<plist><dict><key>Label</key>",
    );
    mac.write("com.example.broken.plist", "not a plist");
    let fs = mac.findings();
    assert_eq!(
        ids(&fs),
        ["HSV000 ai.hermes.gateway.coder.plist"],
        "{fs:#?}"
    );
    assert!(fs[0]["fix"].as_str().unwrap().starts_with("plutil -lint "));
}

#[test]
fn fix_chmods_env_and_leaves_job_files_to_the_person_saying_so() {
    let mac = Mac::new();
    mac.write(
        "ai.hermes.gateway.coder.plist",
        &mac.ours("coder", &["--profile", "coder", "--replace"], KEEP_ALIVE_OK),
    );
    let env = mac.profile_home("coder").join(".env");
    std::fs::write(&env, "X=1\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = mac.doctor(&["--fix"]);
    let text = stdout(&out);
    assert!(text.contains("fixed HSV012 coder: chmod 600"), "{text}");
    assert!(
        text.contains("not fixed HSV002 ai.hermes.gateway.coder.plist: doctor --fix does not change launchd jobs yet"),
        "{text}"
    );
    assert!(
        text.contains("by hand: hermes-svc install --profile coder --force"),
        "{text}"
    );
    let mode = std::fs::metadata(&env).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(out.status.code(), Some(1), "{text}");
}
