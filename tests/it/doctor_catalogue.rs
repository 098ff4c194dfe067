//! `doctor` reading a manager as it really is: every finding of the catalogue with a near miss
//! beside it, a bus policy that refuses it, a unit that vanishes mid-run, an alias, a template
//! and a gateway started by hand. Each time the rest is still checked.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use crate::doctor::{doctor, findings};
use crate::harness::{stderr, stdout, unit, Manager, BIN};

fn with_subject<'a>(
    fs: &'a [serde_json::Value],
    id: &str,
    subject: &str,
) -> Vec<&'a serde_json::Value> {
    fs.iter()
        .filter(|f| f["id"] == id && f["subject"] == subject)
        .collect()
}

/// A bus policy that refuses doctor, first for one unit's object and then for the whole
/// manager. Either way doctor names what it could not read and still checks everything else;
/// exit 2 is only for when nothing at all can be checked.
#[test]
fn access_denied_is_a_finding_and_the_rest_is_still_checked() {
    let m = Manager::boot_with_bus_policy();
    for p in ["drden1", "drden2"] {
        m.hermes_ok(&["install", "--profile", p, "--no-start"]);
    }
    // A disk finding that no bus denial may hide.
    let env = m.profile_home("drden2").join(".env");
    std::fs::create_dir_all(env.parent().unwrap()).unwrap();
    std::fs::write(&env, "X=1\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();

    let path = hermes_svc::systemd::unit_object_path(&unit("drden1"));
    m.set_bus_policy(&format!(
        r#"<policy context="mandatory">
             <deny send_destination="org.freedesktop.systemd1" send_path="{path}"/>
           </policy>"#
    ));
    let out = doctor(&m, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fs = findings(&out);
    let denied = with_subject(&fs, "HSV000", &unit("drden1"));
    assert_eq!(denied.len(), 1, "{fs:#?}");
    assert_eq!(denied[0]["severity"], "warn");
    assert!(
        denied[0]["message"].as_str().unwrap().contains("denied"),
        "{fs:#?}"
    );
    assert!(
        with_subject(&fs, "HSV000", &unit("drden2")).is_empty(),
        "{fs:#?}"
    );
    assert!(
        with_subject(&fs, "HSV000", "user bus").is_empty(),
        "{fs:#?}"
    );
    assert_eq!(with_subject(&fs, "HSV012", "drden2").len(), 1, "{fs:#?}");

    m.set_bus_policy(
        r#"<policy context="mandatory">
             <deny send_destination="org.freedesktop.systemd1"/>
           </policy>"#,
    );
    let out = doctor(&m, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fs = findings(&out);
    let bus = with_subject(&fs, "HSV000", "user bus");
    assert_eq!(bus.len(), 1, "{fs:#?}");
    assert!(
        bus[0]["message"].as_str().unwrap().contains("denied"),
        "{fs:#?}"
    );
    assert!(
        bus[0]["fix"].as_str().unwrap().contains("session.d"),
        "{fs:#?}"
    );
    assert_eq!(with_subject(&fs, "HSV012", "drden2").len(), 1, "{fs:#?}");
    // The text report says the same, and --fix still does the safe disk fix.
    let text = doctor(&m, &[]);
    assert!(stdout(&text).contains("HSV000"), "{}", stdout(&text));
    let fixed = doctor(&m, &["--fix"]);
    assert!(fixed.status.code().is_some_and(|c| c <= 1), "{fixed:?}");
    assert_eq!(
        std::fs::metadata(&env).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// A unit removed while doctor is between listing units and reading them (held there by the
/// debug build's pause hook) is simply gone: no finding about it, no error, and every other
/// unit is still read and checked.
#[test]
fn a_unit_that_vanishes_mid_run_is_skipped_and_the_rest_checked() {
    use std::os::unix::fs::OpenOptionsExt;
    let m = Manager::boot();
    for p in ["drgone", "drkeep"] {
        m.hermes_ok(&["install", "--profile", p, "--no-start"]);
    }
    // A hand edit on the survivor: its HSV009 proves it was read after the pause.
    let keep = m.unit_dir().join(unit("drkeep"));
    let mut text = std::fs::read_to_string(&keep).unwrap();
    text.push_str("# tuned by hand\n");
    std::fs::write(&keep, text).unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());

    let fifo = m.dir.path().join("units-listed");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let child = m
        .command(BIN)
        .args(["doctor", "--json"])
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/dr-bus")
        .env(
            "HERMES_TEST_FAULT",
            format!("pause:units-listed:{}", fifo.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The write end opens only once doctor waits on the read end: it has listed the units.
    let hold = crate::harness::wait_for(
        std::time::Duration::from_secs(20),
        "doctor to pause after listing units",
        || {
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(&fifo)
                .ok()
        },
    );
    m.hermes_ok(&["uninstall", "--profile", "drgone"]);
    drop(hold);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fs = findings(&out);
    assert!(
        !fs.iter().any(|f| f.to_string().contains("drgone")),
        "{fs:#?}"
    );
    assert_eq!(
        with_subject(&fs, "HSV009", &unit("drkeep")).len(),
        1,
        "{fs:#?}"
    );
}

/// Write, load and (when `start`) start a unit a person wrote by hand, whose `ExecStart`
/// carries a gateway command line that doctor judges from.
fn hand_unit(m: &Manager, name: &str, service: &str, start: bool) {
    std::fs::write(m.unit_dir().join(name), format!("[Service]\n{service}\n")).unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    if start {
        assert!(m.systemctl(&["start", name]).status.success());
    }
}

/// The findings not built elsewhere, each on the real manager with a near miss beside it:
/// HSV004/HSV005 (a hand-written unit with `Restart=on-failure` and no watchdog), HSV008 (a
/// failed unit), HSV010 (an edit not yet reloaded), HSV013 (a real gateway whose cron ticker is
/// wedged while a person's override switched the watchdog off: deaf but alive) and HSV014 (a
/// missing binary). Our own running unit is the near miss for all of them. (HSV011 needs
/// logind on a system bus, which these managers have not; it is unit-tested.)
#[test]
fn the_rest_of_the_catalogue_is_found_on_the_real_manager() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "drfine"]);
    m.wait_active(&unit("drfine"));
    hand_unit(
        &m,
        "hermes-gateway-lax.service",
        "Restart=on-failure\nExecStart=/bin/sh -c \"exec sleep 600\" hermes gateway run --profile drlax",
        true,
    );
    hand_unit(
        &m,
        "hermes-gateway-fail.service",
        "ExecStart=/bin/sh -c \"exit 3\" hermes gateway run --profile drfail",
        true,
    );
    hand_unit(
        &m,
        "hermes-gateway-noexe.service",
        "ExecStart=/nonexistent/hermes gateway run --profile drnoexe",
        false,
    );
    // A cron job, so the gateway runs a cron ticker for the fault to wedge, and a person's
    // override that switches the watchdog off.
    let deaf_home = m.profile_home("drdeaf");
    std::fs::create_dir_all(&deaf_home).unwrap();
    std::fs::write(
        deaf_home.join("gateway.toml"),
        "[[cron]]\nname = \"yearly\"\nschedule = \"0 0 1 1 *\"\ncommand = [\"/bin/true\"]\n",
    )
    .unwrap();
    let dropin = m.unit_dir().join(format!("{}.d", unit("drdeaf")));
    std::fs::create_dir_all(&dropin).unwrap();
    std::fs::write(dropin.join("override.conf"), "[Service]\nWatchdogSec=0\n").unwrap();
    m.hermes_ok(&[
        "install",
        "--profile",
        "drdeaf",
        "--env",
        "HERMES_TEST_FAULT=wedge:cron",
    ]);
    crate::harness::wait_for(
        std::time::Duration::from_secs(20),
        "hermes-gateway-fail.service to fail",
        || (m.prop("hermes-gateway-fail.service", "ActiveState") == "failed").then_some(()),
    );

    // The cron ticker goes stale 5 s after it wedges; poll doctor until it says so.
    let fs = crate::harness::wait_for(
        std::time::Duration::from_secs(30),
        "doctor to find drdeaf deaf",
        || {
            let fs = findings(&doctor(&m, &["--json"]));
            (!with_subject(&fs, "HSV013", &unit("drdeaf")).is_empty()).then_some(fs)
        },
    );
    let ids_of = |subject: &str| -> Vec<String> {
        let mut ids: Vec<String> = fs
            .iter()
            .filter(|f| f["subject"] == subject)
            .map(|f| {
                format!(
                    "{} {}",
                    f["id"].as_str().unwrap(),
                    f["severity"].as_str().unwrap()
                )
            })
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids_of("hermes-gateway-lax.service"),
        ["HSV004 warn", "HSV005 warn"],
        "{fs:#?}"
    );
    assert_eq!(
        ids_of("hermes-gateway-fail.service"),
        ["HSV004 warn", "HSV005 warn", "HSV008 error"],
        "{fs:#?}"
    );
    assert!(
        ids_of("hermes-gateway-noexe.service").contains(&"HSV014 error".to_owned()),
        "{fs:#?}"
    );
    assert_eq!(
        ids_of(&unit("drdeaf")),
        ["HSV005 warn", "HSV013 error"],
        "{fs:#?}"
    );
    let deaf = with_subject(&fs, "HSV013", &unit("drdeaf"));
    assert!(
        deaf[0]["message"].as_str().unwrap().contains("cron"),
        "{deaf:#?}"
    );
    assert!(ids_of(&unit("drfine")).is_empty(), "{fs:#?}");

    // An edit the manager has not read yet, then the near miss once it has.
    let fine = m.unit_dir().join(unit("drfine"));
    let mut text = std::fs::read_to_string(&fine).unwrap();
    text.push_str("# tuned by hand\n");
    std::fs::write(&fine, text).unwrap();
    let fs = findings(&doctor(&m, &["--json"]));
    assert_eq!(
        with_subject(&fs, "HSV010", &unit("drfine")).len(),
        1,
        "{fs:#?}"
    );
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    let fs = findings(&doctor(&m, &["--json"]));
    assert!(
        with_subject(&fs, "HSV010", &unit("drfine")).is_empty(),
        "{fs:#?}"
    );
    assert_eq!(
        with_subject(&fs, "HSV009", &unit("drfine")).len(),
        1,
        "{fs:#?}"
    );
}

/// An alias (`Alias=` makes `systemctl enable` link `hermes.service` to our unit) is one unit
/// under two names, not two units fighting over a profile: for doctor and for install.
#[test]
fn an_alias_of_our_unit_is_not_a_second_unit() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "dralias"]);
    m.wait_active(&unit("dralias"));
    std::os::unix::fs::symlink(
        m.unit_dir().join(unit("dralias")),
        m.unit_dir().join("hermes.service"),
    )
    .unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    assert_eq!(m.prop("hermes.service", "Id"), unit("dralias"));
    let out = doctor(&m, &["--json"]);
    let fs = findings(&out);
    assert!(!fs.iter().any(|f| f["id"] == "HSV001"), "{fs:#?}");
    assert!(
        !fs.iter().any(|f| f["subject"] == "hermes.service"),
        "{fs:#?}"
    );
    assert_eq!(out.status.code(), Some(0), "{fs:#?}");
    // install sees no sibling in it either: nothing to migrate, nothing to change.
    let again = m.hermes_ok(&["install", "--profile", "dralias"]);
    assert!(again.contains("unchanged"), "{again}");
}

