//! Reloading one changed adapter among many (issue 49): the gateway runs `n` discord adapters
//! against the built-in mock, each with its own token; each trial changes one adapter's own
//! table (its `backoff-max`), sends SIGHUP, and times `READY=1` (what `systemctl reload` waits
//! for) and the changed adapter's new session (its Identify, as the mock saw it), then counts
//! what the other adapters did meanwhile: connections opened and sockets closed, both of which
//! must be 0. `HSV_BENCH_ADAPTERS` sets `n` (1,000), `HSV_BENCH_TRIALS` the trials (5).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::config::{many_adapters, Kind};
use super::measure::wait_ready;
use crate::binary::{gateway_bin, spawn_gateway, BIN};
use crate::proc::wait_for_quiet_machine;
use crate::scratch;

/// One trial's figures.
struct Trial {
    adapter: String,
    to_ready: Duration,
    to_identified: Duration,
    others_opened: usize,
    others_closed: usize,
}

fn open_connections(mock: &MockPlatform) -> BTreeSet<u64> {
    let spans = mock.stats().spans;
    spans
        .iter()
        .filter(|s| s.closed.is_none())
        .map(|s| s.conn)
        .collect()
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

pub(crate) async fn reload_one_of_many() {
    let env_n = |key: &str, default: usize| {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (n, trials) = (
        env_n("HSV_BENCH_ADAPTERS", 1000),
        env_n("HSV_BENCH_TRIALS", 5),
    );
    let bin = gateway_bin();
    eprintln!("reload: measuring {bin}");
    wait_for_quiet_machine().await;
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: Duration::from_secs(5),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let home = scratch("reload");
    let ph = home.join("profiles/many");
    std::fs::create_dir_all(&ph).unwrap();
    let (mut toml, env) = many_adapters(Kind::Discord, n, &mock.http_base());
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
        let before = open_connections(&mock);
        assert_eq!(before.len(), n, "every adapter connected before trial {t}");
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
            let at = mock.stats().identify_times.into_iter().find(|&i| i > sent);
            if let Some(at) = at {
                break at;
            }
            assert!(Instant::now() < end, "{victim} never identified again");
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        // Long enough for any other adapter that was disturbed to show it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let stats = mock.stats();
        let opened = stats.connection_times.iter().filter(|&&c| c > sent).count();
        let open = open_connections(&mock);
        results.push(Trial {
            adapter: victim,
            to_ready: ready - sent,
            to_identified: identified - sent,
            others_opened: opened.saturating_sub(1),
            others_closed: before.difference(&open).count().saturating_sub(1),
        });
    }
    drop(gw);
    print(n, &results, &bin);
    let _ = std::fs::remove_dir_all(home);
}

fn print(n: usize, results: &[Trial], bin: &str) {
    println!("### Reload of one changed adapter among {n} (issue 49)\n");
    println!(
        "| trial | changed adapter | SIGHUP to READY=1 | SIGHUP to its new session (Identify) | connections opened by the other {} | their sockets closed |",
        n - 1
    );
    println!("|---|---|---|---|---|---|");
    for (i, t) in results.iter().enumerate() {
        println!(
            "| {} | {} | {:.1} ms | {:.1} ms | {} | {} |",
            i + 1,
            t.adapter,
            t.to_ready.as_secs_f64() * 1e3,
            t.to_identified.as_secs_f64() * 1e3,
            t.others_opened,
            t.others_closed
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
