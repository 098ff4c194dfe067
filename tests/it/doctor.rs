//! `doctor` against a real user manager: a clean install, the field's flap loop rebuilt, a
//! shared token that must never be printed, and no bus at all.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

use crate::harness::{scratch_dir, stderr, stdout, unit, Manager, BIN};

/// Run doctor on `m`'s manager. The system bus points nowhere, so the host's own system
/// manager can never leak into a test.
pub(crate) fn doctor(m: &Manager, args: &[&str]) -> Output {
    m.command(BIN)
        .arg("doctor")
        .args(args)
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/dr-system-bus",
        )
        .output()
        .unwrap()
}

pub(crate) fn findings(out: &Output) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(out), stderr(out)));
    v["findings"].as_array().unwrap().clone()
}

fn has(fs: &[serde_json::Value], id: &str, severity: &str) -> bool {
    fs.iter()
        .any(|f| f["id"] == id && f["severity"] == severity)
}

#[test]
fn a_clean_two_profile_install_has_no_errors_or_warnings() {
    let m = Manager::boot();
    for p in ["dra1", "dra2"] {
        m.hermes_ok(&["install", "--profile", p]);
        m.wait_active(&unit(p));
    }
    let out = doctor(&m, &["--json"]);
    let fs = findings(&out);
    let bad: Vec<_> = fs
        .iter()
        .filter(|f| f["severity"] == "error" || f["severity"] == "warn")
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(
        !has(&fs, "HSV000", "warn"),
        "the user manager answered: {fs:#?}"
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for f in &fs {
        let keys: Vec<_> = f.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 5, "{f}");
    }
    let text = doctor(&m, &["--profile", "dra1"]);
    assert_eq!(text.status.code(), Some(0), "{}", stdout(&text));
}

