//! The launchd backend end to end: the real `hermes-svc` binary with
//! `HERMES_SERVICE_MANAGER=launchd`, a temporary HOME, and a fake `launchctl` on PATH that
//! keeps launchd's one piece of state that matters here (which labels are loaded).
//!
//! Unlike the runner's tests (`launchctl.rs`), which script each answer, this fake behaves:
//! `bootstrap` loads the plist's label, `bootout` unloads it, and `print` answers from that, as
//! launchctl(1) does (113 "Could not find service" for a label it does not have). So the argv a
//! command sends follows from its own decisions, and the lists below are what each command must
//! send: install, reinstall unchanged, set, restart, stop, uninstall, a `bootstrap` refused
//! with 5, and a headless Mac, where `gui/<uid>` is refused and `user/<uid>` is the domain.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use hermes_svc::launchd::plist::Job;

use crate::harness::{scratch_dir, TempDir, BIN};

/// The pid the fake's `print` gives every loaded job (the script spells it out).
pub(crate) const JOB_PID: u32 = 4242;

const SCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")
printf '%s\n' "$*" >> "$dir/calls.log"
mkdir -p "$dir/loaded"
case "$1" in
print)
    case "$2" in
    */*/*)
        label=${2##*/}
        if [ -e "$dir/loaded/$label" ]; then
            printf '%s = {\n\tactive count = 1\n\tstate = running\n\tpid = 4242\n\truns = 1\n\tlast exit code = (never exited)\n}\n' "$2"
            exit 0
        fi
        printf 'Bad request.\nCould not find service "%s" in domain for user gui: 0\n' "$label" >&2
        exit 113;;
    gui/*)
        if [ -e "$dir/headless" ]; then
            echo "Bad request." >&2
            echo "Domain does not support specified action" >&2
            exit 125
        fi
        exit 0;;
    *) exit 0;;
    esac;;
bootstrap)
    n=$(( $(cat "$dir/bootstraps" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$dir/bootstraps"
    if [ -e "$dir/refuse-bootstrap" ] && [ "$n" -le "$(cat "$dir/refuse-bootstrap")" ]; then
        echo "Bootstrap failed: 5: Input/output error" >&2
        exit 5
    fi
    label=$(basename "$3" .plist)
    touch "$dir/loaded/$label";;
bootout)
    label=${2##*/}
    if [ ! -e "$dir/loaded/$label" ]; then
        echo "Boot-out failed: 3: No such process" >&2
        exit 3
    fi
    rm "$dir/loaded/$label";;
esac
exit 0
"#;

/// A temporary HOME and a behaving fake `launchctl` first on `PATH` (shared with
/// `launchd_status.rs`).
pub(crate) struct Mac {
    pub(crate) home: TempDir,
    bin: TempDir,
}

