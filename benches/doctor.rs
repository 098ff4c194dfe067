//! doctor against 100 and 1,000 sibling units on a real, private systemd user manager, with
//! the manager holding the units loaded and not: wall time next to `systemctl --user show`
//! looped over the same units, and the calls doctor makes to the manager.
//! `cargo bench --bench doctor` prints Markdown (`-- 100` runs only the 100-unit rows).
//!
//! The units are what `hermes-svc render` prints, written straight into the unit directory
//! with one reload after them, because a thousand `install`s would each reload the manager.
//! Not loaded: the files alone, which is what a disabled profile looks like. Loaded: the same
//! files enabled (linked into `default.target.wants/`), which the manager loads at reload.

#[path = "support/bus_calls.rs"]
mod bus_calls;
#[path = "../tests/it/bus_monitor.rs"]
mod bus_monitor;
#[path = "../tests/it/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::{Manager, BIN};

const REPS: usize = 20;

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[(v.len() * 9 / 10).min(v.len() - 1)])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let only_small = std::env::args().any(|a| a == "100");
    let m = Manager::boot();
    println!("| units | loaded | `hermes-svc doctor --json` median | p90 | `systemctl --user show` loop median | p90 | speed-up | calls to the manager |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut written = 0;
    for n in [100usize, 1000] {
        if n > 100 && only_small {
            break;
        }
        let units = write_units(&m, written, n);
        written = n;
        m.reload_until_unloaded("hermes-gateway-*");
        measure(&m, &units, "no");
        assert_eq!(
            m.loaded_units("hermes-gateway-*").len(),
            0,
            "doctor left units loaded"
        );
        let wants = m.load_by_enabling(&units);
        assert_eq!(
            m.loaded_units("hermes-gateway-*").len(),
            n,
            "enabled units are loaded"
        );
        measure(&m, &units, "yes");
        std::fs::remove_dir_all(&wants).unwrap();
    }
}

/// Profiles `sib{from+1}` to `sib{to}`: their homes, and their units as `render` prints them.
/// Returns every unit name so far.
fn write_units(m: &Manager, from: usize, to: usize) -> Vec<String> {
    for i in from + 1..=to {
        let p = format!("sib{i:04}");
        std::fs::create_dir_all(m.profile_home(&p)).unwrap();
        let out = m
            .command(BIN)
            .args(["render", "--profile", &p])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        std::fs::write(
            m.unit_dir().join(format!("hermes-gateway-{p}.service")),
            out.stdout,
        )
        .unwrap();
    }
    (1..=to)
        .map(|i| format!("hermes-gateway-sib{i:04}.service"))
        .collect()
}

/// One row of the table: doctor's wall time next to the `systemctl show` loop's, in the same
/// run, and the calls doctor makes to the manager.
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
    // Each `systemctl show` of a unit the manager has not loaded makes it load one.
    let loops = if units.len() > 100 { 1 } else { 5 };
    let mut l = vec![];
    for _ in 0..loops {
        let t = Instant::now();
        for u in units {
            assert!(m.systemctl(&["show", u]).status.success());
        }
        l.push(t.elapsed());
    }
    if label == "no" {
        harness::wait_for(
            Duration::from_secs(30),
            "the manager to drop the units",
            || m.loaded_units("hermes-gateway-*").is_empty().then_some(()),
        );
    }
    let messages = bus_calls::to_the_manager(m, doctor);
    let ((dm, dp), (lm, lp)) = (median(d), median(l));
    println!(
        "| {} | {label} | {} | {} | {} | {} | {:.1}x | {messages} |",
        units.len(),
        ms(dm),
        ms(dp),
        ms(lm),
        ms(lp),
        lm.as_secs_f64() / dm.as_secs_f64()
    );
}
