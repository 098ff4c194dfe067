//! Sending (issue 12): throughput and latency of messages submitted through the agent API to
//! the platform, long-poll event latency, and the gateway's memory with 10,000 messages
//! queued. A real gateway process, on loopback; sends against both the built-in mock and the
//! independent server, the rest against the mock.
//!
//! `HSV_BENCH_SENDS` (2000) is the throughput run's size, `HSV_BENCH_SUBMITTERS` (32) how many
//! submits are in flight at once, `HSV_BENCH_RATE_SECS` (20) the length of the steady-rate
//! runs, `HSV_BENCH_QUEUED` (10000) the messages queued during the outage, `HSV_BENCH_ONLY` (`mock` or `independent`) the server for the send figures, and
//! `HSV_BENCH_PARTS` (e.g. `throughput,memory`) which of throughput, latency, events and
//! memory run.

mod events;
mod memory;
mod rig;
mod send;

use crate::binary::{gateway_bin, BIN};
use crate::independent::Independent;
use crate::proc::wait_for_quiet_machine;
use crate::scratch;

use events::{event_latency, EventLatency};
use memory::{queued_memory, Memory};
use rig::Server;
use send::{latency, spread, throughput, Latency, Throughput, SHAPES};

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) async fn outbox_figures() {
    let n = env_num("HSV_BENCH_SENDS", 2000);
    let submitters = env_num("HSV_BENCH_SUBMITTERS", 32);
    let secs = env_num("HSV_BENCH_RATE_SECS", 20) as u32;
    let only = std::env::var("HSV_BENCH_ONLY").unwrap_or_default();
    let parts = std::env::var("HSV_BENCH_PARTS").unwrap_or_default();
    let part = |p: &str| parts.is_empty() || parts.split(',').any(|x| x.trim() == p);
    let servers: Vec<&'static str> = ["mock", "independent"]
        .into_iter()
        .filter(|s| only.is_empty() || only == *s)
        .collect();
    let bin = gateway_bin();
    eprintln!("measuring {bin}");
    let python = (servers.contains(&"independent") && (part("throughput") || part("latency")))
        .then(Independent::python);
    let logs = scratch("outbox-independent-logs");
    let runs = std::cell::Cell::new(0);
    let start = |label: &'static str| {
        let python = python.clone();
        runs.set(runs.get() + 1);
        let log = logs.join(format!("{label}-{}.log", runs.get()));
        async move { Server::start(label, python.as_deref(), &log).await }
    };

    let mut tp = vec![];
    if part("throughput") {
        for shape in SHAPES {
            for &label in &servers {
                wait_for_quiet_machine().await;
                let server = start(label).await;
                let r = throughput(&server, label, shape, n, submitters).await;
                eprintln!(
                    "throughput {} / {label}: {:.0} msg/s",
                    shape.name,
                    r.delivered as f64 / r.deliver_ms * 1000.0
                );
                tp.push(r);
            }
        }
    }
    let mut lat = vec![];
    if part("latency") {
        for &label in &servers {
            wait_for_quiet_machine().await;
            let server = start(label).await;
            lat.push(latency(&server, label, 100, secs).await);
        }
    }
    let mut ev = None;
    if part("events") {
        wait_for_quiet_machine().await;
        ev = Some(event_latency(&start("mock").await, 50, secs).await);
    }
    let mut mem = None;
    if part("memory") {
        wait_for_quiet_machine().await;
        let queued = env_num("HSV_BENCH_QUEUED", 10_000);
        mem = Some(queued_memory(&start("mock").await, queued, submitters).await);
    }

    print_throughput(&tp, n, submitters);
    print_latency(&lat);
    if let Some(ev) = &ev {
        print_events(ev);
    }
    if let Some(mem) = &mem {
        print_memory(mem);
    }
    println!(
        "Measured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
    // Anything the independent server complained about (tracebacks, aiohttp warnings).
    for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if !text.trim().is_empty() {
            eprintln!("{} stderr, last lines:", entry.path().display());
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            for l in tail.into_iter().rev() {
                eprintln!("  {l}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(logs);
}

/// A row with the mock's and the independent server's cells, "—" where one was not run.
fn row<T>(figure: &str, results: &[&T], server: fn(&T) -> &str, cell: &dyn Fn(&T) -> String) {
    let cells: Vec<String> = ["mock", "independent"]
        .iter()
        .map(|s| {
            results
                .iter()
                .find(|r| server(r) == *s)
                .map_or("—".into(), |r| cell(r))
        })
        .collect();
    println!("| {figure} | {} | {} |", cells[0], cells[1]);
}

fn print_throughput(results: &[Throughput], n: usize, submitters: usize) {
    if results.is_empty() {
        return;
    }
    println!(
        "### Send throughput: {n} messages of 200 characters submitted through the API as fast as possible ({submitters} requests in flight)\n"
    );
    println!("| figure | built-in mock | independent server |");
    println!("|---|---|---|");
    for shape in SHAPES {
        let rs: Vec<&Throughput> = results.iter().filter(|r| r.shape == shape.name).collect();
        if rs.is_empty() {
            continue;
        }
        let server = |r: &Throughput| r.server;
        row(
            &format!("**{}**: messages/s, first submit → last post", shape.name),
            &rs,
            server,
            &|r| format!("{:.0}", r.delivered as f64 / r.deliver_ms * 1000.0),
        );
        row("submits answered per second", &rs, server, &|r| {
            format!("{:.0}", r.n as f64 / r.submit_ms * 1000.0)
        });
        row("delivered / posted twice", &rs, server, &|r| {
            format!("{} / {}", r.delivered, r.duplicates)
        });
        row(
            "gateway CPU per message / platform process CPU per message",
            &rs,
            server,
            &|r| {
                let plat = r
                    .platform_cpu_ms
                    .map_or("(in the bench process)".into(), |p| {
                        format!("{:.2} ms", p / r.n as f64)
                    });
                format!("{:.2} ms / {plat}", r.gateway_cpu_ms / r.n as f64)
            },
        );
        row("whole machine busy over the run", &rs, server, &|r| {
            format!("{:.0}%", r.busy)
        });
    }
    println!();
}

fn print_latency(results: &[Latency]) {
    let Some(any) = results.first() else { return };
    println!(
        "### Send latency at {:.0} messages/s ({} messages over {:.0} s, one Discord channel, one POST each)\n",
        any.n as f64 / any.secs,
        any.n,
        any.secs
    );
    println!("| figure | built-in mock | independent server |");
    println!("|---|---|---|");
    let rs: Vec<&Latency> = results.iter().collect();
    let server = |r: &Latency| r.server;
    row(
        "before `POST /v1/messages` → platform received it, p50 / p99 / max",
        &rs,
        server,
        &|r| spread(&r.to_platform),
    );
    row(
        "before `POST /v1/messages` → its 202 (durable), p50 / p99 / max",
        &rs,
        server,
        &|r| spread(&r.to_answer),
    );
    row("delivered", &rs, server, &|r| {
        format!("{} of {}", r.to_platform.len(), r.n)
    });
    row("gateway CPU, % of one core", &rs, server, &|r| {
        format!("{:.1}%", r.gateway_cpu_pct)
    });
    row("whole machine busy over the run", &rs, server, &|r| {
        format!("{:.0}%", r.busy)
    });
    println!();
}

fn print_events(r: &EventLatency) {
    println!(
        "### Long-poll event latency ({} dispatches at {}/s from the built-in mock; the agent follows `GET /v1/events?wait=30s`)\n",
        r.n, r.rate
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| mock dispatch → agent has the event, p50 / p99 / max | {} |",
        spread(&r.latencies)
    );
    println!(
        "| events received / missing / twice | {} / {} / {} |",
        r.latencies.len(),
        r.missing,
        r.duplicates
    );
    println!(
        "| answers to the agent (events per answer) | {} ({:.2}) |",
        r.polls,
        r.latencies.len() as f64 / r.polls.max(1) as f64
    );
    println!("| gateway CPU, % of one core | {:.1}% |", r.gateway_cpu_pct);
    println!("| whole machine busy over the run | {:.0}% |\n", r.busy);
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn print_memory(m: &Memory) {
    println!(
        "### {} messages queued while the platform is down (built-in mock, Discord's send endpoint answering 503, one channel)\n",
        m.n
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| gateway RSS before submitting | {} |",
        mib(m.rss_before_kib)
    );
    println!(
        "| gateway RSS with {} queued (state file depth {}) | {} |",
        m.n,
        m.depth_queued.map_or("?".into(), |d| d.to_string()),
        mib(m.rss_queued_kib)
    );
    println!(
        "| journal with {} queued | {:.1} MiB |",
        m.n,
        m.journal_queued as f64 / 1048576.0
    );
    println!(
        "| submitting them: wall time / gateway CPU | {:.1} s / {:.1} s |",
        m.submit_ms / 1000.0,
        m.submit_cpu_ms / 1000.0
    );
    println!("| 503 answers during the outage | {} |", m.failed_attempts);
    println!(
        "| outage ends → first post / last post ({} delivered) | {:.1} s / {:.1} s |",
        m.delivered,
        m.first_post_ms / 1000.0,
        m.drained_ms / 1000.0
    );
    println!(
        "| gateway RSS after all were delivered | {} |",
        mib(m.rss_drained_kib)
    );
    println!("| peak RSS (VmHWM) | {} |", mib(m.hwm_kib));
    println!(
        "| journal after all were delivered | {:.1} MiB |\n",
        m.journal_drained as f64 / 1048576.0
    );
}
