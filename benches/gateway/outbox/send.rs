//! Sending through the API: how many messages a second reach the platform when an agent
//! submits as fast as it can, and how long one message takes at a steady 100 a second.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::proc::{cpu_ns, machine_ticks};

use super::rig::{body, submit_all, Clock, Rig, Server};
use crate::percentile;

/// Which adapters a throughput run has, and the (adapter, target) pairs its messages go to in
/// turn.
pub(super) struct Shape {
    pub(super) name: &'static str,
    pub(super) adapters: &'static [&'static str],
    pub(super) targets: &'static [(&'static str, &'static str)],
}

pub(super) const SHAPES: &[Shape] = &[
    Shape {
        name: "one Discord channel",
        adapters: &["dc"],
        targets: &[("dc", "channel:100000000000000001")],
    },
    Shape {
        name: "four channels, one adapter",
        adapters: &["dc"],
        targets: &[
            ("dc", "channel:100000000000000001"),
            ("dc", "channel:100000000000000002"),
            ("dc", "channel:100000000000000003"),
            ("dc", "channel:100000000000000004"),
        ],
    },
    Shape {
        name: "two adapters, one channel each",
        adapters: &["dc", "dc2"],
        targets: &[
            ("dc", "channel:100000000000000001"),
            ("dc2", "channel:100000000000000002"),
        ],
    },
];

pub(super) struct Throughput {
    pub(super) shape: &'static str,
    pub(super) server: &'static str,
    pub(super) n: usize,
    pub(super) delivered: usize,
    pub(super) duplicates: usize,
    /// From the first submit until the last one was answered.
    pub(super) submit_ms: f64,
    /// From the first submit until the platform received the last post.
    pub(super) deliver_ms: f64,
    pub(super) gateway_cpu_ms: f64,
    pub(super) platform_cpu_ms: Option<f64>,
    /// The whole machine's busy share over the run.
    pub(super) busy: f64,
}

/// Submit `n` messages, `concurrency` at a time, over `shape`, and time them to the platform.
pub(super) async fn throughput(
    server: &Server,
    label: &'static str,
    shape: &Shape,
    n: usize,
    concurrency: usize,
) -> Throughput {
    let rig = Rig::start(&format!("tp-{label}"), &server.http_base(), shape.adapters).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let bodies = (0..n)
        .map(|i| {
            let (adapter, target) = shape.targets[i % shape.targets.len()];
            body(adapter, target, &format!("tp-{i:05}"))
        })
        .collect();
    let platform_cpu = || server.pid().map(cpu_ns);
    let (cpu0, plat0, m0) = (cpu_ns(rig.pid()), platform_cpu(), machine_ticks());
    let clock = Clock::now();
    submit_all(&rig.client, bodies, concurrency).await;
    let submit_ms = clock.since(Instant::now());
    let arrivals = server
        .wait_arrivals(&clock, "tp-", n, Duration::from_secs(300))
        .await;
    let (cpu1, plat1, m1) = (cpu_ns(rig.pid()), platform_cpu(), machine_ticks());
    let mut tags: Vec<&str> = arrivals.iter().map(|a| a.tag.as_str()).collect();
    tags.sort_unstable();
    tags.dedup();
    Throughput {
        shape: shape.name,
        server: label,
        n,
        delivered: tags.len(),
        duplicates: arrivals.len() - tags.len(),
        submit_ms,
        deliver_ms: arrivals.iter().map(|a| a.at_ms).fold(0.0, f64::max),
        gateway_cpu_ms: (cpu1 - cpu0) as f64 / 1e6,
        platform_cpu_ms: plat0.zip(plat1).map(|(a, b)| (b - a) as f64 / 1e6),
        busy: (m1.0 - m0.0) as f64 / (m1.1 - m0.1).max(1) as f64 * 100.0,
    }
}

pub(super) struct Latency {
    pub(super) server: &'static str,
    pub(super) n: usize,
    pub(super) secs: f64,
    /// Sorted, ms: from just before the POST to the platform receiving the message.
    pub(super) to_platform: Vec<f64>,
    /// Sorted, ms: from just before the POST to its 202 answer (the message durable).
    pub(super) to_answer: Vec<f64>,
    pub(super) gateway_cpu_pct: f64,
    pub(super) busy: f64,
}

/// Submit one message every `1/rate` s for `secs` s to one channel, each POST on its own
/// task so that a slow answer does not delay the next, and time each to the platform.
pub(super) async fn latency(server: &Server, label: &'static str, rate: u32, secs: u32) -> Latency {
    let rig = Rig::start(&format!("lat-{label}"), &server.http_base(), &["dc"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = (rate * secs) as usize;
    let clock = std::sync::Arc::new(Clock::now());
    let (cpu0, m0, started) = (cpu_ns(rig.pid()), machine_ticks(), Instant::now());
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        tick.tick().await;
        let (client, clock) = (rig.client.clone(), clock.clone());
        tasks.push(tokio::spawn(async move {
            let b = body("dc", "channel:100000000000000001", &format!("lat-{i:05}"));
            let before = clock.since(Instant::now());
            let answer = client.submit(&b).await;
            let answered = clock.since(Instant::now());
            if let Err(e) = answer {
                panic!("submit {} refused: {e}", b.idempotency_key);
            }
            (b.idempotency_key, before, answered)
        }));
    }
    let mut sent: HashMap<String, f64> = HashMap::new();
    let mut to_answer = vec![];
    for t in tasks {
        let (tag, before, answered) = t.await.unwrap();
        to_answer.push(answered - before);
        sent.insert(tag, before);
    }
    let arrivals = server
        .wait_arrivals(&clock, "lat-", n, Duration::from_secs(120))
        .await;
    let (cpu1, m1, secs_run) = (cpu_ns(rig.pid()), machine_ticks(), started.elapsed());
    let mut to_platform: Vec<f64> = arrivals
        .iter()
        .filter_map(|a| Some(a.at_ms - sent.get(&a.tag)?))
        .collect();
    to_platform.sort_by(f64::total_cmp);
    to_answer.sort_by(f64::total_cmp);
    Latency {
        server: label,
        n,
        secs: f64::from(secs),
        to_platform,
        to_answer,
        gateway_cpu_pct: (cpu1 - cpu0) as f64 / 1e9 / secs_run.as_secs_f64() * 100.0,
        busy: (m1.0 - m0.0) as f64 / (m1.1 - m0.1).max(1) as f64 * 100.0,
    }
}

/// p50 / p99 / max of sorted milliseconds, for a table cell.
pub(super) fn spread(sorted: &[f64]) -> String {
    format!(
        "{:.1} / {:.1} / {:.1} ms",
        percentile(sorted, 50.0),
        percentile(sorted, 99.0),
        sorted.last().copied().unwrap_or(f64::NAN)
    )
}