#[test]
fn the_flap_loop_is_reported_as_replace_no_profile_and_duplicate_units() {
    let m = Manager::boot();
    let home = m.hermes_home();
    std::fs::create_dir_all(home.join("profiles/drflap")).unwrap();
    std::fs::write(home.join("active_profile"), "drflap\n").unwrap();
    m.start_legacy_unit("hermes-gateway.service", &home);

    let out = doctor(&m, &["--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let fs = findings(&out);
    assert!(has(&fs, "HSV002", "error"), "{fs:#?}");
    assert!(
        has(&fs, "HSV003", "error"),
        "sticky file makes it an error: {fs:#?}"
    );
    assert!(!fs.iter().any(|f| f["id"] == "HSV001"), "{fs:#?}");
    let legacy = fs.iter().find(|f| f["id"] == "HSV002").unwrap();
    assert_eq!(legacy["subject"], "hermes-gateway.service");
    assert_eq!(
        legacy["fix"],
        "hermes-svc install --profile drflap --migrate"
    );

    // Ours for the same profile, written beside it (install itself would refuse).
    let ours = m.hermes_ok(&["render", "--profile", "drflap"]);
    std::fs::write(m.unit_dir().join(unit("drflap")), ours).unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    let out = doctor(&m, &["--json", "--profile", "drflap"]);
    assert_eq!(out.status.code(), Some(1));
    let fs = findings(&out);
    let dup = fs.iter().find(|f| f["id"] == "HSV001").expect("HSV001");
    let msg = dup["message"].as_str().unwrap();
    assert!(
        msg.contains("hermes-gateway.service") && msg.contains(&unit("drflap")),
        "{msg}"
    );
    let text = stdout(&doctor(&m, &[]));
    assert!(
        text.contains("profile drflap:") && text.contains("HSV001"),
        "{text}"
    );
}

#[test]
fn a_shared_token_is_reported_by_hash_and_never_printed() {
    let m = Manager::boot();
    let secret = "dr-very-secret-token-value-9f8e7d";
    for p in ["drtok1", "drtok2"] {
        let home = m.profile_home(p);
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("gateway.toml"),
            "[[adapter]]\nname = \"ws\"\nkind = \"websocket\"\nurl = \"ws://127.0.0.1:9/\"\ntoken-env = \"DR_TOKEN\"\n",
        )
        .unwrap();
        let env = home.join(".env");
        std::fs::write(&env, format!("DR_TOKEN={secret}\n")).unwrap();
        std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let json = doctor(&m, &["--json"]);
    let text = doctor(&m, &[]);
    for out in [&json, &text] {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(out));
        let all = stdout(out) + &stderr(out);
        assert!(!all.contains(secret), "the secret leaked:\n{all}");
        assert!(
            !all.contains("9f8e7d"),
            "a piece of the secret leaked:\n{all}"
        );
    }
    let fs = findings(&json);
    let shared: Vec<_> = fs.iter().filter(|f| f["id"] == "HSV006").collect();
    assert_eq!(shared.len(), 2, "{fs:#?}");
    assert!(shared.iter().all(|f| f["severity"] == "error"));
    assert!(stdout(&text).contains("HSV006"));
}

#[test]
fn no_bus_at_all_does_not_crash() {
    let dir = scratch_dir("dr-nobus");
    let xdg = dir.path().join("xdg");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::create_dir_all(home.join(".hermes/profiles/drnobus")).unwrap();
    let run = |with_home: bool| {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_RUNTIME_DIR", &xdg)
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}/nowhere", xdg.display()),
            )
            .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/dr-bus")
            .args(["doctor", "--json"])
            .stdin(Stdio::null());
        if with_home {
            cmd.env("HOME", &home);
        }
        cmd.output().unwrap()
    };
    // The disk can still be checked: the missing bus is a finding, not a crash.
    let out = run(true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fs = findings(&out);
    assert!(has(&fs, "HSV000", "warn"), "{fs:#?}");
    // Nothing at all to look at: doctor itself could not run.
    let out = run(false);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing to check"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn disk_findings_and_profile_narrowing() {
    let m = Manager::boot();
    let bad = m.profile_home("drcfg");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("gateway.toml"), "[[adapter]]\nname = 1\n").unwrap();
    let env = bad.join(".env");
    std::fs::write(&env, "X=1\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A pid file whose process has exited.
    let mut child = Command::new("/bin/true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    std::fs::write(
        bad.join("gateway.pid"),
        serde_json::json!({
            "pid": dead, "profile": "drcfg", "home": bad,
            "started_at": "2026-01-01T00:00:00Z"
        })
        .to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(m.profile_home("drok")).unwrap();

    let out = doctor(&m, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let fs = findings(&out);
    for (id, sev) in [("HSV015", "error"), ("HSV012", "warn"), ("HSV007", "warn")] {
        let f = fs
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing: {fs:#?}"));
        assert_eq!(f["severity"], sev, "{f}");
        assert_eq!(f["subject"], "drcfg", "{f}");
    }
    let out = doctor(&m, &["--json", "--profile", "drok"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(findings(&out).iter().all(|f| f["subject"] != "drcfg"));
    let out = doctor(&m, &["--profile", "Not Valid"]);
    assert_eq!(out.status.code(), Some(2));

    // Text: plain through a pipe, coloured on a terminal (a real pty from script(1)), plain
    // again on that terminal with NO_COLOR.
    let piped = stdout(&doctor(&m, &[]));
    assert!(piped.contains("HSV015 error drcfg"), "{piped}");
    assert!(!piped.contains('\x1b'), "{piped}");
    let on_tty = |no_color: Option<&str>| {
        let mut cmd = m.command("script");
        cmd.args(["-qec", &format!("{BIN} doctor"), "/dev/null"])
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/nonexistent/dr-system-bus",
            )
            .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        stdout(&cmd.output().unwrap())
    };
    let tty = on_tty(None);
    assert!(
        tty.contains("HSV015 \x1b[1;31merror\x1b[0m drcfg"),
        "{tty:?}"
    );
    assert!(tty.contains("\x1b[1mprofile drcfg:\x1b[0m"), "{tty:?}");
    let tty = on_tty(Some("1"));
    assert!(tty.contains("HSV015 error drcfg"), "{tty:?}");
    assert!(!tty.contains('\x1b'), "{tty:?}");
}

/// The field's flap loop: a legacy `hermes-gateway.service` (no `--profile`) that the sticky
/// `active_profile` moved onto profile drfixc, while a hand-written `hermes-gateway-drfixc.service`
/// serves it too, both with `--replace`. `doctor --fix` migrates the legacy unit away (and
/// never touches the person's file at our unit's path); `install --migrate` for each profile
/// then leaves both running our units, steadily.
#[test]
fn doctor_fix_then_install_migrate_ends_the_flap_loop() {
    let m = Manager::boot();
    let home = m.hermes_home();
    std::fs::create_dir_all(home.join("profiles/drfixc")).unwrap();
    std::fs::write(home.join("active_profile"), "drfixc\n").unwrap();
    let legacy = |profile_arg: &str| {
        format!(
            "[Service]\nEnvironment=HERMES_HOME={}\nExecStart=/bin/sh -c \"exec sleep 600\" hermes gateway run{profile_arg} --replace\nRestart=always\n\n[Install]\nWantedBy=default.target\n",
            home.display()
        )
    };
    std::fs::write(m.unit_dir().join("hermes-gateway.service"), legacy("")).unwrap();
    let mine = m.unit_dir().join(unit("drfixc"));
    std::fs::write(&mine, legacy(" --profile drfixc")).unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    for u in ["hermes-gateway.service", &unit("drfixc")] {
        assert!(m.systemctl(&["enable", "--now", u]).status.success());
        m.wait_active(u);
    }

    let out = doctor(&m, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let fs = findings(&out);
    for id in ["HSV001", "HSV002", "HSV003"] {
        assert!(has(&fs, id, "error"), "{id}: {fs:#?}");
    }

    let out = doctor(&m, &["--fix", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    let fixed = v["fixed"].as_array().unwrap();
    assert!(
        fixed
            .iter()
            .any(|f| f["subject"] == "hermes-gateway.service"
                && f["action"]
                    .as_str()
                    .unwrap()
                    .contains("now run: hermes-svc install --profile drfixc --migrate")),
        "{v:#}"
    );
    for f in fixed {
        assert_eq!(f.as_object().unwrap().len(), 3, "{f}");
        assert_ne!(
            f["subject"],
            unit("drfixc"),
            "a person's unit file is never a target"
        );
    }
    // What remains decides the exit code: the person's own unit still runs --replace.
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "HSV002" && f["subject"] == unit("drfixc")),
        "{v:#}"
    );
    // The person's file at our path is untouched; the legacy unit is moved aside and stopped.
    assert_eq!(
        std::fs::read_to_string(&mine).unwrap(),
        legacy(" --profile drfixc")
    );
    assert!(!m.unit_dir().join("hermes-gateway.service").exists());
    assert!(std::fs::read_dir(m.unit_dir()).unwrap().flatten().any(|e| e
        .file_name()
        .to_string_lossy()
        .starts_with("hermes-gateway.service.migrated.")));
    assert_ne!(m.prop("hermes-gateway.service", "ActiveState"), "active");
    // Text mode names what it left alone and the command for it.
    let text = stdout(&doctor(&m, &["--fix"]));
    assert!(
        text.contains("not fixed") && text.contains("by hand:"),
        "{text}"
    );

    m.hermes_ok(&["install", "--profile", "drfixc", "--migrate"]);
    m.hermes_ok(&["install", "--profile", "default", "--migrate"]);
    let units = [("drfixc", unit("drfixc")), ("default", unit("default"))];
    for (_, u) in &units {
        m.wait_active(u);
    }
    let restarts: Vec<String> = units.iter().map(|(_, u)| m.prop(u, "NRestarts")).collect();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(30) {
        for ((profile, u), before) in units.iter().zip(&restarts) {
            let props = m.show(u);
            assert_eq!(&props["NRestarts"], before, "{u} restarted");
            assert_eq!(props["ActiveState"], "active", "{u} not active");
            assert!(props["ExecStart"].contains("--profile"), "{u} is ours");
            let pid_file = m.profile_home(profile).join("gateway.pid");
            if let Ok(text) = std::fs::read_to_string(&pid_file) {
                let rec: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(rec["pid"].to_string(), props["MainPID"], "{pid_file:?}");
                assert_eq!(rec["profile"], *profile);
            } else {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(10),
                    "{pid_file:?} missing"
                );
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let out = doctor(&m, &["--json"]);
    let fs = findings(&out);
    assert!(!fs.iter().any(|f| f["severity"] == "error"), "{fs:#?}");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
