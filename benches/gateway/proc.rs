//! Readings from /proc: memory, CPU time, wake-ups, context switches and sockets of a
//! process, and how busy the whole machine is. Linux only, like the gateway's figures.

use std::collections::HashSet;
use std::time::{Duration, Instant};

pub(crate) fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Nanoseconds the process has spent on a CPU, from the scheduler's own accounting (precise,
/// unlike the tick-sampled utime/stime, which are noisy at well under 1% on a VM).
pub(crate) fn cpu_ns(pid: u32) -> u64 {
    schedstat(pid).0
}

/// The whole machine's CPU time so far, from /proc/stat: (busy, total) in ticks. Over a window
/// it shows whether something else was running (a build, a test suite) while we measured.
pub(crate) fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Context switches over all threads: (voluntary, involuntary). Involuntary ones are
/// preemptions, by the platform process among others when both share the machine.
pub(crate) fn ctxt_switches(pid: u32) -> (u64, u64) {
    let mut total = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            let n = |v: &str| v.trim().parse::<u64>().unwrap_or(0);
            if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                total.0 += n(v);
            } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                total.1 += n(v);
            }
        }
    }
    total
}

/// Over all threads: (nanoseconds on a CPU, times scheduled onto a CPU). The second counts
/// wake-ups, which is what an idle gateway's CPU time is made of.
pub(crate) fn schedstat(pid: u32) -> (u64, u64) {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| {
                    let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
                    let mut f = s.split_whitespace();
                    let ns = f.next()?.parse::<u64>().ok()?;
                    let slices = f.nth(1)?.parse::<u64>().ok()?;
                    Some((ns, slices))
                })
                .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
        })
        .unwrap_or((0, 0))
}

/// Sockets the process holds (`socket:` links in /proc/PID/fd), and how many of them are TCP
/// (the WebSockets plus any HTTP connection), matched by inode against /proc/PID/net/tcp{,6}.
pub(crate) fn sockets(pid: u32) -> (usize, usize) {
    let inodes: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    l.to_str()?
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    let mine: HashSet<u64> = inodes.iter().copied().collect();
    let mut tcp = 0;
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        tcp += text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(9)?.parse::<u64>().ok())
            .filter(|i| mine.contains(i))
            .count();
    }
    (inodes.len(), tcp)
}

/// Wait (up to five minutes) until the machine has been nearly idle for five seconds: a build
/// or test suite running alongside shows up in a sub-1% CPU figure as noise several times the
/// effect being measured. The window's own "whole machine busy" row says how well that held.
pub(crate) async fn wait_for_quiet_machine() {
    let give_up = Instant::now() + Duration::from_secs(300);
    loop {
        let a = machine_ticks();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let b = machine_ticks();
        let busy = (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64 * 100.0;
        if busy < 10.0 {
            return;
        }
        if Instant::now() > give_up {
            eprintln!("the machine is still {busy:.0}% busy; measuring anyway");
            return;
        }
        eprintln!("the machine is {busy:.0}% busy; waiting for it to settle");
    }
}
