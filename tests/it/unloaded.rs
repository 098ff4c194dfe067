//! Units the manager has not loaded (disabled or stopped profiles, legacy units nobody
//! enabled) are read from their files, not by making the manager load them. A unit's files
//! are the whole truth about it then, so doctor and status must say exactly what they say
//! once the manager holds the same units loaded: each unit-definition check (HSV001-HSV005,
//! HSV009, HSV014, HSV021) is rebuilt here with every unit unloaded, then again loaded, and
//! the two reports must be equal to the letter. Profile names start with `unl`.

use std::time::Duration;

use crate::doctor::{doctor, findings};
use crate::harness::{stdout, unit, wait_for, Manager, BIN};

const UNITS: [&str; 3] = [
    "hermes-gateway-unl.service",
    "hermes-gateway.service",
    "hermes.service",
];

fn sorted(mut v: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    v.sort_by_key(|f| f.to_string());
    v
}

#[test]
fn doctor_and_status_say_the_same_of_a_unit_whether_or_not_the_manager_loaded_it() {
    let m = Manager::boot();
    let home = m.profile_home("unl");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("gateway.toml"),
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"UNL_TOKEN\"\n",
    )
    .unwrap();
    m.hermes_ok(&["install", "--profile", "unl", "--no-start"]);
    // HSV021: a secret in our drop-in's Environment=.
    m.hermes_ok(&[
        "set",
        "--profile",
        "unl",
        "--no-restart",
        "UNL_TOKEN=unl-secret-value-1234",
    ]);
    let dir = m.unit_dir();
    // HSV004 and HSV005 through a person's drop-in, and HSV009: the unit edited by hand.
    let ours = dir.join(unit("unl"));
    std::fs::create_dir_all(dir.join("hermes-gateway-unl.service.d")).unwrap();
    std::fs::write(
        dir.join("hermes-gateway-unl.service.d/override.conf"),
        "[Service]\nRestart=on-failure\nWatchdogSec=\n",
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&ours).unwrap();
    text.push_str("# tuned by hand\n");
    std::fs::write(&ours, text).unwrap();
    // HSV001: an older tool's unit serving the same profile, written with continuation lines,
    // quotes and a specifier for the home.
    std::fs::write(
        dir.join("hermes-gateway.service"),
        format!(
            "[Unit]\nDescription=old gateway\n\n[Service]\nExecStart=\"{BIN}\" gateway \\\n    run \"--profile\" 'unl'\nEnvironment=\"HERMES_HOME=%h/.hermes\" OTHER=1\nRestart=always\n\n[Install]\nWantedBy=default.target\n"
        ),
    )
    .unwrap();
    // HSV002, HSV003 and HSV014: --replace, no --profile, and a program that is not there.
    std::fs::write(
        dir.join("hermes.service"),
        "[Service]\nType=simple\nExecStart=/opt/old-hermes/bin/hermes gateway run --replace\n",
    )
    .unwrap();
    // Nothing enables them, so after a reload the manager holds none of them.
    assert!(m.systemctl(&["disable", &unit("unl")]).status.success());
    m.reload_until_unloaded("hermes*.service");

    let unloaded = sorted(findings(&doctor(&m, &["--json"])));
    let status_unloaded = m.hermes_ok(&["status", "--json"]);
    assert_eq!(
        m.loaded_units("hermes*.service"),
        Vec::<String>::new(),
        "doctor loaded units"
    );
    let ids: std::collections::BTreeSet<&str> =
        unloaded.iter().filter_map(|f| f["id"].as_str()).collect();
    for id in [
        "HSV001", "HSV002", "HSV003", "HSV004", "HSV005", "HSV009", "HSV014", "HSV021",
    ] {
        assert!(
            ids.contains(id),
            "{id} missing with the units unloaded: {unloaded:#?}"
        );
    }
    assert!(
        !unloaded
            .iter()
            .any(|f| f.to_string().contains("unl-secret-value")),
        "{unloaded:#?}"
    );

    // A target that orders itself before the three makes the manager load and keep them,
    // without starting any.
    std::fs::write(
        dir.join("hsv-holder.target"),
        format!("[Unit]\nBefore={}\n", UNITS.join(" ")),
    )
    .unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    assert!(m
        .systemctl(&["start", "hsv-holder.target"])
        .status
        .success());
    let mut want: Vec<String> = UNITS.iter().map(|u| u.to_string()).collect();
    want.sort();
    assert_eq!(m.loaded_units("hermes*.service"), want);
    let held = sorted(findings(&doctor(&m, &["--json"])));
    let pretty = |v: &Vec<serde_json::Value>| serde_json::to_string_pretty(v).unwrap();
    assert_eq!(
        pretty(&unloaded),
        pretty(&held),
        "doctor differs between unloaded (left) and loaded (right)"
    );
    // And the manager's own view of every unit, with no file read (the debug build's switch).
    let asked = m
        .command(BIN)
        .args(["doctor", "--json"])
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/dr-system-bus",
        )
        .env("HERMES_TEST_FAULT", "ask-manager")
        .output()
        .unwrap();
    assert_eq!(
        pretty(&unloaded),
        pretty(&sorted(findings(&asked))),
        "doctor from the files (left) differs from the manager's view (right)"
    );
    let status_held = m.hermes_ok(&["status", "--json"]);
    assert_eq!(status_unloaded, status_held);
    let status_asked = m
        .command(BIN)
        .args(["status", "--json"])
        .env("HERMES_TEST_FAULT", "ask-manager")
        .output()
        .unwrap();
    assert_eq!(status_unloaded, stdout(&status_asked));
}

/// `doctor --fix` migrates an older tool's unit the manager never loaded (nobody enabled it)
/// as it migrates a loaded one: moved aside, and the duplicate gone.
#[test]
fn doctor_fix_migrates_a_legacy_unit_the_manager_never_loaded() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "unlfix", "--no-start"]);
    let legacy = m.unit_dir().join("hermes-gateway.service");
    std::fs::write(
        &legacy,
        format!("[Service]\nExecStart={BIN} gateway run --profile=unlfix --replace\n"),
    )
    .unwrap();
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    wait_for(
        Duration::from_secs(10),
        "the manager to drop the legacy unit",
        || {
            (!m.loaded_units("hermes*.service")
                .contains(&"hermes-gateway.service".to_owned()))
            .then_some(())
        },
    );
    let before = findings(&doctor(&m, &["--json"]));
    for id in ["HSV001", "HSV002"] {
        assert!(
            before
                .iter()
                .any(|f| f["id"] == id && f.to_string().contains("hermes-gateway.service")),
            "{id}: {before:#?}"
        );
    }
    let out = doctor(&m, &["--fix", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        v["fixed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["subject"] == "hermes-gateway.service"),
        "{v:#}"
    );
    assert!(!legacy.exists());
    assert!(std::fs::read_dir(m.unit_dir()).unwrap().flatten().any(|e| e
        .file_name()
        .to_string_lossy()
        .starts_with("hermes-gateway.service.migrated.")));
    let after = findings(&doctor(&m, &["--json"]));
    assert!(!after.iter().any(|f| f["id"] == "HSV001"), "{after:#?}");
}
