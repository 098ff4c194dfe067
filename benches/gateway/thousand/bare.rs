//! The floor this stack sets: a bare tokio-tungstenite client holding the same 1,000
//! connections to the independent server and heartbeating on the same schedule (every 5 s, on
//! the same 1/50-interval grid, on one thread), with none of the gateway's work: no Identify,
//! no liveness tracking, no spool, no health, no logging. What the gateway costs above it is
//! the gateway's own; what this costs is tokio's, tungstenite's and the kernel's.
//!
//! It runs as a process of its own (this bench binary again, asked by the environment), so
//! that its CPU is read from /proc exactly as the gateway's is.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::time::sleep_until;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::independent::Independent;
use crate::proc::{proc_status, schedstat};

/// Set to `URL N` (or `URL N INTERVAL_MS`) to make this process the bare client instead of
/// the bench.
const ASKED: &str = "HSV_BENCH_BARE_CLIENT";

/// The heartbeat interval unless the ask names one.
const INTERVAL: Duration = Duration::from_secs(5);

/// If this process was started as the bare client, be it and never return.
pub(crate) fn run_if_asked() {
    let Ok(ask) = std::env::var(ASKED) else {
        return;
    };
    let mut words = ask.split(' ');
    let (Some(url), Some(n)) = (words.next(), words.next()) else {
        panic!("HSV_BENCH_BARE_CLIENT=URL N [INTERVAL_MS]");
    };
    let n: usize = n.parse().expect("a connection count");
    let interval = words.next().map_or(INTERVAL, |ms| {
        Duration::from_millis(ms.parse().expect("an interval in ms"))
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let origin = tokio::time::Instant::now();
        for i in 0..n {
            tokio::spawn(connection(
                url.to_owned(),
                origin,
                interval,
                interval.mul_f64(i as f64 / n as f64),
            ));
            if i % 8 == 7 {
                tokio::task::yield_now().await;
            }
        }
        std::future::pending::<()>().await;
    });
    unreachable!()
}

/// Round up onto the shared grid, as the gateway's `session::coalesce` does.
fn on_grid(
    origin: tokio::time::Instant,
    interval: Duration,
    at: tokio::time::Instant,
) -> tokio::time::Instant {
    let grid = (interval / 50).as_nanos();
    let slots = at
        .saturating_duration_since(origin)
        .as_nanos()
        .div_ceil(grid);
    origin + Duration::from_nanos((slots * grid) as u64)
}

async fn connection(
    url: String,
    origin: tokio::time::Instant,
    interval: Duration,
    phase: Duration,
) {
    // The gateway's buffers, so that both pay the same per read and write.
    let config = WebSocketConfig::default()
        .read_buffer_size(4 << 10)
        .write_buffer_size(256);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), false)
        .await
        .expect("the bare client connects");
    let mut next = tokio::time::Instant::now() + phase;
    let timer = sleep_until(on_grid(origin, interval, next));
    tokio::pin!(timer);
    loop {
        tokio::select! {
            biased;
            _ = &mut timer => {
                ws.send(Message::text(r#"{"op":1,"d":null}"#)).await.expect("a heartbeat goes out");
                next += interval;
                timer.as_mut().reset(on_grid(origin, interval, next));
            }
            frame = ws.next() => match frame {
                Some(Ok(_)) => {}
                _ => panic!("the independent server closed a bare client's connection"),
            },
        }
    }
}

/// Start the bare client (this bench binary again) with `n` connections to `url`,
/// heartbeating every `interval`.
pub(crate) fn spawn(url: &str, n: usize, interval: Duration) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .env(ASKED, format!("{url} {n} {}", interval.as_millis()))
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("start the bare client")
}

/// What the bare client cost over the window.
pub(super) struct Floor {
    pub(super) n: usize,
    pub(super) cpu_pct: f64,
    pub(super) wakeups_per_s: f64,
    pub(super) heartbeats_per_s: f64,
    pub(super) rss_kib: u64,
    pub(super) window: Duration,
}

/// Run the bare client against a fresh independent server and read its CPU over `window`,
/// from two heartbeat intervals after every connection is up.
pub(super) async fn measure(server: Independent, n: usize, window: Duration) -> Floor {
    let url = format!("ws://127.0.0.1:{}/websocket", server.port);
    let mut child = spawn(&url, n, INTERVAL);
    let pid = child.id();
    let up = Instant::now() + Duration::from_secs(60);
    while server.stats().await["connections"].as_u64().unwrap_or(0) < n as u64 {
        assert!(
            Instant::now() < up,
            "the bare client never held {n} connections"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(INTERVAL * 2).await;
    let beats = |v: serde_json::Value| v["heartbeats"].as_u64().unwrap_or(0);
    let t0 = Instant::now();
    let (cpu0, wake0) = schedstat(pid);
    let beats0 = beats(server.stats().await);
    tokio::time::sleep(window).await;
    let (cpu1, wake1) = schedstat(pid);
    let beats1 = beats(server.stats().await);
    let measured = t0.elapsed();
    let secs = measured.as_secs_f64();
    let rss_kib = proc_status(pid, "VmRSS:");
    let _ = child.kill();
    let _ = child.wait();
    Floor {
        n,
        cpu_pct: (cpu1 - cpu0) as f64 / 1e9 / secs * 100.0,
        wakeups_per_s: (wake1 - wake0) as f64 / secs,
        heartbeats_per_s: (beats1 - beats0) as f64 / secs,
        rss_kib,
        window: measured,
    }
}

/// The floor's table, printed after the gateway's.
pub(super) fn print(floor: &Floor) {
    println!(
        "### The floor: a bare tokio-tungstenite client, {} connections, heartbeat every 5 s ({:.0} s measured)\n",
        floor.n,
        floor.window.as_secs_f64()
    );
    println!("| figure | independent server |");
    println!("|---|---|");
    println!(
        "| CPU over the window, % of one core | {:.2}% |",
        floor.cpu_pct
    );
    println!("| wake-ups per second | {:.0} |", floor.wakeups_per_s);
    println!(
        "| heartbeats per second seen by the platform | {:.1} |",
        floor.heartbeats_per_s
    );
    println!("| RSS | {:.1} MiB |\n", floor.rss_kib as f64 / 1024.0);
}
