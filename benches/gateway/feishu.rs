//! Feishu/Lark detection latency (issue 13): how many PingIntervals the adapter takes to drop
//! a half-open long connection, and one whose pongs stopped while events still arrive. Both
//! must be dropped within PingInterval plus the pong deadline (a fifth of the interval by
//! default). Same trials as the zombie section, against the mock Feishu.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{
    ClientConfig, FeishuConfig, FeishuFault, MockConfig, MockPlatform,
};

use crate::detection::{row, trial, Detection};
use crate::scratch;

/// The mock's PingInterval; the adapter's pong deadline is a fifth of it.
const PING_S: u64 = 1;
const TRIALS: usize = 30;
const AT_ONCE: usize = 10;

async fn feishu_trial(fault: FeishuFault, dir: &Path) -> Detection {
    let feishu = FeishuConfig {
        client_config: ClientConfig {
            ping_interval: PING_S,
            ..ClientConfig::default()
        },
        ..FeishuConfig::default()
    };
    let app_id = feishu.app_id.clone();
    let secret = feishu.app_secret.clone();
    let mock = Arc::new(
        MockPlatform::start(MockConfig {
            feishu,
            ..MockConfig::default()
        })
        .await
        .unwrap(),
    );
    let text = format!(
        "[[adapter]]\nname = \"f\"\nkind = \"feishu\"\napp-id = \"{app_id}\"\nsecret-env = \"X\"\napi-base = \"{}\"\nbackoff-min = \"100ms\"\n",
        mock.http_base()
    );
    // With pongs stopped, events keep coming (about 50 a second): the connection is not
    // silent, so only the pong deadline can tell.
    let chatter = (fault == FeishuFault::NoPong).then(|| {
        let mock = mock.clone();
        tokio::spawn(async move {
            loop {
                mock.feishu_emit(1);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let ping = Duration::from_secs(PING_S);
    let d = trial(
        &text,
        &secret,
        dir,
        ping,
        || mock.set_feishu_fault(fault),
        |v, before| {
            // No-pong lasts until cleared: clear it once the connection is dropped, so the
            // next one is answered.
            mock.clear_feishu_faults();
            v.attempts > before.attempts && v.state == State::Connected
        },
    )
    .await;
    if let Some(c) = chatter {
        c.abort();
    }
    d
}

/// Detection latencies in PingIntervals, reconnect times in ms, and how many trials gave the
/// expected reason.
async fn trials(fault: FeishuFault, reason: &str, dir: &Path) -> (Vec<f64>, Vec<f64>, usize) {
    let (mut detect, mut back, mut right) = (vec![], vec![], 0);
    for round in 0..TRIALS / AT_ONCE {
        let runs: Vec<_> = (0..AT_ONCE)
            .map(|i| {
                let d = dir.join(format!("{round}-{i}"));
                let fault = fault.clone();
                tokio::spawn(async move { feishu_trial(fault, &d).await })
            })
            .collect();
        for r in runs {
            let d = r.await.unwrap();
            detect.push(d.detected.as_secs_f64() / PING_S as f64);
            back.push(d.back.as_secs_f64() * 1e3);
            right += usize::from(d.error.contains(reason));
        }
    }
    (detect, back, right)
}

pub(crate) async fn feishu_detection() {
    let dir = scratch("feishu");
    let half_open = trials(FeishuFault::HalfOpen, "half-open", &dir.join("half-open")).await;
    let no_pong = trials(
        FeishuFault::NoPong,
        "stopped answering pings",
        &dir.join("no-pong"),
    )
    .await;
    println!(
        "### Feishu/Lark: detection in units of PingInterval ({TRIALS} trials each, \
         PingInterval {PING_S} s, pong deadline 0.2 PingInterval)\n"
    );
    println!("| figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    let bound = "every trial ≤ 1.20";
    row(
        "half-open: detection, in PingIntervals",
        &half_open.0,
        2,
        bound,
    );
    row(
        "no pong (events flowing): detection, in PingIntervals",
        &no_pong.0,
        2,
        bound,
    );
    row(
        "half-open: drop to connected again, ms",
        &half_open.1,
        1,
        "",
    );
    row("no pong: drop to connected again, ms", &no_pong.1, 1, "");
    println!(
        "\nDropped for the right reason: half-open {}/{TRIALS}, no pong {}/{TRIALS}.\n",
        half_open.2, no_pong.2
    );
    let _ = std::fs::remove_dir_all(dir);
}
