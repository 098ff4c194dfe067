//! Zombie detection latency: how many heartbeat intervals an adapter takes to notice a
//! half-open connection, and how long from then until the session is RESUMED.

use std::path::PathBuf;
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{BlackholeProxy, MockConfig, MockPlatform};

use crate::detection::{row, trial, Detection};
use crate::scratch;
use crate::wing::{in_rounds, Trials};

/// One half-open trial through the blackhole proxy, against a Discord adapter.
async fn zombie_trial(interval: Duration, dir: PathBuf) -> Detection {
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
    trial(
        &text,
        "t",
        &dir,
        interval,
        || proxy.blackhole_existing(),
        // A new attempt has begun and reached RESUMED (the state goes through Connecting).
        |v, before| {
            v.attempts > before.attempts && v.state == State::Connected && mock.stats().resumes >= 1
        },
    )
    .await
}

pub(crate) async fn zombie_latency() {
    let interval = Duration::from_secs(1);
    let dir = scratch("zombie");
    let ds = in_rounds(50, 10, &dir, |d| zombie_trial(interval, d)).await;
    let Trials {
        detect,
        back: resume,
        ..
    } = Trials::of(&ds, interval, "");
    println!(
        "### Zombie detection ({} half-open trials, heartbeat interval {interval:?})\n",
        detect.len()
    );
    println!("| figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    row(
        "detection latency, in heartbeat intervals",
        &detect,
        2,
        "p99 ≤ 1.25",
    );
    row("detection to RESUMED, ms", &resume, 1, "p99 ≤ 200");
    println!();
    let _ = std::fs::remove_dir_all(dir);
}
