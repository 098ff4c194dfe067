//! The Markdown tables for the 1,000-connection section, in the format
//! docs/benchmarks.md records.

use super::config::Kind;
use super::measure::{Measured, Sample};

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn cpu_pct(a: &Sample, b: &Sample, ns: fn(&Sample) -> u64) -> f64 {
    (ns(b) - ns(a)) as f64 / 1e9 / (b.at - a.at).as_secs_f64() * 100.0
}

fn beats_per_s(a: &Sample, b: &Sample) -> f64 {
    (b.seen.heartbeats - a.seen.heartbeats) as f64 / (b.at - a.at).as_secs_f64()
}

fn socket_text((all, tcp): (usize, usize)) -> String {
    format!("{all} ({tcp} TCP)")
}

/// One table per adapter kind, the built-in mock and the independent server side by side.
pub(super) fn print_thousand(results: &[Measured]) {
    for kind in [Kind::QqBot, Kind::Discord] {
        let cols: Vec<Option<&Measured>> = ["mock", "independent"]
            .iter()
            .map(|s| results.iter().find(|r| r.kind == kind && r.server == *s))
            .collect();
        let Some(any) = cols.iter().flatten().next() else {
            continue;
        };
        let n = any.n;
        let window = any.window.1.at - any.window.0.at;
        let ws_ping = std::env::var("HSV_BENCH_WS_PING")
            .map(|v| format!(", ws-ping = {v}"))
            .unwrap_or_default();
        println!(
            "### One gateway, {n} `{}` adapters, heartbeat every 5 s{ws_ping} ({:.0} s measured)\n",
            kind.name(),
            window.as_secs_f64()
        );
        println!("| figure | built-in mock | independent server | target |");
        println!("|---|---|---|---|");
        let row = |figure: &str, target: &str, f: &dyn Fn(&Measured) -> String| {
            let cells: Vec<String> = cols.iter().map(|c| c.map_or("—".into(), f)).collect();
            println!("| {figure} | {} | {} | {target} |", cells[0], cells[1]);
        };
        row(&format!("time to \"{n}/{n} adapters ready\""), "", &|m| {
            format!("{:.2} s", m.ready_after.as_secs_f64())
        });
        row("gateway CPU time until ready", "", &|m| {
            format!("{:.2} s", m.cpu_to_ready.as_secs_f64())
        });
        row("sockets held 15 s after start", "", &|m| {
            socket_text(m.sockets_15s)
        });
        row("sockets held at the end", "", &|m| {
            socket_text(m.window.1.sockets)
        });
        row("RSS at ready", "", &|m| mib(m.rss_ready_kib));
        row("RSS after the window", "≤ 32 MiB", &|m| {
            mib(m.window.1.rss_kib)
        });
        row("peak RSS (VmHWM)", "", &|m| mib(m.hwm_kib));
        row("CPU over the window, % of one core", "≤ 0.7%", &|m| {
            format!("{:.2}%", cpu_pct(&m.window.0, &m.window.1, |s| s.cpu_ns))
        });
        row(
            "gateway wake-ups per second (threads scheduled onto a CPU)",
            "",
            &|m| {
                let (a, b) = m.window;
                format!(
                    "{:.0}",
                    (b.wakeups - a.wakeups) as f64 / (b.at - a.at).as_secs_f64()
                )
            },
        );
        row(
            "gateway context switches per second, voluntary / involuntary",
            "",
            &|m| {
                let (a, b) = m.window;
                let secs = (b.at - a.at).as_secs_f64();
                format!(
                    "{:.0} / {:.1}",
                    (b.switches.0 - a.switches.0) as f64 / secs,
                    (b.switches.1 - a.switches.1) as f64 / secs
                )
            },
        );
        row(
            "heartbeats per second seen by the platform",
            &format!("{}", n / 5),
            &|m| format!("{:.1}", beats_per_s(&m.window.0, &m.window.1)),
        );
        row(
            "WebSockets / identifies / resumes / 4009 closes seen by the platform",
            &format!("{n} / {n} / 0 / 0"),
            &|m| {
                let s = m.window.1.seen;
                let t = s.timeouts.map_or("n/a".into(), |t| t.to_string());
                format!("{} / {} / {} / {t}", s.connections, s.identifies, s.resumes)
            },
        );
        row(
            "platform process CPU over the window, % of one core",
            "",
            &|m| match m.server {
                "mock" => "(in the bench process)".into(),
                _ => format!(
                    "{:.1}%",
                    cpu_pct(&m.window.0, &m.window.1, |s| s.platform_cpu_ns)
                ),
            },
        );
        row(
            "whole machine busy over the window, % of all cores (anything else running?)",
            "",
            &|m| {
                let (a, b) = m.window;
                let busy = (b.machine.0 - a.machine.0) as f64;
                let total = (b.machine.1 - a.machine.1).max(1) as f64;
                format!("{:.1}%", busy / total * 100.0)
            },
        );
        println!();
    }
    for m in results.iter().filter(|m| !m.soak.is_empty()) {
        println!(
            "### RSS over time: {} `{}` adapters, {} server\n",
            m.n,
            m.kind.name(),
            m.server
        );
        println!("| minutes after the window began | RSS | CPU over the minute before | heartbeats/s | sockets | machine busy |");
        println!("|---|---|---|---|---|---|");
        for (i, s) in m.soak.iter().enumerate() {
            let (cpu, rate, busy) = match i {
                0 => ("".into(), "".into(), "".into()),
                _ => {
                    let p = &m.soak[i - 1];
                    let busy = (s.machine.0 - p.machine.0) as f64
                        / (s.machine.1 - p.machine.1).max(1) as f64;
                    (
                        format!("{:.2}%", cpu_pct(p, s, |s| s.cpu_ns)),
                        format!("{:.1}", beats_per_s(p, s)),
                        format!("{:.1}%", busy * 100.0),
                    )
                }
            };
            println!(
                "| {:.0} | {} | {cpu} | {rate} | {} | {busy} |",
                (s.at - m.soak[0].at).as_secs_f64() / 60.0,
                mib(s.rss_kib),
                socket_text(s.sockets)
            );
        }
        let (a, b) = (m.soak[0].rss_kib, m.soak[m.soak.len() - 1].rss_kib);
        let max = m.soak.iter().map(|s| s.rss_kib).max().unwrap();
        println!(
            "\nRSS first {} → last {} ({:+.2} MiB), highest {}.\n",
            mib(a),
            mib(b),
            (b as f64 - a as f64) / 1024.0,
            mib(max)
        );
    }
}
