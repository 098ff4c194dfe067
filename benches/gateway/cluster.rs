//! Failover and handover across "hosts" (tests/it/cluster_rig.rs, each in a network namespace
//! of its own, tests/it/netns.rs): a real three-member etcd cluster on its network, two
//! gateway processes for one profile with the default lease (10 s)
//! and no takeover delay, and a Discord platform, the built-in mock and then the
//! independent server. A failover is timed from the active's SIGKILL to the platform's next
//! Identify or Resume, a handover from its SIGTERM to the same.
//!
//! Traffic flows both ways throughout: the platform dispatches an event every 100 ms in its
//! session, and an agent submits a message every 200 ms through whichever host takes it (a
//! standby's 503, or no answer, sends it to the other host under the same key). At the end
//! the two hosts' spools are read together: every seq of the one session up to the highest
//! stored must be an event stored (once) or READY's or a RESUMED's, and every accepted
//! message must be among the platform's posts once.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use nix::sys::signal::{kill, Signal};

use crate::cluster_rig::{config, submit, Etcd, Host, PROFILE};
use crate::harness::wait_for;
use crate::independent::Independent;
use crate::netns::{Lan, Netns};
use crate::tls::{Certs, TlsFront};
use crate::{percentile, scratch};

const FAILOVERS: usize = 20;
const HANDOVERS: usize = 10;
const TTL: &str = "10s";
const DISPATCH_EVERY: Duration = Duration::from_millis(100);
const SUBMIT_EVERY: Duration = Duration::from_millis(200);
const NODES: [&str; 2] = ["host-a", "host-b"];
/// Between a takeover and the next kill.
const STEADY: Duration = Duration::from_secs(3);

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

    /// The sessions begun: (identified, resumed).
    fn begun(&self) -> (u64, u64) {
        match self {
            Platform::Mock(m, rt) => {
                let _g = rt.enter();
                let s = m.stats();
                (s.identifies, s.resumes)
            }
            Platform::Independent(i, rt) => {
                let s = rt.block_on(i.stats());
                let n = |k: &str| s[k].as_u64().unwrap_or(0);
                (n("identifies"), n("resumes"))
            }
        }
    }

    /// How many times the platform posted each text.
    fn posted(&self) -> HashMap<String, usize> {
        let texts: Vec<String> = match self {
            Platform::Mock(m, rt) => {
                let _g = rt.enter();
                m.posts().into_iter().map(|p| p.content).collect()
            }
            Platform::Independent(i, rt) => rt.block_on(i.posts())["posts"]
                .as_array()
                .map(|posts| {
                    posts
                        .iter()
                        .filter_map(|p| p["content"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let mut counts = HashMap::new();
        for t in texts {
            *counts.entry(t).or_default() += 1;
        }
        counts
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

/// What the trials measured.
struct Trials {
    /// Milliseconds, sorted.
    failover: Vec<f64>,
    handover: Vec<f64>,
    /// The session's highest seq stored, and the numbers below it that are neither a stored
    /// event nor READY's or a RESUMED's: events lost.
    highest: u64,
    lost: i64,
    /// Sessions begun: identified, resumed.
    identifies: u64,
    resumes: u64,
    /// Distinct events in the two spools, and how many were in both.
    stored: usize,
    on_both: usize,
    /// Messages the agent had accepted, and how many were posted once, never, twice or more.
    accepted: usize,
    posted_once: usize,
    never: usize,
    more: usize,
}

/// The agent: a message every `SUBMIT_EVERY` until `stop`, each through whichever host takes
/// it, under one key until one does. The texts accepted.
fn agent(dir: &Path, stop: &AtomicBool) -> Vec<String> {
    let sockets: Vec<PathBuf> = NODES
        .iter()
        .map(|n| {
            dir.join(n)
                .join("hermes/profiles")
                .join(PROFILE)
                .join("state/api/agent.sock")
        })
        .collect();
    let (mut accepted, mut at) = (vec![], 0);
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let text = format!("churn {n}");
        let give_up = Instant::now() + Duration::from_secs(60);
        while Instant::now() < give_up {
            let r = submit(&sockets[at], &text);
            if let Some((200 | 202, _)) = r {
                accepted.push(text);
                break;
            }
            at = 1 - at;
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(SUBMIT_EVERY);
    }
    accepted
}

/// Each event in a host's spool: its id and its seq.
fn spooled(dir: &Path, node: &str) -> Vec<(String, u64)> {
    let inbox = dir
        .join(node)
        .join("hermes/profiles")
        .join(PROFILE)
        .join("inbox");
    hermes_svc::gateway::spool::read(&inbox, None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let seq = serde_json::to_value(&e)
                .ok()
                .and_then(|v| v["seq"].as_u64());
            (e.id, seq.unwrap_or(0))
        })
        .collect()
}

/// Where the hosts run and what they reach: their networks, the CA they trust, the platform
/// (its TLS front, at `base`) and etcd.
struct Site<'a> {
    lan: &'a Lan,
    ca: &'a Path,
    base: String,
    etcd: &'a Etcd,
}

/// `FAILOVERS` SIGKILLs then `HANDOVERS` SIGTERMs of whichever host is active, the killed one
/// started again as the next standby each time, with traffic both ways throughout.
fn trials(platform: &Platform, site: &Site, dir: &Path) -> Trials {
    let stop = AtomicBool::new(false);
    let (failover, handover, hosts, accepted) = std::thread::scope(|s| {
        let agent = s.spawn(|| agent(dir, &stop));
        let (failover, handover, hosts) = kill_in_turn(platform, site, dir);
        stop.store(true, Ordering::Relaxed);
        (failover, handover, hosts, agent.join().unwrap())
    });
    // Everything accepted is posted by the last active, eventually.
    let posted = wait_for(
        Duration::from_secs(120),
        "every accepted message posted",
        || {
            let posted = platform.posted();
            accepted
                .iter()
                .all(|t| posted.contains_key(t))
                .then_some(posted)
        },
    );
    // The platform goes on dispatching, so what was lost is counted in the one session's
    // seq: every number up to the highest stored is an event stored on one host or the
    // other, READY's, or a RESUMED's (each takes one, on both platforms).
    let (on_a, on_b) = (spooled(dir, NODES[0]), spooled(dir, NODES[1]));
    let (identifies, resumes) = platform.begun();
    let a: HashSet<&String> = on_a.iter().map(|(id, _)| id).collect();
    let b: HashSet<&String> = on_b.iter().map(|(id, _)| id).collect();
    let seqs: HashSet<u64> = on_a.iter().chain(&on_b).map(|(_, seq)| *seq).collect();
    let highest = seqs.iter().copied().max().unwrap_or(0);
    let numbered = highest as i64 - seqs.len() as i64 - 1 - resumes as i64;
    let count = |want: usize| {
        accepted
            .iter()
            .filter(|t| posted.get(*t).copied().unwrap_or(0) == want)
            .count()
    };
    drop(hosts);
    Trials {
        failover,
        handover,
        highest,
        lost: numbered,
        identifies,
        resumes,
        stored: a.union(&b).count(),
        on_both: a.intersection(&b).count(),
        accepted: accepted.len(),
        posted_once: count(1),
        never: count(0),
        more: accepted.len() - count(1) - count(0),
    }
}

/// The kills, in turn: failover and handover milliseconds, sorted, and the two hosts, still
/// running.
fn kill_in_turn(platform: &Platform, site: &Site, dir: &Path) -> (Vec<f64>, Vec<f64>, [Host; 2]) {
    let start = |net: Arc<Netns>, node: &str| {
        let toml = config(&site.base, site.etcd, node, TTL);
        Host::start(net, Some(site.ca), dir, node, &toml, "")
    };
    let nodes = NODES;
    let mut active = start(Arc::new(site.lan.host()), nodes[0]);
    platform.next_session(0);
    let mut standby = start(Arc::new(site.lan.host()), nodes[1]);
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
        let (node, net) = (active.node.clone(), active.net.clone());
        let _ = active.exited(Duration::from_secs(30));
        drop(active);
        active = standby;
        // The node's next run, on the same host.
        standby = start(net, &node);
        standing_by(&standby);
        // Traffic through the new active before the next kill.
        std::thread::sleep(STEADY);
    }
    failover.sort_by(f64::total_cmp);
    handover.sort_by(f64::total_cmp);
    (failover, handover, [active, standby])
}

pub(crate) fn cluster_figures(rt: &tokio::runtime::Runtime) {
    let dir = scratch("cluster");
    let lan = Lan::new();
    let certs = Certs::issue(
        &dir.join("certs"),
        &format!("IP:{},IP:{}", lan.platform_ip(), lan.etcd_ip()),
    );
    // Each platform behind a TLS front on the platform's network, as across real hosts.
    let front = || rt.block_on(TlsFront::bind(&certs, (lan.platform_ip(), 0).into()));
    let _g = rt.enter();
    let mock = rt
        .block_on(MockPlatform::start(MockConfig {
            dispatch_every: Some(DISPATCH_EVERY),
            ..MockConfig::default()
        }))
        .unwrap();
    let mock_front = front();
    let mock_at = mock_front.addr();
    mock_front.forward_to(mock.addr());
    mock.set_advertised_ws_url(format!("wss://{mock_at}/ws"));
    let python = Independent::python();
    let independent_front = front();
    let independent_at = independent_front.addr();
    let independent = Independent::start_dispatching(
        &python,
        Duration::from_millis(41_250),
        DISPATCH_EVERY,
        &format!("wss://{independent_at}"),
        &dir.join("independent.log"),
    );
    independent_front.forward_to(independent.addr());
    let (mut timing, mut traffic) = (vec![], vec![]);
    for (name, platform, at, sub) in [
        ("built-in mock", Platform::Mock(&mock, rt), mock_at, "mock"),
        (
            "independent server",
            Platform::Independent(&independent, rt),
            independent_at,
            "independent",
        ),
    ] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        // Each platform its own etcd: what one run left there is not the next run's.
        let etcd = Etcd::start(&d.join("etcd"), lan.etcd_ip(), &certs);
        let site = Site {
            lan: &lan,
            ca: &certs.ca,
            base: format!("https://{at}"),
            etcd: &etcd,
        };
        let t = trials(&platform, &site, &d);
        timing.push(format!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            percentile(&t.failover, 50.0),
            percentile(&t.failover, 99.0),
            t.failover[t.failover.len() - 1],
            percentile(&t.handover, 50.0),
            percentile(&t.handover, 99.0),
            t.handover[t.handover.len() - 1],
        ));
        traffic.push(format!(
            "| {name} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |",
            t.highest,
            t.stored,
            t.lost,
            t.on_both,
            t.identifies,
            t.resumes,
            t.accepted,
            t.posted_once,
            t.never,
            t.more,
        ));
    }
    println!(
        "### Failover and handover across hosts (each in a network namespace, TLS to a \
         3-member etcd and to the platform, lease-ttl 10 s, \
         takeover-delay 0 s; {FAILOVERS} SIGKILLs and {HANDOVERS} SIGTERMs of the active)\n"
    );
    println!(
        "| Discord platform | failover p50 ms | p99 ms | max ms | handover p50 ms | p99 ms | max ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in timing {
        println!("{r}");
    }
    println!();
    println!(
        "Traffic throughout: an event dispatched every {} ms, a message submitted every {} ms \
         through whichever host takes it.\n",
        DISPATCH_EVERY.as_millis(),
        SUBMIT_EVERY.as_millis()
    );
    println!(
        "| Discord platform | highest seq stored | events stored | lost (seq gaps) | on both hosts | sessions identified / resumed | messages accepted | posted once | never | twice or more |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in traffic {
        println!("{r}");
    }
    println!();
    drop(independent);
    let _ = std::fs::remove_dir_all(&dir);
}
