//! One etcd member down (docs/benchmarks.md, "One etcd member down"):
//! `cargo bench --bench gateway -- etcd-member`.
//!
//! An active, traffic throughout (the platform sends an event every 50 ms), and one etcd
//! member killed at a time and left down for a lease, five times each for an ordinary member
//! and for the leader, at the least lease (8 s) and the default (10 s). Each event's delay is
//! from its dispatch to its line in the active's spool, which it reaches only once etcd holds
//! the replica's write: the longest is the longest the bot was deaf. An election is timed
//! from the kill to a live member's status naming itself leader. The lease's longest
//! unrenewed stretch is read from the active's log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_svc::mock_platform::MockConfig;

use crate::cluster_lan::{spool_ids, Rig};
use crate::cluster_rig::Host;
use crate::harness::wait_for;

const TRIALS: usize = 5;

struct Trial {
    leader: bool,
    /// From the kill to a new leader; none for an ordinary member.
    election: Option<Duration>,
    /// The longest delay of an event dispatched from a second before the kill to a second
    /// before the member came back.
    deaf: Duration,
}

/// Kill `member` with traffic flowing, leave it down for `ttl`, and bring it back.
fn trial(rig: &mut Rig, a: &Host, ttl: Duration, leader: bool) -> Trial {
    let member = if leader {
        rig.etcd.leader()
    } else {
        rig.etcd.follower()
    };
    let sent: Mutex<Vec<(String, Instant)>> = Mutex::default();
    let seen: Mutex<HashMap<String, Instant>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let (mut killed, mut election) = (Instant::now(), None);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let id = {
                    let _g = rig.rt.enter();
                    rig.mock.emit(1);
                    rig.mock.generated_event_ids().pop().unwrap()
                };
                sent.lock().unwrap().push((id, Instant::now()));
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let ids = spool_ids(a);
                let now = Instant::now();
                let mut seen = seen.lock().unwrap();
                for id in ids {
                    seen.entry(id).or_insert(now);
                }
                drop(seen);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        std::thread::sleep(Duration::from_secs(1));
        killed = Instant::now();
        rig.etcd.kill(member);
        if leader {
            rig.etcd.leader();
            election = Some(killed.elapsed());
        }
        std::thread::sleep((killed + ttl).saturating_duration_since(Instant::now()));
        // Until every event sent is stored: the last ones' delays count too.
        let last = sent.lock().unwrap().len();
        wait_for(Duration::from_secs(30), "every event stored", || {
            let sent = sent.lock().unwrap();
            let seen = seen.lock().unwrap();
            sent[..last]
                .iter()
                .all(|(id, _)| seen.contains_key(id))
                .then_some(())
        });
        stop.store(true, Ordering::Relaxed);
    });
    let seen = seen.into_inner().unwrap();
    let window = (killed - Duration::from_secs(1))..(killed + ttl - Duration::from_secs(1));
    let deaf = sent
        .into_inner()
        .unwrap()
        .iter()
        .filter(|(_, at)| window.contains(at))
        .filter_map(|(id, at)| Some(seen.get(id)?.duration_since(*at)))
        .max()
        .unwrap_or_default();
    rig.etcd.restart(member);
    rig.etcd.wait_healthy();
    Trial {
        leader,
        election,
        deaf,
    }
}

/// The longest `unrenewed` of the log's "renewed the etcd lease again" lines.
fn longest_unrenewed(log: &str) -> Duration {
    log.lines()
        .filter(|l| l.contains("renewed the etcd lease again"))
        .filter_map(|l| {
            let (_, v) = l.split_once("unrenewed=\"")?;
            humantime::parse_duration(v.split('"').next()?).ok()
        })
        .max()
        .unwrap_or_default()
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// Print the figures, a block per lease.
pub(crate) fn etcd_member_figures() {
    for ttl_text in ["8s", "10s"] {
        let ttl = humantime::parse_duration(ttl_text).unwrap();
        let mock = MockConfig {
            heartbeat_interval: Duration::from_secs(10),
            ..MockConfig::default()
        };
        let mut rig = Rig::with_mock(&format!("clmeasure{}", ttl.as_secs()), mock);
        let a = rig.host("host-a", ttl_text);
        rig.identified(1, Duration::from_secs(30));
        wait_for(Duration::from_secs(10), "host-a active", || {
            (a.role().as_deref() == Some("active")).then_some(())
        });
        let mut trials = vec![];
        for leader in [false, true] {
            for _ in 0..TRIALS {
                trials.push(trial(&mut rig, &a, ttl, leader));
            }
        }
        let s = rig.stats();
        let log = a.log_text();
        println!(
            "lease-ttl {ttl_text}: sessions identified {} resumed {}, fenced {}, longest unrenewed {} ms",
            s.identifies,
            s.resumes,
            log.contains("fenced"),
            ms(longest_unrenewed(&log)),
        );
        for t in &trials {
            let election = t.election.map_or("-".into(), |e| ms(e).to_string());
            let beyond = t
                .election
                .map_or(ms(t.deaf) as i128, |e| ms(t.deaf) as i128 - ms(e) as i128);
            println!(
                "  {:8} election {election:>5} ms, longest event delay {:>5} ms, beyond the election {beyond:>5} ms",
                if t.leader { "leader" } else { "ordinary" },
                ms(t.deaf),
            );
        }
    }
}
