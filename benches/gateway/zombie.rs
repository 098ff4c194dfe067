//! Zombie detection latency: how many heartbeat intervals an adapter takes to notice a
//! half-open connection, and how long from then until the session is RESUMED.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::{self, Secret};
use hermes_svc::gateway::adapter::{self, Deps};
use hermes_svc::gateway::health::{ComponentKind, Registry, State};
use hermes_svc::gateway::spool::Spool;
use hermes_svc::mock_platform::{BlackholeProxy, MockConfig, MockPlatform};
use tokio::sync::watch;

use crate::scratch;

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
    let hb = registry.register(
        "z",
        ComponentKind::Adapter("discord"),
        Duration::from_secs(30),
    );
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

pub(crate) async fn zombie_latency() {
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