/// A template (`hermes-gateway@.service`) is not a unit of its own: only its instances are
/// read and checked, and the template file is no reason for an "unreadable" HSV000.
#[test]
fn a_template_is_checked_through_its_instances() {
    let m = Manager::boot();
    hand_unit(
        &m,
        "hermes-gateway@.service",
        "ExecStart=/bin/sh -c \"exec sleep 600\" hermes gateway run --profile %i",
        false,
    );
    assert!(m
        .systemctl(&["start", "hermes-gateway@drtpl.service"])
        .status
        .success());
    let fs = findings(&doctor(&m, &["--json"]));
    assert!(
        !fs.iter()
            .any(|f| f["id"] == "HSV000" && f["subject"] != "system bus"),
        "{fs:#?}"
    );
    assert_eq!(
        with_subject(&fs, "HSV004", "hermes-gateway@drtpl.service").len(),
        1,
        "{fs:#?}"
    );
    assert!(
        !fs.iter().any(|f| f["subject"] == "hermes-gateway@.service"),
        "{fs:#?}"
    );
}

/// A gateway started by hand holds its profile's lock, so the profile's unit cannot start.
/// Doctor finds the holder from the kernel's lock table (not from pid files), tells it from a
/// gateway its unit runs (by cgroup), never kills it on --fix, and is quiet once it is gone.
#[test]
fn a_gateway_started_by_hand_is_found_by_its_lock() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "drheld"]);
    m.wait_active(&unit("drheld"));
    m.hermes_ok(&["install", "--profile", "drstray", "--no-start"]);
    let mut stray = m
        .command(BIN)
        .args(["gateway", "run", "--profile", "drstray"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = m.profile_home("drstray").join("gateway.pid");
    crate::harness::wait_for(
        std::time::Duration::from_secs(20),
        "the stray gateway to hold its profile",
        || pid_file.exists().then_some(()),
    );
    // The unit's gateway finds the profile taken and exits 78; it stays down.
    assert!(!m.systemctl(&["start", &unit("drstray")]).status.success());

    let out = doctor(&m, &["--json"]);
    let fs = findings(&out);
    let held = with_subject(&fs, "HSV016", "drstray");
    assert_eq!(held.len(), 1, "{fs:#?}");
    assert_eq!(held[0]["severity"], "error");
    let message = held[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("PID {}", stray.id())),
        "{message}"
    );
    assert!(message.contains("started by hand"), "{message}");
    assert_eq!(
        held[0]["fix"],
        format!(
            "kill {} && systemctl --user restart {}",
            stray.id(),
            unit("drstray")
        )
    );
    assert!(with_subject(&fs, "HSV016", "drheld").is_empty(), "{fs:#?}");

    // --fix leaves it running.
    let fixed = doctor(&m, &["--fix"]);
    assert!(
        stdout(&fixed).contains("not fixed HSV016"),
        "{}",
        stdout(&fixed)
    );
    assert!(
        stray.try_wait().unwrap().is_none(),
        "doctor --fix killed it"
    );

    // The fix, by hand: stop it, restart the unit; then nothing holds the profile but its unit.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(stray.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    stray.wait().unwrap();
    assert!(m
        .systemctl(&["reset-failed", &unit("drstray")])
        .status
        .success());
    m.hermes_ok(&["start", "--profile", "drstray"]);
    let fs = findings(&doctor(&m, &["--json"]));
    assert!(!fs.iter().any(|f| f["id"] == "HSV016"), "{fs:#?}");
}
