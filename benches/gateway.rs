//! Gateway figures: zombie detection latency, detection-to-RESUMED time, the cost of 1,000
//! connections, and loss under injected faults. `cargo bench --bench gateway` prints Markdown
//! for docs/benchmarks.md. Everything runs on loopback against the built-in mock platform.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::{self, Secret};
use hermes_svc::gateway::adapter::{self, Deps};
use hermes_svc::gateway::health::{Registry, State};
use hermes_svc::gateway::spool::{self, Spool};
use hermes_svc::mock_platform::{BlackholeProxy, Fault, MockConfig, MockPlatform};
use tokio::sync::watch;

const BIN: &str = env!("CARGO_BIN_EXE_hermes-svc");

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hsv-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// One half-open trial: returns (detection latency, detection -> connected again).
async fn zombie_trial(interval: Duration, dir: &Path) -> (Duration, Duration) {
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: interval,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let proxy = BlackholeProxy::start(mock.addr()).await.unwrap();
    mock.set_advertised_ws_url(format!("ws://{}/ws", proxy.addr()));
    let text = format!(
        "[[adapter]]\nname = \"z\"\nkind = \"discord\"\ntoken-env = \"X\"\napi-base = \"{}\"\nbackoff-min = \"100ms\"\n",
        mock.http_base()
    );
    let spec = config::parse(Path::new("bench.toml"), &text)
        .unwrap()
        .adapters[0]
        .clone();
    let registry = Registry::new();
    let hb = registry.register("z", "discord", Duration::from_secs(30));
    let (stop, rx) = watch::channel(false);
    let spool = Arc::new(Spool::open(dir).unwrap());
    let task = tokio::spawn(adapter::run(
        spec,
        Some(Secret::new("t".into())),
        Deps {
            spool,
            heartbeat: hb,
            shared: adapter::Shared::new(Default::default()).unwrap(),
            shutdown: rx,
        },
    ));
    let view = || registry.snapshot().components[0].clone();
    while view().state != State::Connected {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A random phase relative to the heartbeat schedule.
    tokio::time::sleep(interval + interval.mul_f64(fastrand::f64())).await;
    let attempts_before = view().attempts;
    let fault = Instant::now();
    proxy.blackhole_existing();
    let detected = loop {
        if view().reconnects >= 1 {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let resumed = loop {
        // A new attempt has begun and reached RESUMED (the state goes through Connecting).
        let v = view();
        if v.attempts > attempts_before && v.state == State::Connected && mock.stats().resumes >= 1
        {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let _ = stop.send(true);
    let _ = task.await;
    (detected - fault, resumed - detected)
}

async fn zombie_latency() {
    let interval = Duration::from_secs(1);
    let mut detect = vec![];
    let mut resume = vec![];
    let dir = scratch("zombie");
    for round in 0..5 {
        let trials: Vec<_> = (0..10)
            .map(|i| {
                let d = dir.join(format!("{round}-{i}"));
                tokio::spawn(async move { zombie_trial(interval, &d).await })
            })
            .collect();
        for t in trials {
            let (d, r) = t.await.unwrap();
            detect.push(d.as_secs_f64() / interval.as_secs_f64());
            resume.push(r.as_secs_f64() * 1e3);
        }
    }
    detect.sort_by(f64::total_cmp);
    resume.sort_by(f64::total_cmp);
    println!(
        "### Zombie detection ({} half-open trials, heartbeat interval {interval:?})\n",
        detect.len()
    );
    println!("| figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| detection latency, in heartbeat intervals | {:.2} | {:.2} | {:.2} | p99 ≤ 1.25 |",
        pct(&detect, 0.5),
        pct(&detect, 0.99),
        detect[detect.len() - 1]
    );
    println!(
        "| detection to RESUMED, ms | {:.1} | {:.1} | {:.1} | p99 ≤ 200 |\n",
        pct(&resume, 0.5),
        pct(&resume, 0.99),
        resume[resume.len() - 1]
    );
    let _ = std::fs::remove_dir_all(dir);
}

struct Gateway(Child);
impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The gateway binary to measure. `cargo bench` builds `BIN` with the dev-dependency features
/// (tokio's test-util clock among them); `HSV_BENCH_BIN` points at a plain release build.
fn gateway_bin() -> String {
    std::env::var("HSV_BENCH_BIN").unwrap_or_else(|_| BIN.to_owned())
}

fn spawn_gateway(home: &Path, profile: &str) -> Gateway {
    Gateway(
        Command::new(gateway_bin())
            .args(["gateway", "run", "--profile", profile])
            .env("HERMES_HOME", home)
            .env("HERMES_LOCK_DIR", home.join("locks"))
            .env("HERMES_LOG", "warn")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Nanoseconds the process has spent on a CPU, from the scheduler's own accounting (precise,
/// unlike the tick-sampled utime/stime, which are noisy at well under 1% on a VM).
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .map(|t| {
            std::fs::read_to_string(t.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

async fn wait_summary(state: &Path, want: &str, limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        if let Ok(t) = std::fs::read_to_string(state) {
            if t.contains(want) {
                return;
            }
        }
        assert!(Instant::now() < end, "state never said {want:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn thousand_connections() {
    let n = 1000;
    let interval = Duration::from_secs(5);
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: interval,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let home = scratch("thousand");
    let ph = home.join("profiles/many");
    std::fs::create_dir_all(&ph).unwrap();
    let mut toml = String::new();
    let mut env = String::new();
    for i in 0..n {
        toml.push_str(&format!(
            "[[adapter]]\nname = \"a{i}\"\nkind = \"discord\"\ntoken-env = \"TOKEN_{i}\"\napi-base = \"{}\"\ngateway-url = \"{}\"\n",
            mock.http_base(),
            mock.ws_url()
        ));
        env.push_str(&format!("TOKEN_{i}=token-{i}\n"));
    }
    std::fs::write(ph.join("gateway.toml"), toml).unwrap();
    std::fs::write(ph.join(".env"), env).unwrap();
    let gw = spawn_gateway(&home, "many");
    let pid = gw.0.id();
    wait_summary(
        &ph.join("state/gateway.json"),
        &format!("{n}/{n} adapters ready"),
        Duration::from_secs(60),
    )
    .await;
    // Let the first-heartbeat jitter settle, then measure a full minute.
    tokio::time::sleep(interval * 2).await;
    let window = Duration::from_secs(
        std::env::var("HSV_BENCH_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(60),
    );
    let (t0, c0, h0) = (Instant::now(), cpu_ns(pid), mock.stats().heartbeats);
    tokio::time::sleep(window).await;
    let (t1, c1, h1) = (Instant::now(), cpu_ns(pid), mock.stats().heartbeats);
    let cpu = (c1 - c0) as f64 / 1e9 / (t1 - t0).as_secs_f64() * 100.0;
    let rss = proc_status(pid, "VmRSS:") as f64 / 1024.0;
    let hwm = proc_status(pid, "VmHWM:") as f64 / 1024.0;
    let rate = (h1 - h0) as f64 / (t1 - t0).as_secs_f64();
    println!(
        "### One gateway, {n} connections, heartbeat every {interval:?} ({window:?} measured)\n"
    );
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!("| heartbeats + ACKs per second seen by the platform | {rate:.0} | 200 |");
    println!("| RSS (VmRSS) | {rss:.1} MiB | ≤ 32 MiB |");
    println!("| peak RSS (VmHWM) | {hwm:.1} MiB | |");
    println!("| CPU | {cpu:.2}% of one core | ≤ 0.7% |\n");
    drop(gw);
    let _ = std::fs::remove_dir_all(home);
}

async fn faults_and_loss() {
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: Duration::from_secs(1),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let proxy = BlackholeProxy::start(mock.addr()).await.unwrap();
    mock.set_advertised_ws_url(format!("ws://{}/ws", proxy.addr()));
    let home = scratch("loss");
    let ph = home.join("profiles/loss");
    std::fs::create_dir_all(&ph).unwrap();
    let base = mock.http_base();
    std::fs::write(
        ph.join("gateway.toml"),
        format!(
            "[[adapter]]\nname = \"qq\"\nkind = \"qqbot\"\napp-id = \"1\"\nsecret-env = \"S\"\napi-base = \"{base}\"\ntoken-url = \"{base}/app/getAppAccessToken\"\nbackoff-min = \"100ms\"\n\
             [[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"T\"\napi-base = \"{base}\"\nbackoff-min = \"100ms\"\n"
        ),
    )
    .unwrap();
    std::fs::write(ph.join(".env"), "S=s\nT=t\n").unwrap();
    let _gw = spawn_gateway(&home, "loss");
    wait_summary(
        &ph.join("state/gateway.json"),
        "2/2 adapters ready",
        Duration::from_secs(30),
    )
    .await;
    let faults = [
        Fault::None, // half-open through the proxy
        Fault::Close(4000),
        Fault::Close(1006),
        Fault::Reconnect,
        Fault::InvalidSession(true),
    ];
    let emits = 5_000; // one event per session each: 10,000 dispatches
    let mut injected = 0;
    let started = Instant::now();
    for i in 0..emits {
        mock.emit(1);
        if i % 250 == 125 && injected < 20 {
            match faults[injected % faults.len()] {
                Fault::None => proxy.blackhole_existing(),
                f => mock.set_fault(f),
            }
            injected += 1;
        }
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    let generated: HashSet<String> = mock.generated_event_ids().into_iter().collect();
    let end = Instant::now() + Duration::from_secs(30);
    let (stored, unique) = loop {
        let events = spool::read(&ph.join("inbox"), None).unwrap_or_default();
        let ids: HashSet<String> = events.iter().map(|e| e.id.clone()).collect();
        if generated.is_subset(&ids) || Instant::now() > end {
            break (events.len(), ids);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let lost = generated.difference(&unique).count();
    let dup = stored - unique.len();
    let s = mock.stats();
    println!(
        "### Loss under faults ({} dispatches, {injected} injected faults over {:.0} s)\n",
        generated.len(),
        started.elapsed().as_secs_f64()
    );
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!("| lost events | {lost} | 0 |");
    println!("| duplicated events | {dup} | 0 |");
    println!(
        "| resumes / identifies seen by the platform | {} / {} | |\n",
        s.resumes, s.identifies
    );
    let _ = std::fs::remove_dir_all(home);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    rt.block_on(async {
        if only.as_deref().is_none_or(|o| o == "zombie") {
            zombie_latency().await;
        }
        if only.as_deref().is_none_or(|o| o == "loss") {
            faults_and_loss().await;
        }
        if only.as_deref().is_none_or(|o| o == "thousand") {
            thousand_connections().await;
        }
    });
}
