//! Feishu/Lark detection latency (issue 13): how many PingIntervals the adapter takes to drop
//! a half-open long connection, and one whose pongs stopped while events still arrive. Both
//! must be dropped within PingInterval plus the pong deadline (a fifth of the interval by
//! default). Same trials as the zombie section, against the mock Feishu.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{
    ClientConfig, FeishuConfig, FeishuFault, MockConfig, MockPlatform,
};

use crate::detection::{row, trial, Detection};
use crate::scratch;
use crate::wing::{in_rounds, trial_count, Chatter, Trials};

/// The mock's PingInterval; the adapter's pong deadline is a fifth of it.
const PING_S: u64 = 1;
const AT_ONCE: usize = 10;

async fn feishu_trial(fault: FeishuFault, dir: PathBuf) -> Detection {
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
    let _chatter = (fault == FeishuFault::NoPong).then(|| {
        let mock = mock.clone();
        Chatter::start(move || {
            mock.feishu_emit(1);
            std::future::ready(())
        })
    });
    let ping = Duration::from_secs(PING_S);
    trial(
        &text,
        &secret,
        &dir,
        ping,
        || mock.set_feishu_fault(fault),
        |v, before| {
            // No-pong lasts until cleared: clear it once the connection is dropped, so the
            // next one is answered.
            mock.clear_feishu_faults();
            v.attempts > before.attempts && v.state == State::Connected
        },
    )
    .await
}

/// Detection latencies in PingIntervals, reconnect times in ms, and how many trials gave the
/// expected reason.
async fn trials(fault: FeishuFault, reason: &str, dir: &Path) -> Trials {
    let ds = in_rounds(trial_count(), AT_ONCE, dir, |d| {
        feishu_trial(fault.clone(), d)
    })
    .await;
    Trials::of(&ds, Duration::from_secs(PING_S), reason)
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
    let n = trial_count();
    println!(
        "### Feishu/Lark: detection in units of PingInterval ({n} trials each, \
         PingInterval {PING_S} s, pong deadline 0.2 PingInterval)\n"
    );
    println!("| figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    let bound = "every trial ≤ 1.20";
    row(
        "half-open: detection, in PingIntervals",
        &half_open.detect,
        2,
        bound,
    );
    row(
        "no pong (events flowing): detection, in PingIntervals",
        &no_pong.detect,
        2,
        bound,
    );
    row(
        "half-open: drop to connected again, ms",
        &half_open.back,
        1,
        "",
    );
    row("no pong: drop to connected again, ms", &no_pong.back, 1, "");
    println!(
        "\nDropped for the right reason: half-open {}/{n}, no pong {}/{n}.\n",
        half_open.right, no_pong.right
    );
    let _ = std::fs::remove_dir_all(dir);
}
