//! Failover and handover across "hosts" (tests/it/cluster_rig.rs): a real three-member etcd
//! cluster on loopback, two gateway processes for one profile with the default lease (10 s)
//! and no takeover delay, and a Discord platform, the built-in mock and then the
//! independent server. A failover is timed from the active's SIGKILL to the platform's next
//! Identify or Resume, a handover from its SIGTERM to the same.

use std::path::Path;
use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use nix::sys::signal::{kill, Signal};

use crate::cluster_rig::{config, Etcd, Host};
use crate::harness::wait_for;
use crate::independent::Independent;
use crate::scratch;

const FAILOVERS: usize = 20;
const HANDOVERS: usize = 10;
const TTL: &str = "10s";

/// How the bench reads the platform's sessions so far.
enum Platform<'a> {
    Mock(&'a MockPlatform, &'a tokio::runtime::Runtime),
    Independent(&'a Independent, &'a tokio::runtime::Runtime),
}

impl Platform<'_> {
    fn sessions(&self) -> u64 {
        match self {
            Platform::Mock(m, rt) => {
                let _g = rt.enter();
                let s = m.stats();
                s.identifies + s.resumes
            }
            Platform::Independent(i, rt) => {
                let s = rt.block_on(i.stats());
                s["identifies"].as_u64().unwrap_or(0) + s["resumes"].as_u64().unwrap_or(0)
            }
        }
    }

    fn base(&self) -> String {
        match self {
            Platform::Mock(m, _) => m.http_base(),
            Platform::Independent(i, _) => i.base(),
        }
    }

    /// Wait for the session after `before`; when it was seen.
    fn next_session(&self, before: u64) -> Instant {
        wait_for(Duration::from_secs(60), "the next session", || {
            (self.sessions() > before).then(Instant::now)
        })
    }
}

fn standing_by(host: &Host) {
    wait_for(Duration::from_secs(30), "a standby", || {
        let said = host.notifications().join("\n");
        said.contains("STATUS=standby (active: ").then_some(())
    });
}

/// `FAILOVERS` SIGKILLs then `HANDOVERS` SIGTERMs of whichever host is active, the killed one
/// started again as the next standby each time; milliseconds, sorted.
fn trials(platform: &Platform, etcd: &Etcd, dir: &Path) -> (Vec<f64>, Vec<f64>) {
    let toml = |node: &str| config(&platform.base(), &etcd.endpoints(), node, TTL);
    let nodes = ["host-a", "host-b"];
    let mut active = Host::start(dir, nodes[0], &toml(nodes[0]), "");
    platform.next_session(0);
    let mut standby = Host::start(dir, nodes[1], &toml(nodes[1]), "");
    standing_by(&standby);
    let (mut failover, mut handover) = (vec![], vec![]);
    for trial in 0..FAILOVERS + HANDOVERS {
        let before = platform.sessions();
        let signal = if trial < FAILOVERS {
            Signal::SIGKILL
        } else {
            Signal::SIGTERM
        };
        let t = Instant::now();
        kill(active.pid(), signal).unwrap();
        let took = platform.next_session(before).duration_since(t);
        let ms = took.as_secs_f64() * 1e3;
        if trial < FAILOVERS {
            failover.push(ms);
        } else {
            handover.push(ms);
        }
        let node = active.node.clone();
        let _ = active.exited(Duration::from_secs(30));
        drop(active);
        active = standby;
        standby = Host::start(dir, &node, &toml(&node), "");
        standing_by(&standby);
    }
    failover.sort_by(f64::total_cmp);
    handover.sort_by(f64::total_cmp);
    (failover, handover)
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn cluster_figures(rt: &tokio::runtime::Runtime) {
    let dir = scratch("cluster");
    let etcd = Etcd::start(&dir.join("etcd"));
    let mock = rt
        .block_on(MockPlatform::start(MockConfig::default()))
        .unwrap();
    let python = Independent::python();
    let independent = Independent::start(
        &python,
        Duration::from_millis(41_250),
        &dir.join("independent.log"),
    );
    let mut rows = vec![];
    for (name, platform, sub) in [
        ("built-in mock", Platform::Mock(&mock, rt), "mock"),
        (
            "independent server",
            Platform::Independent(&independent, rt),
            "independent",
        ),
    ] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        let (failover, handover) = trials(&platform, &etcd, &d);
        rows.push(format!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            percentile(&failover, 50.0),
            percentile(&failover, 99.0),
            failover[failover.len() - 1],
            percentile(&handover, 50.0),
            percentile(&handover, 99.0),
            handover[handover.len() - 1],
        ));
    }
    println!(
        "### Failover and handover across hosts (3-member etcd on loopback, lease-ttl 10 s, \
         takeover-delay 0 s; {FAILOVERS} SIGKILLs and {HANDOVERS} SIGTERMs of the active)\n"
    );
    println!(
        "| Discord platform | failover p50 ms | p99 ms | max ms | handover p50 ms | p99 ms | max ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    println!();
    drop(independent);
    let _ = std::fs::remove_dir_all(&dir);
}
