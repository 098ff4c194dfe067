//! Gateway figures: zombie detection latency, detection-to-RESUMED time, the Feishu
//! adapter's detection latency, Telegram's and Weixin's hung-poll detection and loss, the cost
//! of 1,000 connections, reloading one of 1,000 adapters, loss under injected faults, sending through the outbox and the agent
//! API, the latency the agent bridge adds, files in and out, an idle profile's wake-ups, and failover across hosts. `cargo bench --bench gateway` prints Markdown
//! for docs/benchmarks.md. Everything runs on loopback, against the built-in mock platform
//! and, where a section says so, the independent server in benches/independent. This file is
//! the entry: the runtime, which sections run (`-- zombie`, `-- feishu`, `-- slack` (or only its flood, `-- slack-flood`), `-- wecom` (or `-- wecom-flood`), `-- dingtalk`, `-- poll`, `-- matrix`, `-- mattermost`, `-- loss`,
//! `-- thousand`, `-- reload`, `-- outbox`, `-- agent`, `-- media`, `-- rest`, `-- cluster`, `-- etcd-member`), and the scratch directories they share.
//! `HSV_BENCH_TRIALS` (30) sizes the wings' detection figures (wing.rs), for a quick check.

use std::path::PathBuf;

mod agent;
mod binary;
mod cluster;
#[allow(dead_code)]
#[path = "../../tests/it/cluster_lan.rs"]
mod cluster_lan;
#[allow(dead_code)]
#[path = "../../tests/it/cluster_rig.rs"]
mod cluster_rig;
mod detection;
mod dingtalk;
mod etcd_member;
mod feishu;
// The tests' helpers, for the cluster section's rig.
#[path = "../../tests/it/harness.rs"]
mod harness;
mod hung;
mod independent;
mod long_poll;
mod loss;
mod matrix;
mod mattermost;
mod media;
#[path = "../../tests/it/mock_runtime.rs"]
mod mock_runtime;
#[allow(dead_code)]
#[path = "../../tests/it/netns.rs"]
mod netns;
mod outbox;
mod proc;
mod rest;
mod slack;
mod thousand;
#[path = "../../tests/it/tls.rs"]
mod tls;
mod wecom;
mod wing;
mod zombie;

pub(crate) fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hsv-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Nearest-rank percentile of sorted values; NaN for none.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    // This binary is also the bare client of the 1,000-connection section's floor.
    thousand::bare::run_if_asked();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    rt.block_on(async {
        if only.as_deref().is_none_or(|o| o == "zombie") {
            zombie::zombie_latency().await;
        }
        if only.as_deref().is_none_or(|o| o == "feishu") {
            feishu::feishu_detection().await;
        }
        if only.as_deref().is_none_or(|o| o == "slack") {
            slack::slack_detection().await;
        }
        if only
            .as_deref()
            .is_none_or(|o| o == "slack" || o == "slack-flood")
        {
            slack::slack_flood().await;
        }
        if only.as_deref().is_none_or(|o| o == "wecom") {
            wecom::wecom_detection().await;
        }
        if only
            .as_deref()
            .is_none_or(|o| o == "wecom" || o == "wecom-flood")
        {
            wecom::wecom_flood().await;
        }
        if only.as_deref().is_none_or(|o| o == "dingtalk") {
            dingtalk::dingtalk_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "poll") {
            long_poll::long_poll_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "matrix") {
            matrix::matrix_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "mattermost") {
            mattermost::mattermost_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "loss") {
            loss::faults_and_loss().await;
        }
        if only.as_deref().is_none_or(|o| o == "thousand") {
            thousand::thousand_connections().await;
        }
        if only.as_deref().is_none_or(|o| o == "reload") {
            thousand::reload::reload_one_of_many().await;
        }
        if only.as_deref().is_none_or(|o| o == "outbox") {
            outbox::outbox_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "agent") {
            agent::agent_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "media") {
            media::media_figures().await;
        }
        if only.as_deref().is_none_or(|o| o == "rest") {
            rest::rest_figures().await;
        }
    });
    // Processes and blocking waits: outside the runtime, which serves the mock meanwhile.
    if only.as_deref().is_none_or(|o| o == "cluster") {
        cluster::cluster_figures(&rt);
    }
    if only.as_deref().is_none_or(|o| o == "etcd-member") {
        etcd_member::etcd_member_figures();
    }
}
