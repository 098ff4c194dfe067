//! Measuring one configuration: start the gateway with `n` adapters, wait until all are
//! ready, then sample it (and the platform) over the window and the optional soak.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::binary::spawn_gateway;
use crate::proc::{cpu_ns, ctxt_switches, machine_ticks, proc_status, schedstat, sockets};
use crate::scratch;

use super::config::{many_adapters, Kind};
use super::platform::{Seen, Server};

/// One reading of the gateway (and the platform) during the measured window.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sample {
    pub(super) at: Instant,
    pub(super) cpu_ns: u64,
    pub(super) wakeups: u64,
    pub(super) switches: (u64, u64),
    pub(super) machine: (u64, u64),
    pub(super) platform_cpu_ns: u64,
    pub(super) rss_kib: u64,
    pub(super) sockets: (usize, usize),
    pub(super) seen: Seen,
}

async fn sample(pid: u32, server: &Server) -> Sample {
    let (cpu, wakeups) = schedstat(pid);
    Sample {
        at: Instant::now(),
        cpu_ns: cpu,
        wakeups,
        switches: ctxt_switches(pid),
        machine: machine_ticks(),
        platform_cpu_ns: server.pid().map_or(0, cpu_ns),
        rss_kib: proc_status(pid, "VmRSS:"),
        sockets: sockets(pid),
        seen: server.seen().await,
    }
}

/// What one configuration measured.
pub(super) struct Measured {
    pub(super) kind: Kind,
    pub(super) server: &'static str,
    pub(super) n: usize,
    pub(super) ready_after: Duration,
    pub(super) cpu_to_ready: Duration,
    pub(super) sockets_15s: (usize, usize),
    pub(super) rss_ready_kib: u64,
    pub(super) hwm_kib: u64,
    /// The first sample (two intervals after ready), the window's last, then one a minute.
    pub(super) window: (Sample, Sample),
    pub(super) soak: Vec<Sample>,
}

pub(super) fn env_secs(key: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(key)
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(default),
    )
}

/// Wait for "n/n adapters ready" in a READY=1/STATUS= datagram or in the state file.
pub(super) async fn wait_ready(notify: &std::os::unix::net::UnixDatagram, state: &Path, n: usize) {
    let want = format!("{n}/{n} adapters ready");
    let end = Instant::now() + Duration::from_secs(180);
    let mut buf = vec![0u8; 4096];
    let mut polls = 0u32;
    loop {
        while let Ok(len) = notify.recv(&mut buf) {
            if String::from_utf8_lossy(&buf[..len]).contains(&want) {
                return;
            }
        }
        polls += 1;
        if polls % 10 == 0 {
            if let Ok(t) = std::fs::read_to_string(state) {
                if t.contains(&want) {
                    return;
                }
            }
        }
        assert!(Instant::now() < end, "the gateway never said {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) async fn measure(kind: Kind, server: Server, label: &'static str, n: usize) -> Measured {
    let interval = Duration::from_secs(5);
    let window = env_secs("HSV_BENCH_WINDOW", 60);
    let soak = env_secs("HSV_BENCH_SOAK", 0);
    let home = scratch(&format!("thousand-{}-{label}", kind.name()));
    let ph = home.join("profiles/many");
    std::fs::create_dir_all(&ph).unwrap();
    let (toml, env) = many_adapters(kind, n, &server.http_base());
    std::fs::write(ph.join("gateway.toml"), toml).unwrap();
    std::fs::write(ph.join(".env"), env).unwrap();
    let notify_path = home.join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_nonblocking(true).unwrap();

    let started = Instant::now();
    let gw = spawn_gateway(&home, "many", Some(&notify_path));
    let pid = gw.0.id();
    let at_15s = tokio::spawn(async move {
        tokio::time::sleep_until((started + Duration::from_secs(15)).into()).await;
        sockets(pid)
    });
    wait_ready(&notify, &ph.join("state/gateway.json"), n).await;
    let ready_after = started.elapsed();
    let cpu_to_ready = Duration::from_nanos(cpu_ns(pid));
    let rss_ready_kib = proc_status(pid, "VmRSS:");
    eprintln!(
        "{n} {} / {label}: ready after {:.2} s; measuring {window:?}{}",
        kind.name(),
        ready_after.as_secs_f64(),
        if soak > window {
            format!(", RSS for {soak:?}")
        } else {
            String::new()
        }
    );
    // Let the first-heartbeat jitter settle, then measure.
    tokio::time::sleep(interval * 2).await;
    let sockets_15s = at_15s.await.unwrap();
    let first = sample(pid, &server).await;
    let minute = Duration::from_secs(60);
    let mut offsets: Vec<Duration> = (1..=soak.as_secs() / 60)
        .map(|k| minute * k as u32)
        .collect();
    offsets.push(window);
    offsets.sort();
    offsets.dedup();
    let mut window_end = None;
    let mut soak_samples = vec![first];
    for off in offsets {
        tokio::time::sleep_until((first.at + off).into()).await;
        let s = sample(pid, &server).await;
        if off == window {
            window_end = Some(s);
        }
        if soak > Duration::ZERO && off.as_secs() % 60 == 0 {
            soak_samples.push(s);
        }
    }
    let hwm_kib = proc_status(pid, "VmHWM:");
    drop(gw);
    drop(server);
    let _ = std::fs::remove_dir_all(home);
    Measured {
        kind,
        server: label,
        n,
        ready_after,
        cpu_to_ready,
        sockets_15s,
        rss_ready_kib,
        hwm_kib,
        window: (first, window_end.unwrap()),
        soak: if soak > Duration::ZERO {
            soak_samples
        } else {
            vec![]
        },
    }
}