impl Mac {
    pub(crate) fn new() -> Mac {
        let home = scratch_dir("launchd-home");
        let bin = scratch_dir("launchd-bin");
        let fake = bin.path().join("launchctl");
        std::fs::write(&fake, SCRIPT).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        Mac { home, bin }
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        std::process::Command::new(BIN)
            .args(args)
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.home.path())
            .env("HERMES_SERVICE_MANAGER", "launchd")
            .output()
            .unwrap()
    }

    /// Run and require success, returning stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The calls since the last time they were taken.
    pub(crate) fn take_calls(&self) -> Vec<String> {
        let log = self.bin.path().join("calls.log");
        let calls = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        calls.lines().map(str::to_owned).collect()
    }

    pub(crate) fn agents(&self) -> PathBuf {
        self.home.path().join("Library/LaunchAgents")
    }

    fn plist(&self, profile: &str) -> PathBuf {
        self.agents()
            .join(format!("ai.hermes.gateway.{profile}.plist"))
    }

    pub(crate) fn loaded(&self, label: &str) -> bool {
        self.bin.path().join("loaded").join(label).exists()
    }

    pub(crate) fn mark(&self, name: &str, text: &str) {
        let path = self.bin.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

const LABEL: &str = "ai.hermes.gateway.coder";

fn target(domain: &str) -> String {
    format!("{domain}/{LABEL}")
}

fn job(path: &Path) -> Job {
    Job::parse(&std::fs::read(path).unwrap()).unwrap()
}

/// `print gui/<uid>` picks the domain (the user domain when launchd refuses the gui one),
/// `print <target>` observes the job; after that the command's own calls follow.
fn observe(domain: &str) -> Vec<String> {
    vec![
        "print gui/0".to_owned(),
        format!("print {}", target(domain)),
    ]
}

fn install_calls(domain: &str, plist: &Path) -> Vec<String> {
    let mut calls = observe(domain);
    calls.extend([
        format!("enable {}", target(domain)),
        format!("bootstrap {domain} {}", plist.display()),
        format!("kickstart {}", target(domain)),
    ]);
    calls
}

#[test]
fn install_writes_a_plist_named_by_its_label_then_enables_bootstraps_and_kickstarts() {
    let mac = Mac::new();
    let out = mac.ok(&["install", "--profile", "coder"]);
    let plist = mac.plist("coder");
    assert_eq!(mac.take_calls(), install_calls("gui/0", &plist), "{out}");
    assert!(mac.loaded(LABEL));
    let job = job(&plist);
    assert_eq!(job.label.as_deref(), Some(LABEL));
    assert!(job
        .arguments
        .windows(2)
        .any(|w| w == ["--profile", "coder"]));
    assert!(!job.arguments.iter().any(|a| a == "--replace"));
    assert!(!job.restarts_after_exit(0) && job.restarts_after_exit(75));
    assert!(out.contains("installed (gui/0 scope)"), "{out}");

    // Unchanged: one look, and nothing launchd would notice.
    let out = mac.ok(&["install", "--profile", "coder"]);
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(mac.take_calls(), observe("gui/0"));
}

#[test]
fn set_rewrites_the_plist_and_restart_boots_it_out_and_in_to_take_it() {
    let mac = Mac::new();
    mac.ok(&["install", "--profile", "coder"]);
    mac.take_calls();
    let plist = mac.plist("coder");
    let out = mac.ok(&[
        "set",
        "--profile",
        "coder",
        "WatchdogSec=60",
        "HTTPS_PROXY=http://p:1",
    ]);
    let t = target("gui/0");
    let mut want = observe("gui/0");
    want.extend([
        format!("bootout {t}"),
        format!("print {t}"),
        format!("bootstrap gui/0 {}", plist.display()),
        format!("enable {t}"),
        format!("kickstart {t}"),
    ]);
    assert_eq!(mac.take_calls(), want, "{out}");
    let job = job(&plist);
    assert_eq!(
        job.env.get("HERMES_WATCHDOG_SEC").map(String::as_str),
        Some("60")
    );
    assert_eq!(
        job.env.get("HTTPS_PROXY").map(String::as_str),
        Some("http://p:1")
    );
    let overrides = mac
        .home
        .path()
        .join(".hermes/profiles/coder/launchd-overrides.toml");
    let text = std::fs::read_to_string(&overrides).unwrap();
    assert!(text.contains("WatchdogSec = 60"), "{text}");

    // unset brings the plist back to the plain render.
    mac.ok(&["unset", "--profile", "coder", "WatchdogSec", "HTTPS_PROXY"]);
    assert!(!job_has_env(&plist, "HERMES_WATCHDOG_SEC"));
    assert!(!overrides.exists(), "an empty overrides file is removed");
}

fn job_has_env(plist: &Path, name: &str) -> bool {
    job(plist).env.contains_key(name)
}

#[test]
fn restart_kickstarts_with_kill_stop_boots_out_and_uninstall_removes_the_plist() {
    let mac = Mac::new();
    mac.ok(&["install", "--profile", "coder"]);
    mac.take_calls();
    let t = target("gui/0");

    mac.ok(&["restart", "--profile", "coder"]);
    assert_eq!(
        mac.take_calls(),
        [
            "print gui/0".to_owned(),
            format!("print {t}"),
            format!("kickstart -k {t}")
        ]
    );

    mac.ok(&["stop", "--profile", "coder"]);
    assert_eq!(
        mac.take_calls(),
        [
            "print gui/0".to_owned(),
            format!("bootout {t}"),
            format!("print {t}")
        ]
    );
    assert!(
        !mac.loaded(LABEL),
        "stop unloads, so KeepAlive cannot start it again"
    );

    mac.ok(&["start", "--profile", "coder"]);
    let plist = mac.plist("coder");
    assert_eq!(
        mac.take_calls(),
        [
            "print gui/0".to_owned(),
            format!("print {t}"),
            format!("bootstrap gui/0 {}", plist.display()),
            format!("kickstart {t}")
        ]
    );

    mac.ok(&["uninstall", "--profile", "coder"]);
    let mut want = observe("gui/0");
    want.extend([format!("bootout {t}"), format!("print {t}")]);
    assert_eq!(mac.take_calls(), want);
    assert!(!plist.exists());
    assert!(!mac.loaded(LABEL));
}

#[test]
fn a_headless_mac_uses_the_user_domain() {
    let mac = Mac::new();
    mac.mark("headless", "");
    mac.ok(&["install", "--profile", "coder"]);
    assert_eq!(
        mac.take_calls(),
        install_calls("user/0", &mac.plist("coder"))
    );
}

#[test]
fn a_bootstrap_refused_with_5_is_booted_out_and_retried_once_and_a_second_refusal_is_an_error() {
    let mac = Mac::new();
    mac.mark("refuse-bootstrap", "1");
    mac.ok(&["install", "--profile", "coder"]);
    let plist = mac.plist("coder");
    let t = target("gui/0");
    let mut want = observe("gui/0");
    want.extend([
        format!("enable {t}"),
        format!("bootstrap gui/0 {}", plist.display()),
        format!("bootout {t}"),
        format!("print {t}"),
        format!("bootstrap gui/0 {}", plist.display()),
        format!("kickstart {t}"),
    ]);
    assert_eq!(mac.take_calls(), want);
    assert!(mac.loaded(LABEL));

    let other = Mac::new();
    other.mark("refuse-bootstrap", "99");
    let out = other.run(&["install", "--profile", "coder"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Input/output error") && err.contains("plutil -lint"),
        "{err}"
    );
    assert!(!other.loaded(LABEL));
    // Never a fallback to a gateway outside launchd: nothing but launchctl ran.
    assert!(other
        .take_calls()
        .iter()
        .all(|c| !c.contains("gateway run")));
}

#[test]
fn hermes_agents_own_plist_for_the_profile_is_refused_then_migrated() {
    let mac = Mac::new();
    std::fs::create_dir_all(mac.agents()).unwrap();
    let theirs = mac.agents().join("ai.hermes.gateway.plist");
    std::fs::write(
        &theirs,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
<key>Label</key><string>ai.hermes.gateway</string>
<key>ProgramArguments</key><array><string>/usr/local/bin/hermes</string><string>gateway</string><string>run</string><string>--replace</string></array>
<key>KeepAlive</key><true/>
</dict></plist>
"#,
    )
    .unwrap();
    mac.mark("loaded/ai.hermes.gateway", "");
    let out = mac.run(&["install", "--profile", "default"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ai.hermes.gateway") && err.contains("--migrate"),
        "{err}"
    );
    assert!(!mac.plist("default").exists(), "nothing written on refusal");

    let out = mac.ok(&["install", "--profile", "default", "--migrate"]);
    assert!(
        !mac.loaded("ai.hermes.gateway"),
        "theirs is booted out: {out}"
    );
    assert!(!theirs.exists());
    let kept: Vec<_> = std::fs::read_dir(mac.agents())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ai.hermes.gateway.plist.migrated."))
        .collect();
    assert_eq!(kept.len(), 1, "their file is kept as a backup");
    assert!(mac.loaded("ai.hermes.gateway.default"));
}

#[test]
fn status_reads_launchctl_print_and_a_hand_edit_is_kept() {
    let mac = Mac::new();
    mac.ok(&["install", "--profile", "coder"]);
    let out = mac.ok(&["status"]);
    assert!(
        out.contains("coder (ai.hermes.gateway.coder): running, pid 4242"),
        "{out}"
    );
    let plist = mac.plist("coder");
    let edited = std::fs::read_to_string(&plist)
        .unwrap()
        .replace("<integer>10</integer>", "<integer>11</integer>");
    std::fs::write(&plist, &edited).unwrap();
    let out = mac.ok(&["set", "--profile", "coder", "RestartSec=20"]);
    assert!(out.contains("edited by hand"), "{out}");
    assert_eq!(std::fs::read_to_string(&plist).unwrap(), edited);
    let out = mac.ok(&["status", "--profile", "coder"]);
    assert!(out.contains("[plist edited by hand]"), "{out}");
}

#[test]
fn render_target_launchd_prints_the_plist_anywhere() {
    let mac = Mac::new();
    let out = std::process::Command::new(BIN)
        .args(["render", "--profile", "coder", "--target", "launchd"])
        .env("HOME", mac.home.path())
        .env_remove("HERMES_SERVICE_MANAGER")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = Job::parse(&out.stdout).unwrap();
    assert_eq!(job.label.as_deref(), Some(LABEL));
    let out = mac.run(&["render", "--profile", "coder", "--target", "systemd"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Type=notify"), "{text}");
}

#[test]
fn a_credential_is_refused_under_launchd_and_nothing_is_touched() {
    let mac = Mac::new();
    let out = mac.run(&[
        "install",
        "--profile",
        "coder",
        "--credential",
        "DC_TOKEN=/etc/hostname",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--credential needs systemd") && stderr.contains(".env"),
        "{stderr}"
    );
    assert!(mac.take_calls().is_empty());
    assert!(!mac.plist("coder").exists());
}

/// `install --agent hermes` under launchd: a second job, `ai.hermes.agent.<profile>`, running
/// `hermes-svc agent run` with the profile and the Hermes program, logging beside the
/// gateway's; `uninstall` takes both away.
#[test]
fn the_agent_job_is_installed_beside_the_gateway_and_uninstalled_with_it() {
    let mac = Mac::new();
    let home = mac.home.path().join(".hermes/profiles/coder");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("gateway.toml"),
        "[agent]\nkind = \"hermes-relay\"\n",
    )
    .unwrap();
    let hermes = mac.home.path().join("hermes");
    std::fs::write(&hermes, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&hermes, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hermes = hermes.to_str().unwrap();
    mac.ok(&[
        "install",
        "--profile",
        "coder",
        "--agent",
        "hermes",
        "--agent-exec",
        hermes,
    ]);
    let agent = mac.agents().join("ai.hermes.agent.coder.plist");
    let job = hermes_svc::launchd::plist::Job::parse(&std::fs::read(&agent).unwrap()).unwrap();
    assert_eq!(job.label.as_deref(), Some("ai.hermes.agent.coder"));
    assert_eq!(
        &job.arguments[1..],
        ["agent", "run", "--profile", "coder", "--hermes", hermes]
    );
    let calls = mac.take_calls();
    assert!(
        calls
            .iter()
            .any(|c| c == &format!("bootstrap gui/0 {}", agent.display())),
        "{calls:?}"
    );
    assert!(mac.loaded("ai.hermes.agent.coder") && mac.loaded(LABEL));
    mac.ok(&["uninstall", "--profile", "coder"]);
    assert!(!agent.exists() && !mac.plist("coder").exists());
    assert!(!mac.loaded("ai.hermes.agent.coder") && !mac.loaded(LABEL));
}
