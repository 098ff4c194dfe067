//! doctor against 100 installed sibling units on a real, private systemd user manager:
//! wall time next to `systemctl --user show` looped over the same units, and the number of
//! D-Bus messages doctor sends. `cargo bench --bench doctor` prints Markdown.

#[path = "../tests/it/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::{Manager, BIN};

const UNITS: usize = 100;
const REPS: usize = 20;
const LOOPS: usize = 5;

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[(v.len() * 9 / 10).min(v.len() - 1)])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let m = Manager::boot();
    let profiles: Vec<String> = (1..=UNITS).map(|i| format!("sib{i:03}")).collect();
    for p in &profiles {
        m.hermes_ok(&["install", "--profile", p, "--no-start"]);
    }
    let units: Vec<String> = profiles
        .iter()
        .map(|p| format!("hermes-gateway-{p}.service"))
        .collect();
    println!("| units (100 installed) | `hermes-svc doctor --json` median | p90 | `systemctl --user show` loop median | p90 | speed-up | D-Bus messages |");
    println!("|---|---|---|---|---|---|---|");
    measure(&m, &units, "not started");
    let mut start = vec!["start"];
    start.extend(units.iter().map(String::as_str));
    assert!(
        m.systemctl(&start).status.success(),
        "starting the units failed"
    );
    measure(&m, &units, "running");
}

/// One row of the table: doctor's wall time next to the `systemctl show` loop's, in the same
/// run, and the messages doctor writes to the bus.
fn measure(m: &Manager, units: &[String], label: &str) {
    // doctor's exit code is 0 or 1 depending on findings; either way it must have run.
    let doctor = || {
        let out = m.command(BIN).args(["doctor", "--json"]).output().unwrap();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["findings"].is_array());
    };
    doctor();
    let mut d = vec![];
    for _ in 0..REPS {
        let t = Instant::now();
        doctor();
        d.push(t.elapsed());
    }
    let mut l = vec![];
    for _ in 0..LOOPS {
        let t = Instant::now();
        for u in units {
            assert!(m.systemctl(&["show", u]).status.success());
        }
        l.push(t.elapsed());
    }
    // Each sendmsg is one D-Bus message (method calls, plus the Hello and the auth handshake).
    let strace = m
        .command("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=sendmsg",
            "-o",
            "/dev/stdout",
            BIN,
            "doctor",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .output();
    let messages = strace
        .ok()
        .filter(|o| o.status.code().is_some_and(|c| c <= 1))
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains("sendmsg("))
                .count()
                .to_string()
        })
        .unwrap_or_else(|| "strace not available".into());
    let ((dm, dp), (lm, lp)) = (median(d), median(l));
    println!(
        "| {label} | {} | {} | {} | {} | {:.1}x | {messages} |",
        ms(dm),
        ms(dp),
        ms(lm),
        ms(lp),
        lm.as_secs_f64() / dm.as_secs_f64()
    );
}
