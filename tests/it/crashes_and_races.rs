//! A clumsy or hostile local user against the commands that change units, on a real user
//! manager: commands killed mid-way and rerun, writers racing each other, leftovers of a
//! crash, values systemd would misread, and files that are links.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use crate::harness::{scratch_dir, stderr, unit, Manager, BIN};

/// The environment the unit's running gateway actually has, from the kernel.
fn running_env(m: &Manager, unit: &str) -> Vec<String> {
    let pid = m.wait_active(unit);
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// Run hermes-svc `args` and kill it after `after`, wherever it is.
fn kill_after(m: &Manager, args: &[&str], after: Duration) {
    let mut child = m
        .command(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_killed_install_or_set_converges_on_rerun() {
    let m = Manager::boot();
    let u = unit("crash");
    m.hermes_ok(&["install", "--profile", "crash", "--env", "K=v0"]);
    m.wait_active(&u);
    for i in 1..=30 {
        let value = format!("K=v{i}");
        let args: Vec<&str> = if i % 2 == 0 {
            vec!["set", "--profile", "crash", &value]
        } else {
            vec!["install", "--profile", "crash", "--env", &value]
        };
        // Anywhere from before the first read to after the restart.
        kill_after(&m, &args, Duration::from_millis(fastrand::u64(0..120)));
        let out = m.hermes_ok(&args);
        let env = running_env(&m, &u);
        assert!(
            env.contains(&value),
            "round {i}: the gateway runs {:?} after `{}`, which said:\n{out}",
            env.iter()
                .filter(|v| v.starts_with("K="))
                .collect::<Vec<_>>(),
            args.join(" ")
        );
    }
    // No temporary file of a killed run is left, or taken for a person's drop-in.
    let leftovers: Vec<_> = std::fs::read_dir(m.unit_dir().join(format!("{u}.d")))
        .unwrap()
        .chain(std::fs::read_dir(m.unit_dir()).unwrap())
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
        .map(|e| e.path())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn concurrent_sets_keep_every_key() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "race", "--no-start"]);
    let dropin = m
        .unit_dir()
        .join(format!("{}.d/50-hermes-svc.conf", unit("race")));
    for round in 0..15 {
        let keys = ["X", "Y", "Z"].map(|k| format!("{k}={round}"));
        let children: Vec<_> = keys
            .iter()
            .map(|kv| {
                m.command(BIN)
                    .args(["set", "--profile", "race", kv])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
        let text = std::fs::read_to_string(&dropin).unwrap();
        for kv in &keys {
            assert!(
                text.contains(&format!("\"{kv}\"")),
                "round {round}: {kv} lost:\n{text}"
            );
        }
    }
}

#[test]
fn a_gateway_left_on_old_settings_is_reported_and_restarted_by_a_rerun() {
    let m = Manager::boot();
    let u = unit("stale");
    m.hermes_ok(&["install", "--profile", "stale"]);
    let pid = m.wait_active(&u);
    // Files updated, process not: what a kill between reload and restart leaves.
    m.hermes_ok(&["set", "--profile", "stale", "--no-restart", "MODE=new"]);
    assert_eq!(m.main_pid(&u), pid);
    let doctor = m.hermes(&["doctor", "--json", "--profile", "stale"]);
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "HSV017")
        .unwrap_or_else(|| panic!("no HSV017: {report}"));
    assert_eq!(f["fix"], format!("systemctl --user restart {u}"));
    // The same set again: every file is as wanted, but the process is not.
    let out = m.hermes_ok(&["set", "--profile", "stale", "MODE=new"]);
    assert!(out.contains("older settings"), "{out}");
    assert!(running_env(&m, &u).contains(&"MODE=new".to_owned()));
    assert_ne!(m.main_pid(&u), pid);
}

#[test]
fn leftover_temp_files_are_cleaned_not_taken_for_drop_ins() {
    let m = Manager::boot();
    let u = unit("tmp");
    m.hermes_ok(&["install", "--profile", "tmp", "--no-start", "--env", "A=1"]);
    let dir = m.unit_dir().join(format!("{u}.d"));
    // A pid that cannot be alive (above the kernel's pid_max).
    let leftover = dir.join(".50-hermes-svc.conf.tmp.99999999");
    std::fs::write(&leftover, "half").unwrap();
    let out = m.hermes_ok(&["install", "--profile", "tmp", "--no-start", "--env", "A=1"]);
    assert!(!out.contains("also applies"), "{out}");
    assert!(out.contains("leftover"), "{out}");
    assert!(!leftover.exists());
    std::fs::write(&leftover, "half").unwrap();
    m.hermes_ok(&["uninstall", "--profile", "tmp"]);
    assert!(!dir.exists(), "uninstall leaves nothing of ours");
}

#[test]
fn uninstall_keeps_a_hand_edited_dropin_as_a_backup() {
    let m = Manager::boot();
    let u = unit("handdrop");
    m.hermes_ok(&[
        "install",
        "--profile",
        "handdrop",
        "--no-start",
        "--env",
        "A=1",
    ]);
    let path = m.unit_dir().join(format!("{u}.d/50-hermes-svc.conf"));
    let edited = std::fs::read_to_string(&path).unwrap() + "Nice=5\n";
    std::fs::write(&path, &edited).unwrap();
    let out = m.hermes_ok(&["uninstall", "--profile", "handdrop"]);
    assert!(out.contains("kept as"), "{out}");
    let backups: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("50-hermes-svc.conf.bak.")
        })
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read_to_string(backups[0].path()).unwrap(), edited);
}

