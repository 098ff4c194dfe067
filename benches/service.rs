//! Service-management figures against a real, private systemd user manager.
//!
//! `cargo bench --bench service` prints a Markdown table for docs/benchmarks.md:
//! the wall time of `install` (warm binary) and of `status --json` over 20 installed profiles,
//! next to a loop of `systemctl --user show` over the same units, all in one run; and
//! `status --json` next to one `busctl` call of `ListUnitsByPatterns`, for 20 profiles not
//! loaded, loaded but not started, and running, with the method calls one `status` makes to
//! the manager.

#[path = "support/bus_calls.rs"]
mod bus_calls;
#[path = "../tests/it/bus_monitor.rs"]
mod bus_monitor;
#[path = "../tests/it/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::Manager;

const PROFILES: usize = 20;
const REPS: usize = 30;

fn time(mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

struct Stats {
    median: Duration,
    p90: Duration,
    min: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    Stats {
        median: v[v.len() / 2],
        p90: v[(v.len() * 9 / 10).min(v.len() - 1)],
        min: v[0],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// `status --json` over `PROFILES` units, interleaved with a single `busctl` process asking
/// the manager for the same units with `ListUnitsByPatterns`: the least any status can cost.
fn status_next_to_busctl(m: &Manager) -> (Stats, Stats, usize) {
    let (mut status, mut busctl) = (vec![], vec![]);
    for _ in 0..REPS {
        status.push(time(|| {
            let out = m.hermes_ok(&["status", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["units"].as_array().unwrap().len(), PROFILES);
        }));
        busctl.push(time(|| {
            let out = m
                .command("busctl")
                .args([
                    "--user",
                    "call",
                    "org.freedesktop.systemd1",
                    "/org/freedesktop/systemd1",
                    "org.freedesktop.systemd1.Manager",
                    "ListUnitsByPatterns",
                    "asas",
                    "0",
                    "1",
                    "hermes-gateway-*.service",
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }));
    }
    let calls = bus_calls::to_the_manager(m, || {
        m.hermes_ok(&["status", "--json"]);
    });
    (stats(status), stats(busctl), calls)
}

fn ratio_row(label: &str, (s, b, calls): &(Stats, Stats, usize)) {
    println!(
        "| {label} | {} | {} | {} | {} | {:.2}x | {calls} |",
        ms(s.median),
        ms(s.p90),
        ms(b.median),
        ms(b.p90),
        s.median.as_secs_f64() / b.median.as_secs_f64()
    );
}

fn main() {
    let m = Manager::boot();
    let profiles: Vec<String> = (1..=PROFILES).map(|i| format!("bench{i:02}")).collect();

    // Warm the binary and the page cache once.
    m.hermes_ok(&["status", "--json"]);

    // Profiles installed but not running: first as the files alone (disabled, so the manager
    // does not hold them), then enabled (loaded, not started). Written as `render` prints
    // them, then removed again before the real installs below.
    let idle: Vec<String> = (1..=PROFILES)
        .map(|i| format!("hermes-gateway-idle{i:02}.service"))
        .collect();
    for (i, u) in idle.iter().enumerate() {
        let p = format!("idle{:02}", i + 1);
        let out = m.hermes_ok(&["render", "--profile", &p]);
        std::fs::write(m.unit_dir().join(u), out).unwrap();
    }
    m.reload_until_unloaded("hermes-gateway-*");
    let not_loaded = status_next_to_busctl(&m);
    assert_eq!(
        m.loaded_units("hermes-gateway-*").len(),
        0,
        "status loaded units"
    );
    let wants = m.load_by_enabling(&idle);
    assert_eq!(m.loaded_units("hermes-gateway-*").len(), PROFILES);
    let loaded_idle = status_next_to_busctl(&m);
    std::fs::remove_dir_all(&wants).unwrap();
    for u in &idle {
        std::fs::remove_file(m.unit_dir().join(u)).unwrap();
    }
    assert!(m.systemctl(&["daemon-reload"]).status.success());
    let mut installs = vec![];
    for p in &profiles {
        installs.push(time(|| {
            m.hermes_ok(&["install", "--profile", p]);
        }));
    }
    let mut unchanged = vec![];
    for p in profiles.iter().take(REPS.min(PROFILES)) {
        unchanged.push(time(|| {
            m.hermes_ok(&["install", "--profile", p]);
        }));
    }
    let units: Vec<String> = profiles
        .iter()
        .map(|p| format!("hermes-gateway-{p}.service"))
        .collect();
    for u in &units {
        m.wait_active(u);
    }

    let mut status = vec![];
    for _ in 0..REPS {
        status.push(time(|| {
            let out = m.hermes_ok(&["status", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["units"].as_array().unwrap().len(), PROFILES);
        }));
    }
    let mut loop_show = vec![];
    for _ in 0..REPS {
        loop_show.push(time(|| {
            for u in &units {
                let out = m.systemctl(&["show", u]);
                assert!(out.status.success());
            }
        }));
    }

    let (i, u, s, l) = (
        stats(installs),
        stats(unchanged),
        stats(status),
        stats(loop_show),
    );
    println!("| operation ({PROFILES} profiles, {REPS} runs) | median | p90 | min |");
    println!("|---|---|---|---|");
    for (name, st) in [
        (
            "`install` of a new profile (write, reload, enable, start to READY=1)",
            &i,
        ),
        ("`install` again, unchanged", &u),
        ("`status --json` over all profiles", &s),
        ("`systemctl --user show` looped over the same units", &l),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            ms(st.median),
            ms(st.p90),
            ms(st.min)
        );
    }
    println!(
        "\nstatus speed-up over the systemctl loop (median): {:.1}x",
        l.median.as_secs_f64() / s.median.as_secs_f64()
    );
    let running = status_next_to_busctl(&m);
    println!("\n| {PROFILES} profiles, {REPS} interleaved runs | `status --json` median | p90 | one `busctl --user call ... ListUnitsByPatterns` median | p90 | status / busctl | calls to the manager |");
    println!("|---|---|---|---|---|---|---|");
    ratio_row("not loaded (unit files only)", &not_loaded);
    ratio_row("loaded, not started", &loaded_idle);
    ratio_row("running", &running);
}
