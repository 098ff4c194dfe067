//! Long-poll event latency: an agent follows `GET /v1/events?wait=30s` while the mock emits
//! dispatches at a steady rate, and each event is timed from the mock's dispatch to the
//! agent's answer holding it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::proc::{cpu_ns, machine_ticks};

use super::rig::{Rig, Server};

pub(super) struct EventLatency {
    pub(super) n: usize,
    pub(super) rate: u32,
    /// Sorted, ms.
    pub(super) latencies: Vec<f64>,
    pub(super) missing: usize,
    pub(super) duplicates: usize,
    /// Answers the agent got over the run (events per answer = n / polls).
    pub(super) polls: usize,
    pub(super) gateway_cpu_pct: f64,
    pub(super) busy: f64,
}

#[derive(Default)]
struct Seen {
    at: HashMap<String, Instant>,
    duplicates: usize,
    polls: usize,
}

/// The agent: long-polls from `end`, follows `next`, and notes when each event arrived.
async fn follow(rig_client: hermes_svc::api::client::Client, seen: Arc<Mutex<Seen>>) {
    let mut cursor = "end".to_owned();
    loop {
        match rig_client
            .events(Some(&cursor), Duration::from_secs(30), 1000)
            .await
        {
            Ok(page) => {
                let now = Instant::now();
                let mut seen = seen.lock().unwrap();
                seen.polls += 1;
                for e in page.events {
                    if seen.at.insert(e.event.id, now).is_some() {
                        seen.duplicates += 1;
                    }
                }
                cursor = page.next;
            }
            Err(e) => {
                eprintln!("events: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// `rate` dispatches a second for `secs` s, against the mock (which emits them).
pub(super) async fn event_latency(server: &Server, rate: u32, secs: u32) -> EventLatency {
    let mock = server.mock();
    let rig = Rig::start("events", &server.http_base(), &["dc"]).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let agent = tokio::spawn(follow(rig.client.clone(), seen.clone()));
    // The first long-poll must be parked (its `end` fixed) before the first dispatch.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let polls_before = seen.lock().unwrap().polls;
    let n = (rate * secs) as usize;
    let (cpu0, m0, started) = (cpu_ns(rig.pid()), machine_ticks(), Instant::now());
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    let mut emitted = Vec::with_capacity(n);
    for i in 0..n {
        tick.tick().await;
        let id = format!("lat-{i:05}");
        let d = serde_json::json!({
            "id": format!("{}", 200_000_000_000_000_000u64 + i as u64),
            "channel_id": "100000000000000001",
            "content": "latency probe",
            "author": {"id": "100000000000000009", "username": "bench"},
        });
        let at = Instant::now();
        mock.emit_dispatch("MESSAGE_CREATE", &id, d);
        emitted.push((id, at));
    }
    let end = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().at.len() < n && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (cpu1, m1, run) = (cpu_ns(rig.pid()), machine_ticks(), started.elapsed());
    agent.abort();
    let seen = seen.lock().unwrap();
    let mut latencies: Vec<f64> = emitted
        .iter()
        .filter_map(|(id, at)| Some((*seen.at.get(id)? - *at).as_secs_f64() * 1000.0))
        .collect();
    latencies.sort_by(f64::total_cmp);
    EventLatency {
        n,
        rate,
        missing: n - latencies.len(),
        latencies,
        duplicates: seen.duplicates,
        polls: seen.polls - polls_before,
        gateway_cpu_pct: (cpu1 - cpu0) as f64 / 1e9 / run.as_secs_f64() * 100.0,
        busy: (m1.0 - m0.0) as f64 / (m1.1 - m0.1).max(1) as f64 * 100.0,
    }
}
