//! install, set, unset, uninstall and status against a real user manager.

use std::time::Duration;

use crate::harness::{scratch_dir, stderr, stdout, unit, wait_for, Manager, BIN};

#[test]
fn install_runs_a_notify_unit_with_an_explicit_profile() {
    let m = Manager::boot();
    let out = m.hermes_ok(&["install", "--profile", "inst1"]);
    assert!(out.contains("installed"), "{out}");
    let u = unit("inst1");
    m.wait_active(&u);
    let props = m.show(&u);
    assert_eq!(props["Type"], "notify");
    assert_eq!(props["NotifyAccess"], "main");
    assert_eq!(props["WatchdogUSec"], "30s");
    assert_eq!(props["Restart"], "always");
    assert_eq!(props["UnitFileState"], "enabled");
    // Memory has a ceiling, whatever a platform sends.
    assert_eq!(props["MemoryHigh"], (512u64 << 20).to_string());
    assert_eq!(props["MemoryMax"], (1u64 << 30).to_string());
    let exec = m.bus_property(&u, "org.freedesktop.systemd1.Service", "ExecStart");
    let argv: Vec<String> = serde_json::from_value(exec[0][1].clone()).unwrap();
    assert_eq!(argv, [BIN, "gateway", "run", "--profile", "inst1"]);
    assert!(!argv.iter().any(|a| a == "--replace"));

    // The file we wrote passes systemd's own verification, against this manager.
    let path = m.unit_dir().join(&u);
    let verify = m
        .command("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(stdout(&verify) + &stderr(&verify), "", "verify complained");
}

#[test]
fn second_install_is_unchanged_and_changed_inputs_restart_once() {
    let m = Manager::boot();
    let u = unit("idem");
    m.hermes_ok(&["install", "--profile", "idem"]);
    m.wait_active(&u);
    let before = m.show(&u);
    let out = m.hermes_ok(&["install", "--profile", "idem", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["outcome"], "unchanged", "{out}");
    assert_eq!(report["steps"].as_array().unwrap().len(), 0);
    let after = m.show(&u);
    assert_eq!(before["InvocationID"], after["InvocationID"]);
    assert_eq!(before["NRestarts"], after["NRestarts"]);
    assert_eq!(before["MainPID"], after["MainPID"]);

    // New inputs: only the drop-in changes, and the running unit restarts once.
    let out = m.hermes_ok(&["install", "--profile", "idem", "--env", "MODE=fast"]);
    assert!(out.contains("updated"), "{out}");
    assert!(
        !out.contains("idem.service ("),
        "base unit must not be rewritten: {out}"
    );
    let after = m.show(&u);
    assert_ne!(before["InvocationID"], after["InvocationID"]);
    assert!(after["Environment"].contains("MODE=fast"));
    let out = m.hermes_ok(&["install", "--profile", "idem", "--env", "MODE=fast"]);
    assert!(out.contains("unchanged"), "{out}");
}

#[test]
fn a_hand_edited_unit_survives_install_and_settings_go_to_the_dropin() {
    let m = Manager::boot();
    let u = unit("edited");
    m.hermes_ok(&["install", "--profile", "edited"]);
    let path = m.unit_dir().join(&u);
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("KillMode=mixed", "KillMode=mixed\nNice=7");
    std::fs::write(&path, &edited).unwrap();

    let out = m.hermes_ok(&["install", "--profile", "edited", "--env", "EXTRA=1"]);
    assert!(out.contains("edited by hand"), "{out}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
    let dropin =
        std::fs::read_to_string(m.unit_dir().join(format!("{u}.d/50-hermes-svc.conf"))).unwrap();
    assert!(dropin.contains("Environment=\"EXTRA=1\""), "{dropin}");
    m.wait_active(&u);
    let props = m.show(&u);
    assert_eq!(props["Nice"], "7", "the edit is live");
    assert!(
        props["Environment"].contains("EXTRA=1"),
        "the drop-in is live"
    );
    let status: serde_json::Value =
        serde_json::from_str(&m.hermes_ok(&["status", "--json", "--profile", "edited"])).unwrap();
    assert_eq!(status["units"][0]["edited"], true);

    // --force backs the edit up, then rewrites.
    m.hermes_ok(&["install", "--profile", "edited", "--force"]);
    let backups: Vec<_> = std::fs::read_dir(m.unit_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{u}.bak."))
        })
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read_to_string(backups[0].path()).unwrap(), edited);
    assert!(!std::fs::read_to_string(&path).unwrap().contains("Nice=7"));
}

#[test]
fn environment_and_exec_paths_round_trip_exactly() {
    let m = Manager::boot();
    // An executable path with a space and a percent sign.
    let dir = scratch_dir("exec dir%x");
    let exe = dir.path().join("hermes svc%1");
    std::fs::copy(BIN, &exe).unwrap();
    let values = [
        ("PERCENT", "100% sure %h"),
        ("DOLLAR", "$HOME and ${X} $$"),
        ("QUOTES", r#"say "hi" it's"#),
        ("BACKSLASH", r"C:\path\ end\"),
        ("SPACES", "  two  spaces  "),
    ];
    let mut args = vec![
        "install".to_owned(),
        "--profile".into(),
        "roundtrip".into(),
        "--exec".into(),
        exe.display().to_string(),
    ];
    for (k, v) in values {
        args.push("--env".into());
        args.push(format!("{k}={v}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    m.hermes_ok(&args);
    let u = unit("roundtrip");
    m.wait_active(&u);
    let env: Vec<String> = serde_json::from_value(m.bus_property(
        &u,
        "org.freedesktop.systemd1.Service",
        "Environment",
    ))
    .unwrap();
    for (k, v) in values {
        assert!(
            env.contains(&format!("{k}={v}")),
            "{k}={v:?} not in {env:?}"
        );
    }
    let exec = m.bus_property(&u, "org.freedesktop.systemd1.Service", "ExecStart");
    assert_eq!(exec[0][0], exe.display().to_string());
    assert_eq!(exec[0][1][0], exe.display().to_string());
}

#[test]
fn bad_input_is_one_line_exit_2_and_writes_nothing() {
    let m = Manager::boot();
    let cases: &[&[&str]] = &[
        &["install", "--profile", "../x"],
        &["install", "--profile", "A"],
        &["install", "--profile", "a b"],
        &["install", "--profile", "x\nExecStartPre=/bin/sh"],
        &["install", "--profile", ""],
        &["install", "--profile", &"a".repeat(65)],
        &["install", "--profile", "ok", "--env", "NOEQUALS"],
        &["install", "--profile", "ok", "--env", "K=line\nbreak"],
        &["install", "--profile", "ok", "--env", "1BAD=x"],
        &[
            "install",
            "--profile",
            "ok",
            "--exec",
            "relative/hermes-svc",
        ],
        &[
            "install",
            "--profile",
            "ok",
            "--exec",
            "/nonexistent/hermes-svc",
        ],
        &["install", "--profile", "ok", "--watchdog-sec", "soon"],
        &["install", "--profile", "ok", "--run-as", "root"],
        &["set", "--profile", "ok", "NOEQUALS"],
    ];
    for args in cases {
        let out = m.hermes(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?}: one line expected, got:\n{err}"
        );
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(m.unit_dir()).unwrap().count(), 0);
    assert!(!m.hermes_home().exists());
}

#[test]
fn a_legacy_unit_for_the_same_profile_blocks_install_until_migrate() {
    let m = Manager::boot();
    let home = m.hermes_home();
    std::fs::create_dir_all(&home).unwrap();
    // The field's legacy unit: no --profile, --replace, and a sticky active_profile.
    std::fs::write(home.join("active_profile"), "legacy1\n").unwrap();
    let legacy = m.start_legacy_unit("hermes-gateway.service", &home);

    let out = m.hermes(&["install", "--profile", "legacy1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("hermes-gateway.service") && err.contains("--migrate"),
        "{err}"
    );
    assert!(
        !m.unit_dir().join(unit("legacy1")).exists(),
        "refusal writes nothing"
    );

    let out = m.hermes_ok(&["install", "--profile", "legacy1", "--migrate"]);
    assert!(out.contains("migrated hermes-gateway.service"), "{out}");
    m.wait_active(&unit("legacy1"));
    let old = m.show("hermes-gateway.service");
    assert_ne!(old["ActiveState"], "active");
    assert!(!legacy.exists());
    let kept = std::fs::read_dir(m.unit_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("hermes-gateway.service.migrated.")
        });
    assert!(kept, "the legacy file is kept as a backup");
    assert!(!m
        .unit_dir()
        .join("default.target.wants/hermes-gateway.service")
        .exists());
}

#[test]
fn uninstall_removes_ours_and_keeps_the_persons_override() {
    let m = Manager::boot();
    let u = unit("gone");
    m.hermes_ok(&["install", "--profile", "gone", "--env", "A=1"]);
    m.wait_active(&u);
    let dropins = m.unit_dir().join(format!("{u}.d"));
    std::fs::write(dropins.join("override.conf"), "[Service]\nNice=3\n").unwrap();
    let home = m.profile_home("gone");
    assert!(home.exists());

    let out = m.hermes_ok(&["uninstall", "--profile", "gone"]);
    assert!(out.contains("kept your drop-in"), "{out}");
    assert!(!m.unit_dir().join(&u).exists());
    assert!(!dropins.join("50-hermes-svc.conf").exists());
    assert!(dropins.join("override.conf").exists());
    assert!(!m.unit_dir().join("default.target.wants").join(&u).exists());
    let props = m.show(&u);
    assert_ne!(props["ActiveState"], "active");
    assert_eq!(props["LoadState"], "not-found");
    assert!(home.exists(), "profile data is never deleted");
    let out = m.hermes_ok(&["uninstall", "--profile", "gone"]);
    assert!(out.contains("nothing to do"), "{out}");
}

#[test]
fn set_and_unset_manage_only_our_dropin() {
    let m = Manager::boot();
    let u = unit("tune");
    m.hermes_ok(&["install", "--profile", "tune"]);
    m.wait_active(&u);
    let inv = m.prop(&u, "InvocationID");
    m.hermes_ok(&[
        "set",
        "--profile",
        "tune",
        "WatchdogSec=12",
        "HTTPS_PROXY=http://p:8080",
    ]);
    let props = m.show(&u);
    assert_eq!(props["WatchdogUSec"], "12s");
    assert!(props["Environment"].contains("HTTPS_PROXY=http://p:8080"));
    assert_ne!(props["InvocationID"], inv, "a running unit restarts on set");

    let inv = m.prop(&u, "InvocationID");
    m.hermes_ok(&["unset", "--profile", "tune", "HTTPS_PROXY", "--no-restart"]);
    assert_eq!(
        m.prop(&u, "InvocationID"),
        inv,
        "--no-restart keeps it running"
    );
    assert!(!m.prop(&u, "Environment").contains("HTTPS_PROXY"));
    m.hermes_ok(&["unset", "--profile", "tune", "WatchdogSec"]);
    assert!(!m
        .unit_dir()
        .join(format!("{u}.d/50-hermes-svc.conf"))
        .exists());
    assert_eq!(m.prop(&u, "WatchdogUSec"), "30s");

    let out = m.hermes(&["set", "--profile", "absent", "A=1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not installed"), "{}", stderr(&out));
}

#[test]
fn two_profiles_run_side_by_side_without_restarts() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "default"]);
    m.hermes_ok(&["install", "--profile", "coder"]);
    let units = [("default", unit("default")), ("coder", unit("coder"))];
    let start = std::time::Instant::now();
    // Watch for 30 s: no restart may happen, and each pid file must name its own unit.
    while start.elapsed() < Duration::from_secs(30) {
        for (profile, u) in &units {
            let props = m.show(u);
            assert_eq!(props["NRestarts"], "0", "{u} restarted");
            assert_eq!(props["ActiveState"], "active", "{u} not active");
            let pid_file = m.profile_home(profile).join("gateway.pid");
            let rec: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&pid_file).unwrap()).unwrap();
            assert_eq!(rec["pid"].to_string(), props["MainPID"], "{pid_file:?}");
            assert_eq!(rec["profile"], *profile);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let status: serde_json::Value =
        serde_json::from_str(&m.hermes_ok(&["status", "--json"])).unwrap();
    let names: Vec<&str> = status["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["profile"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["coder", "default"]);
    // Each gateway's own health report is read from its profile's state file, and is current.
    for u in status["units"].as_array().unwrap() {
        let health = &u["health"];
        assert_eq!(health["summary"], "no adapters configured", "{u}");
        assert_eq!(health["stale"], false, "{u}");
    }
}

#[test]
fn a_killed_or_cleanly_exited_gateway_comes_back() {
    let m = Manager::boot();
    let u = unit("phoenix");
    m.hermes_ok(&["install", "--profile", "phoenix", "--restart-sec", "1"]);
    let first = m.wait_active(&u);
    let pid_file = m.profile_home("phoenix").join("gateway.pid");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The old pid file is still there (SIGKILL leaves it); the new process starts anyway.
    let second = wait_for(Duration::from_secs(20), "a restart after SIGKILL", || {
        let pid = m.wait_active(&u);
        (pid != first).then_some(pid)
    });
    wait_for(
        Duration::from_secs(5),
        "the pid file to name the new process",
        || {
            std::fs::read_to_string(&pid_file)
                .ok()
                .filter(|t| t.contains(&format!("\"pid\": {second}")))
        },
    );
    assert_eq!(m.prop(&u, "NRestarts"), "1");

    // A clean exit 0 that systemd did not ask for (SIGTERM from outside) also restarts.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(second as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_for(Duration::from_secs(20), "a restart after exit 0", || {
        let pid = m.wait_active(&u);
        (pid != second).then_some(())
    });
    assert_eq!(m.prop(&u, "NRestarts"), "2");
}

#[test]
fn a_system_install_creates_the_profile_home_for_its_user() {
    let dir = scratch_dir("system-home");
    let home = dir.path().join("bot-home/.hermes");
    let out = std::process::Command::new(BIN)
        .args([
            "install",
            "--system",
            "--run-as",
            "nobody",
            "--profile",
            "sys1",
            "--dry-run",
        ])
        .env("HERMES_HOME", &home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains(&format!(
            "create {} owned by nobody",
            home.join("profiles/sys1").display()
        )),
        "{text}"
    );
    assert!(!home.exists(), "a dry run creates nothing");
}
