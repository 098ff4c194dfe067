//! `status` lists a gateway started by hand (`gateway run` in a terminal, outside any
//! manager) next to the units: found by the kernel's lock table as doctor finds it, marked as
//! not managed, with its own health; and a gateway its unit runs is never listed so.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{unit, wait_for, Manager, BIN};

fn status(m: &Manager, args: &[&str]) -> Value {
    let mut all = vec!["status", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&m.hermes_ok(&all)).unwrap()
}

#[test]
fn status_lists_a_gateway_started_by_hand_with_its_health() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "stuunit"]);
    m.wait_active(&unit("stuunit"));
    m.hermes_ok(&["install", "--profile", "stuhand", "--no-start"]);
    let mut hand = m
        .command(BIN)
        .args(["gateway", "run", "--profile", "stuhand"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = u64::from(hand.id());

    // Listed once its first snapshot is written, and current: it wrote it itself.
    let report = wait_for(
        Duration::from_secs(20),
        "status to show the hand-started gateway's health",
        || {
            let r = status(&m, &[]);
            let live = r["unmanaged"][0]["health"]["stale"] == Value::Bool(false);
            live.then_some(r)
        },
    );
    let listed = report["unmanaged"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "only the hand-started one: {report:#}");
    let g = &listed[0];
    assert_eq!(g["profile"], "stuhand", "{g:#}");
    assert_eq!(g["pid"], pid, "{g:#}");
    assert_eq!(g["managed"], false, "{g:#}");
    assert_eq!(g["service"], Value::Null, "started by hand: {g:#}");
    assert_eq!(
        g["hermes_home"],
        m.hermes_home().display().to_string(),
        "{g:#}"
    );
    assert!(
        g["cmdline"]
            .as_str()
            .unwrap()
            .ends_with("gateway run --profile stuhand"),
        "{g:#}"
    );
    assert_eq!(g["health"]["pid"], pid, "{g:#}");
    assert_eq!(g["health"]["stale_reason"], Value::Null, "{g:#}");
    assert_eq!(g["health_error"], Value::Null, "{g:#}");
    // Its unit is still listed, not running: the snapshot is not the unit's to claim.
    let units = report["units"].as_array().unwrap();
    let own = units.iter().find(|u| u["profile"] == "stuhand").unwrap();
    assert_eq!(own["main_pid"], 0, "{own:#}");
    assert_eq!(own["health"]["stale_reason"], "not_running", "{own:#}");

    // The text says the same, on its own row.
    let text = m.hermes_ok(&["status"]);
    let row = text
        .lines()
        .find(|l| l.contains("[not managed: started by hand]"))
        .unwrap_or_else(|| panic!("no row for it:\n{text}"));
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        words[..5],
        ["stuhand", "-", "running", "-", &pid.to_string()],
        "{text}"
    );
    assert!(
        text.contains("command: ") && text.contains("gateway run --profile stuhand"),
        "{text}"
    );

    // --profile narrows it as it narrows the units.
    let other = status(&m, &["--profile", "stuunit"]);
    assert_eq!(other["unmanaged"], Value::Array(vec![]), "{other:#}");
    let same = status(&m, &["--profile", "stuhand"]);
    assert_eq!(same["unmanaged"][0]["pid"], pid, "{same:#}");

    // Once it has stopped, nothing holds the profile and nothing is listed.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hand.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    hand.wait().unwrap();
    let after = status(&m, &[]);
    assert_eq!(after["unmanaged"], Value::Array(vec![]), "{after:#}");
}
