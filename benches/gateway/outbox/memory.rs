//! Memory with a deep queue: the platform's send endpoint is down while 10,000 messages are
//! submitted, so every one of them waits in the outbox; then the outage ends and the queue
//! drains.

use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{Platform, SendFault};

use crate::proc::{cpu_ns, proc_status};

use super::rig::{body, submit_all, Clock, Rig, Server};

pub(super) struct Memory {
    pub(super) n: usize,
    pub(super) rss_before_kib: u64,
    pub(super) rss_queued_kib: u64,
    pub(super) rss_drained_kib: u64,
    pub(super) hwm_kib: u64,
    pub(super) journal_queued: u64,
    pub(super) journal_drained: u64,
    pub(super) depth_queued: Option<u64>,
    pub(super) submit_ms: f64,
    pub(super) submit_cpu_ms: f64,
    /// From the end of the outage to the first and to the last post.
    pub(super) first_post_ms: f64,
    pub(super) drained_ms: f64,
    pub(super) delivered: usize,
    pub(super) failed_attempts: usize,
}

/// The outbox's depth as the state file last said it (rewritten every few seconds).
fn depth(rig: &Rig) -> Option<u64> {
    let text = std::fs::read_to_string(rig.profile_home.join("state/gateway.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["outbox"]["depth"].as_u64()
}

/// `n` messages of about 200 characters to one channel while Discord's send endpoint answers
/// 503, then the outage ends. Against the mock, which can be switched off and on.
pub(super) async fn queued_memory(server: &Server, n: usize, concurrency: usize) -> Memory {
    let mock = server.mock();
    let rig = Rig::start("memory", &server.http_base(), &["dc"]).await;
    // Let start-up allocations settle before the first reading.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = rig.pid();
    let rss_before_kib = proc_status(pid, "VmRSS:");
    mock.set_send_fault(
        Platform::Discord,
        SendFault::Down(Duration::from_secs(3600)),
    );
    let bodies = (0..n)
        .map(|i| body("dc", "channel:100000000000000001", &format!("mem-{i:05}")))
        .collect();
    let (cpu0, started) = (cpu_ns(pid), Instant::now());
    submit_all(&rig.client, bodies, concurrency).await;
    let submit_ms = started.elapsed().as_secs_f64() * 1000.0;
    let submit_cpu_ms = (cpu_ns(pid) - cpu0) as f64 / 1e6;
    // Every submit was answered, so every message is in the journal; wait for the state
    // file to show them all too, and for the process to settle.
    let end = Instant::now() + Duration::from_secs(15);
    while depth(&rig) != Some(n as u64) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let depth_queued = depth(&rig);
    let rss_queued_kib = proc_status(pid, "VmRSS:");
    let journal_queued = rig.journal_bytes();
    let failed_attempts = mock.send_attempts().len();

    mock.clear_send_fault(Platform::Discord);
    let clock = Clock::now();
    let arrivals = server
        .wait_arrivals(&clock, "mem-", n, Duration::from_secs(600))
        .await;
    let at = |f: fn(f64, f64) -> f64, init| arrivals.iter().map(|a| a.at_ms).fold(init, f);
    let (first_post_ms, drained_ms) = (at(f64::min, f64::INFINITY), at(f64::max, 0.0));
    // The last `sent` line is written just after the post; give it and the allocator a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Memory {
        n,
        rss_before_kib,
        rss_queued_kib,
        rss_drained_kib: proc_status(pid, "VmRSS:"),
        hwm_kib: proc_status(pid, "VmHWM:"),
        journal_queued,
        journal_drained: rig.journal_bytes(),
        depth_queued,
        submit_ms,
        submit_cpu_ms,
        first_post_ms,
        drained_ms,
        delivered: arrivals.len(),
        failed_attempts,
    }
}