#[test]
fn values_systemd_would_misread_are_refused_before_anything_is_touched() {
    let m = Manager::boot();
    let refused = |args: &[&str], what: &str| {
        let out = m.hermes(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(what), "{args:?}: {}", stderr(&out));
    };
    refused(
        &["install", "--profile", "bad", "--env", "WatchdogSec=abc"],
        "--watchdog-sec",
    );
    refused(
        &["install", "--profile", "bad", "--env", "NOTIFY_SOCKET=/x"],
        "systemd sets it",
    );
    refused(
        &["install", "--profile", "bad", "--env", "WATCHDOG_USEC=1"],
        "systemd sets it",
    );
    refused(
        &["install", "--profile", "bad", "--env", "LISTEN_FDS=1"],
        "systemd sets it",
    );
    refused(
        &["install", "--profile", "bad", "--env", "HERMES_HOME=/x"],
        "HERMES_HOME",
    );
    refused(
        &[
            "install",
            "--profile",
            "bad",
            "--watchdog-sec",
            "18446744073709551615",
        ],
        "from 1 to 86400",
    );
    refused(
        &[
            "install",
            "--system",
            "--run-as",
            "no-such-user-here",
            "--profile",
            "bad",
            "--dry-run",
        ],
        "no such user",
    );
    let dir = scratch_dir("dollar");
    let exe = dir.path().join("hermes$svc");
    std::fs::copy(BIN, &exe).unwrap();
    refused(
        &[
            "install",
            "--profile",
            "bad",
            "--exec",
            exe.to_str().unwrap(),
        ],
        "'$'",
    );
    let glob_home = scratch_dir("glob");
    let home = glob_home.path().join("home[1]");
    let out = m
        .command(BIN)
        .args(["install", "--profile", "bad"])
        .env("HERMES_HOME", &home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("EnvironmentFile="),
        "{}",
        stderr(&out)
    );
    assert!(
        !m.unit_dir().join(unit("bad")).exists(),
        "nothing was written"
    );

    m.hermes_ok(&["install", "--profile", "good", "--no-start"]);
    let out = m.hermes(&[
        "set",
        "--profile",
        "good",
        "RestartSec=18446744073709551615",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = m.hermes(&["set", "--profile", "good", "NOTIFY_SOCKET=/run/x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn doctor_fix_never_chmods_through_a_link() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "linked", "--no-start"]);
    let target = scratch_dir("env-target");
    let secret = target.path().join("shared.env");
    std::fs::write(&secret, "T=1\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let env = m.profile_home("linked").join(".env");
    std::fs::create_dir_all(env.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&secret, &env).unwrap();
    let _ = m.hermes(&["doctor", "--fix", "--profile", "linked"]);
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the link's target kept its mode");
}

#[test]
fn doctor_with_nothing_to_check_says_it_could_not_run() {
    let dir = scratch_dir("nothing");
    let out = std::process::Command::new(BIN)
        .arg("doctor")
        .env("HERMES_HOME", dir.path().join("does-not-exist"))
        .env("XDG_RUNTIME_DIR", dir.path())
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}/no-bus", dir.path().display()),
        )
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            format!("unix:path={}/no-bus", dir.path().display()),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

#[test]
fn a_secret_pasted_into_token_env_is_not_echoed() {
    let m = Manager::boot();
    let home = m.profile_home("paste");
    std::fs::create_dir_all(&home).unwrap();
    let secret = "MTIzNDU2.Gx7-abc.def_SECRET";
    std::fs::write(
        home.join("gateway.toml"),
        format!("[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"{secret}\"\n"),
    )
    .unwrap();
    let out = m.hermes(&["gateway", "run", "--profile", "paste"]);
    assert_eq!(out.status.code(), Some(78));
    let text = stderr(&out) + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("token-env"), "{text}");
    assert!(!text.contains(secret), "the secret was echoed: {text}");
    let doctor = m.hermes(&["doctor", "--profile", "paste"]);
    let text = stderr(&doctor) + &String::from_utf8_lossy(&doctor.stdout);
    assert!(!text.contains(secret), "doctor echoed the secret: {text}");
}
