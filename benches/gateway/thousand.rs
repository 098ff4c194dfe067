//! The cost of 1,000 connections: the section's entry, which picks the configurations
//! (adapter kind × platform server), runs each one and prints the tables.

use std::time::Duration;

use hermes_svc::mock_platform::{MockConfig, MockPlatform};

use crate::binary::{gateway_bin, BIN};
use crate::scratch;

pub(crate) mod bare;
mod config;
mod measure;
mod platform;
pub(crate) mod reload;
mod report;

use crate::independent::Independent;
use crate::proc::wait_for_quiet_machine;
use config::Kind;
use measure::measure;
use platform::Server;
use report::print_thousand;

/// 1,000 adapters of each kind against the built-in mock and against the independent server
/// (benches/independent), discovering the gateway and fetching tokens as a real start does,
/// then the floor (`bare.rs`): a bare client holding as many connections to the independent
/// server. `HSV_BENCH_ONLY` (e.g. `qqbot/independent,discord,floor`) picks configurations, `HSV_BENCH_ADAPTERS`
/// the count, `HSV_BENCH_WINDOW` the measured window (60 s) and `HSV_BENCH_SOAK` (seconds) an
/// RSS reading every minute for that long.
pub(crate) async fn thousand_connections() {
    let n: usize = std::env::var("HSV_BENCH_ADAPTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let only = std::env::var("HSV_BENCH_ONLY").unwrap_or_default();
    let picked = |kind: Kind, server: &str| {
        only.is_empty()
            || only.split(',').map(str::trim).any(|o| {
                o == kind.name() || o == server || o == format!("{}/{server}", kind.name())
            })
    };
    let interval = Duration::from_secs(5);
    let floor = only.is_empty() || only.split(',').any(|o| o.trim() == "floor");
    let python =
        (floor || picked(Kind::QqBot, "independent") || picked(Kind::Discord, "independent"))
            .then(Independent::python);
    let bin = gateway_bin();
    if bin == BIN {
        eprintln!(
            "measuring {bin}, cargo's bench build with dev-dependency features; set \
             HSV_BENCH_BIN to a copy of a plain `cargo build --release` for recorded figures"
        );
    } else {
        eprintln!("measuring {bin}");
    }
    let logs = scratch("independent-logs");
    let mut results = vec![];
    for kind in [Kind::QqBot, Kind::Discord] {
        for label in ["mock", "independent"] {
            if !picked(kind, label) {
                continue;
            }
            wait_for_quiet_machine().await;
            let server = match label {
                "mock" => Server::Mock(
                    MockPlatform::start(MockConfig {
                        heartbeat_interval: interval,
                        ..MockConfig::default()
                    })
                    .await
                    .unwrap(),
                ),
                _ => Server::Independent(Independent::start(
                    python.as_deref().unwrap(),
                    interval,
                    &logs.join(format!("{}.log", kind.name())),
                )),
            };
            results.push(measure(kind, server, label, n).await);
        }
    }
    print_thousand(&results);
    if let (true, Some(python)) = (floor, python.as_deref()) {
        wait_for_quiet_machine().await;
        let server = Independent::start(python, interval, &logs.join("floor.log"));
        let window = measure::env_secs("HSV_BENCH_WINDOW", 60);
        bare::print(&bare::measure(server, n, window).await);
    }
    println!(
        "Measured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
    // Anything the independent server complained about (tracebacks, aiohttp warnings).
    for kind in [Kind::QqBot, Kind::Discord] {
        let log = logs.join(format!("{}.log", kind.name()));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if !text.trim().is_empty() {
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("independent server ({}) stderr, last lines:", kind.name());
            for l in tail.into_iter().rev() {
                eprintln!("  {l}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(logs);
}
