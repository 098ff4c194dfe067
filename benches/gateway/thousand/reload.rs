//! Reloading one changed adapter among many (issue 49): the gateway runs `n` discord adapters,
//! each with its own token, against the built-in mock and then the independent server
//! (benches/independent/qq_discord_server.py, written from Discord's docs, not from the mock);
//! each trial changes one adapter's own table (its `backoff-max`), sends SIGHUP, and times
//! `READY=1` (what `systemctl reload` waits for) and the changed adapter's new session (one
//! more Identify, as the server counts them), then counts what the other adapters did
//! meanwhile: connections opened and Identifies sent beyond the changed one's, both of which
//! must be 0, and the connections open, which must be `n` again. `HSV_BENCH_ADAPTERS` sets `n`
//! (1,000), `HSV_BENCH_TRIALS` the trials per server (5), `HSV_BENCH_ONLY_SERVER` one server
//! (`mock` or `independent`).

use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::config::{many_adapters, Kind};
use super::measure::wait_ready;
use super::platform::{Seen, Server};
use crate::binary::{gateway_bin, spawn_gateway, BIN};
use crate::independent::Independent;
use crate::proc::wait_for_quiet_machine;
use crate::scratch;

/// One trial's figures.
struct Trial {
    server: &'static str,
    number: usize,
    adapter: String,
    to_ready: Duration,
    to_identified: Duration,
    others_opened: u64,
    others_identified: u64,
    open_after: u64,
}

/// Wait for a `READY=1` datagram on `notify`, up to a minute; when it came.
async fn wait_ready_datagram(notify: &std::os::unix::net::UnixDatagram) -> Instant {
    let end = Instant::now() + Duration::from_secs(60);
    let mut buf = vec![0u8; 4096];
    loop {
        while let Ok(len) = notify.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..len]);
            if text.lines().any(|l| l == "READY=1") {
                assert!(
                    text.contains("reload applied"),
                    "the reload was not applied: {text}"
                );
                return Instant::now();
            }
        }
        assert!(Instant::now() < end, "no READY=1 after the reload");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn env_n(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) async fn reload_one_of_many() {
    let (n, trials) = (
        env_n("HSV_BENCH_ADAPTERS", 1000),
        env_n("HSV_BENCH_TRIALS", 5),
    );
    let only = std::env::var("HSV_BENCH_ONLY_SERVER").ok();
    let bin = gateway_bin();
    eprintln!("reload: measuring {bin}");
    let logs = scratch("reload-logs");
    let mut results = vec![];
    for label in ["mock", "independent"] {
        if only.as_deref().is_some_and(|o| o != label) {
            continue;
        }
        wait_for_quiet_machine().await;
        let interval = Duration::from_secs(5);
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
                &Independent::python(),
                interval,
                &logs.join("independent.log"),
            )),
        };
        results.extend(trials_against(label, &server, n, trials).await);
    }
    print(n, &results, &bin);
    let _ = std::fs::remove_dir_all(logs);
}

async fn trials_against(
    label: &'static str,
    server: &Server,
    n: usize,
    trials: usize,
) -> Vec<Trial> {
    let home = scratch(&format!("reload-{label}"));
    let ph = home.join("profiles/many");
    std::fs::create_dir_all(&ph).unwrap();
    let (mut toml, env) = many_adapters(Kind::Discord, n, &server.http_base());
    std::fs::write(ph.join("gateway.toml"), &toml).unwrap();
    std::fs::write(ph.join(".env"), env).unwrap();
    let notify_path = home.join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_nonblocking(true).unwrap();
    let gw = spawn_gateway(&home, "many", Some(&notify_path));
    let pid = Pid::from_raw(gw.0.id() as i32);
    wait_ready(&notify, &ph.join("state/gateway.json"), n).await;
    // Every adapter identified, and the first heartbeats' jitter past.
    tokio::time::sleep(Duration::from_secs(10)).await;

    let mut results = vec![];
    for t in 0..trials {
        let victim = format!("a{}", (n / 2 + t * 197) % n);
        let before: Seen = server.seen().await;
        assert_eq!(
            before.open, n as u64,
            "every adapter connected before trial {t}"
        );
        let name_line = format!("name = \"{victim}\"\n");
        toml = toml.replacen(
            &name_line,
            &format!("{name_line}backoff-max = \"{}s\"\n", 31 + t),
            1,
        );
        let tmp = ph.join("gateway.toml.new");
        std::fs::write(&tmp, &toml).unwrap();
        std::fs::rename(&tmp, ph.join("gateway.toml")).unwrap();
        let mut buf = vec![0u8; 4096];
        while notify.recv(&mut buf).is_ok() {}

        let sent = Instant::now();
        kill(pid, Signal::SIGHUP).unwrap();
        let ready = wait_ready_datagram(&notify).await;
        let end = Instant::now() + Duration::from_secs(60);
        let identified = loop {
            if server.seen().await.identifies > before.identifies {
                break Instant::now();
            }
            assert!(Instant::now() < end, "{victim} never identified again");
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        // Long enough for any other adapter that was disturbed to show it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = server.seen().await;
        results.push(Trial {
            server: label,
            number: t + 1,
            adapter: victim,
            to_ready: ready - sent,
            to_identified: identified - sent,
            others_opened: (after.connections - before.connections).saturating_sub(1),
            others_identified: (after.identifies - before.identifies).saturating_sub(1),
            open_after: after.open,
        });
    }
    drop(gw);
    let _ = std::fs::remove_dir_all(home);
    results
}

fn print(n: usize, results: &[Trial], bin: &str) {
    println!("### Reload of one changed adapter among {n} (issue 49)\n");
    println!(
        "| server | trial | changed adapter | SIGHUP to READY=1 | SIGHUP to its new session (Identify seen) | connections opened by the other {m} | Identifies by the other {m} | connections open after |",
        m = n - 1
    );
    println!("|---|---|---|---|---|---|---|---|");
    for t in results {
        println!(
            "| {} | {} | {} | {:.1} ms | {:.1} ms | {} | {} | {} |",
            t.server,
            t.number,
            t.adapter,
            t.to_ready.as_secs_f64() * 1e3,
            t.to_identified.as_secs_f64() * 1e3,
            t.others_opened,
            t.others_identified,
            t.open_after
        );
    }
    println!(
        "\nMeasured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
}
