//! One profile on several "hosts" (each its own network namespace, home, lock directory and
//! process), one active at a time, against a real three-member etcd cluster (Debian's
//! etcd-server) and the mock platform, which records every connection's frames and every post.
//! The platform and etcd are on two networks, so a host can lose one and keep the other, and
//! both speak TLS (a private CA), as across real hosts.
//!
//! What is asserted is what a platform would see: which connection identified, when each one
//! sent its first and last frame (no two ever overlap), and which messages were posted.

mod etcd_members;
mod reload;
mod replica;

use std::time::{Duration, Instant};

use std::sync::Arc;

use nix::sys::signal::{kill, Signal};

use crate::cluster_lan::{never_two_at_once, spool_ids, Rig};
use crate::cluster_rig::{config, with_cluster, Host};
use crate::harness::{scratch_dir, wait_for};
use crate::netns::Lan;

/// A standby is ready, says who is active, and connects nothing; once the active is killed
/// it takes over within the lease, and the two never act at once.
#[test]
fn a_standby_takes_over_when_the_active_is_killed() {
    let rig = Rig::new("clfail");
    let (a, b) = rig.active_then_standby("8s");
    let state = b.cluster_state().unwrap();
    assert!(
        state["active"]
            .as_str()
            .unwrap()
            .starts_with("host-a since "),
        "{state}"
    );
    let killed = Instant::now();
    kill(a.pid(), Signal::SIGKILL).unwrap();
    let took = rig.identified(2, Duration::from_secs(20));
    let after = took.duration_since(killed);
    // TTL 8 s, takeover-delay 0: within TTL + delay + 2 s.
    assert!(after < Duration::from_secs(10), "took over after {after:?}");
    wait_for(Duration::from_secs(10), "host-b active", || {
        (b.role().as_deref() == Some("active")).then_some(())
    });
    never_two_at_once(&rig.stats());
    drop(a);
}

/// A clean stop revokes the lease: the standby takes over at once, not when a 30 s lease
/// runs out, and resumes the session the stopped active left open for it.
#[test]
fn a_clean_stop_hands_over_at_once() {
    let rig = Rig::new("clhand");
    let (mut a, b) = rig.active_then_standby("30s");
    let stopped = Instant::now();
    kill(a.pid(), Signal::SIGTERM).unwrap();
    let took = rig.identified(2, Duration::from_secs(10));
    assert!(
        a.exited(Duration::from_secs(10)).success(),
        "{}",
        a.log_text()
    );
    let after = took.duration_since(stopped);
    assert!(
        after < Duration::from_secs(5),
        "handed over after {after:?}"
    );
    assert!(
        a.log_text().contains("released the cluster's keys"),
        "{}",
        a.log_text()
    );
    // Closed with a code that leaves the session resumable (1001 would end it), and resumed:
    // an event reaches host-b through the session host-a identified.
    {
        let _g = rig.rt.enter();
        rig.mock.emit(1);
    }
    wait_for(Duration::from_secs(10), "host-b to store an event", || {
        (!spool_ids(&b).is_empty()).then_some(())
    });
    let s = rig.stats();
    assert_eq!(
        (s.identifies, s.resume_times.len()),
        (1, 1),
        "host-b resumed the session"
    );
    never_two_at_once(&s);
    drop(b);
}

/// An active frozen past its lease (SIGSTOP, as a VM pause) is replaced; when it wakes, it
/// sends nothing, not even a message an agent handed its API while it was frozen, and ends
/// its run saying it was fenced. Its run loop is held for 3 s once it notices (a test
/// fault), so that its other tasks, which wake at the same moment, meet the fence on their
/// own: the outbox worker, the API and the Discord session's heartbeat.
#[test]
fn a_frozen_active_wakes_fenced_and_sends_nothing() {
    let rig = Rig::new("clfreeze");
    let (mut a, b) = rig.active_then_standby_with("8s", "stall:fence-noticed:3000");
    kill(a.pid(), Signal::SIGSTOP).unwrap();
    rig.identified(2, Duration::from_secs(20));
    wait_for(Duration::from_secs(10), "host-b active", || {
        (b.role().as_deref() == Some("active")).then_some(())
    });
    // Written into the frozen API's socket: read the moment the process wakes.
    let _pending = a.post_message("from the deposed active");
    kill(a.pid(), Signal::SIGCONT).unwrap();
    let status = a.exited(Duration::from_secs(10));
    let log = a.log_text();
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(log.contains("fenced"), "{log}");
    // The standby's own message goes out, so the mock is reachable and posting works.
    let _ours = b.post_message("from the new active");
    wait_for(Duration::from_secs(10), "the new active's post", || {
        let _g = rig.rt.enter();
        rig.mock
            .posts()
            .iter()
            .any(|p| p.content == "from the new active")
            .then_some(())
    });
    let _g = rig.rt.enter();
    let posts = rig.mock.posts();
    assert!(
        !posts.iter().any(|p| p.content == "from the deposed active"),
        "the deposed active posted: {posts:?}"
    );
    never_two_at_once(&rig.stats());
}

/// An active whose namespace is cut off from etcd (its link to etcd's network down: every
/// packet lost, no error to either side) while it still reaches the platform fences itself
/// before its lease can expire; the standby takes over after the lease, and the two never act
/// at once. Once the partition heals, the old active's next run, on the same host, stands by.
#[test]
fn an_active_cut_off_from_etcd_fences_itself_before_the_standby_takes_over() {
    let rig = Rig::new("clpart");
    let mut a = rig.host("host-a", "8s");
    rig.identified(1, Duration::from_secs(30));
    let b = rig.host("host-b", "8s");
    wait_for(Duration::from_secs(20), "host-b standing by", || {
        b.notifications()
            .join("\n")
            .contains("STATUS=standby (active: host-a since ")
            .then_some(())
    });
    let cut = Instant::now();
    a.net.cut_from_etcd();
    let status = a.exited(Duration::from_secs(15));
    let fenced = cut.elapsed();
    // The partition is etcd's alone: host-a's namespace still reaches the platform.
    let etcd: std::net::SocketAddr = rig.etcd.endpoints()[0]
        .trim_start_matches("https://")
        .parse()
        .unwrap();
    assert!(a.net.reaches(rig.front) && !a.net.reaches(etcd));
    let log = a.log_text();
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(
        log.contains("fenced: the etcd lease was not renewed"),
        "{log}"
    );
    let took = rig
        .identified(2, Duration::from_secs(20))
        .duration_since(cut);
    // The lease outlives the active's last renewal by at least 8 s; the active stopped with a
    // third of it left at least, so before the standby could take over.
    assert!(
        fenced < took,
        "fenced after {fenced:?}, taken over after {took:?}"
    );
    never_two_at_once(&rig.stats());
    let host_a = a.net.clone();
    drop(a);
    host_a.heal();
    let toml = config(&rig.base, &rig.etcd, "host-a", "8s");
    let a = Host::start(
        host_a,
        Some(&rig.certs.ca),
        rig.dir.path(),
        "host-a",
        &toml,
        "",
    );
    wait_for(Duration::from_secs(30), "host-a standing by", || {
        a.notifications()
            .join("\n")
            .contains("STATUS=standby (active: host-b since ")
            .then_some(())
    });
    assert_eq!(b.role().as_deref(), Some("active"));
    never_two_at_once(&rig.stats());
}

/// Losing the etcd leader is no failover; losing quorum fences the active within its lease,
/// and a new run waits as a standby (no exit, no restart loop) until quorum returns, then
/// takes over again.
#[test]
fn etcd_faults_fence_only_when_quorum_is_lost() {
    let mut rig = Rig::new("clquorum");
    let mut a = rig.host("host-a", "10s");
    rig.identified(1, Duration::from_secs(30));
    let leader = rig.etcd.leader();
    rig.etcd.kill(leader);
    // A lease's worth: the active renews through the new leader and stays.
    let calm = Instant::now() + Duration::from_secs(10);
    while Instant::now() < calm {
        assert!(a.child.try_wait().unwrap().is_none(), "{}", a.log_text());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(rig.stats().identifies, 1, "the active reconnected");
    assert_eq!(a.role().as_deref(), Some("active"));
    // Down to one member of three: no quorum.
    let second = (0..3).find(|&i| i != leader).unwrap();
    let lost = Instant::now();
    rig.etcd.kill(second);
    let status = a.exited(Duration::from_secs(15));
    let fenced_after = lost.elapsed();
    let log = a.log_text();
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(
        log.contains("fenced: the etcd lease was not renewed"),
        "{log}"
    );
    // Within the TTL.
    assert!(
        fenced_after < Duration::from_secs(10),
        "fenced after {fenced_after:?}"
    );
    let spans = rig.stats().spans;
    let closed = spans[0].closed.expect("the fenced run's connection closed");
    assert!(closed.duration_since(lost) < Duration::from_secs(10));
    // What its manager does next: run it again. It stands by, ready, and does not exit.
    drop(a);
    let b = rig.host("host-a", "10s");
    wait_for(Duration::from_secs(20), "a standby with no quorum", || {
        let said = b.notifications().join("\n");
        (said.contains("READY=1") && said.contains("STATUS=standby (campaigning: etcd at "))
            .then_some(())
    });
    // doctor says what the manager cannot see: no active this host can find.
    let found = wait_for(Duration::from_secs(20), "doctor's HSV025", || {
        b.doctor().into_iter().find(|f| f["id"] == "HSV025")
    });
    assert_eq!(found["severity"], "error", "{found}");
    assert!(
        found["message"].as_str().unwrap().contains("node host-a"),
        "{found}"
    );
    rig.etcd.restart(second);
    rig.etcd.restart(leader);
    rig.identified(2, Duration::from_secs(30));
    let mut b = b;
    assert!(b.child.try_wait().unwrap().is_none(), "{}", b.log_text());
    let s = rig.stats();
    assert_eq!(
        (s.identifies, s.resume_times.len()),
        (1, 1),
        "the new run resumed"
    );
    wait_for(Duration::from_secs(10), "doctor without HSV025", || {
        (!b.doctor().iter().any(|f| f["id"] == "HSV025")).then_some(())
    });
    never_two_at_once(&rig.stats());
}

/// A cluster the gateway cannot be configured for is refused before anything connects,
/// naming the file and the key; no restart would help, so it says so with its exit status.
#[test]
fn a_cluster_ca_that_cannot_be_read_is_refused_naming_it() {
    let dir = scratch_dir("clbadca");
    let toml = "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"CL_TOKEN\"\n\
                api-base = \"http://127.0.0.1:9\"\n\n[cluster]\n\
                endpoints = [\"https://127.0.0.1:9\"]\nca = \"/nonexistent/etcd-ca.pem\"\n";
    let lan = Lan::new();
    let net = Arc::new(lan.host());
    let mut host = Host::start(net, None, dir.path(), "host-x", toml, "");
    let status = host.exited(Duration::from_secs(10));
    let log = host.log_text();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(
        log.contains("[cluster] ca = /nonexistent/etcd-ca.pem: No such file or directory"),
        "{log}"
    );
}

/// Two machines given one node name: the standby says so in `STATUS=` and doctor warns
/// (HSV026); a second process of the active's own machine under that name does not.
#[test]
fn two_machines_with_one_node_name_are_named_and_one_machine_is_not() {
    let rig = Rig::new("cltwin");
    let toml = config(&rig.base, &rig.etcd, "twin", "8s");
    let root = rig.dir.path();
    let _a = rig.start(&root.join("one"), "twin", &toml, "machine-id:one");
    rig.identified(1, Duration::from_secs(30));
    let b = rig.start(&root.join("two"), "twin", &toml, "machine-id:two");
    wait_for(Duration::from_secs(20), "the clash said", || {
        b.notifications()
            .join("\n")
            .contains("STATUS=standby (active: twin since ")
            .then(|| b.cluster_state())
            .flatten()
            .filter(|c| c["name_clash"] == true)
    });
    let said = b.cluster_state().unwrap()["standing"].clone();
    assert!(
        said.as_str()
            .unwrap()
            .ends_with("; another machine has this node's name)"),
        "{said}"
    );
    let found = wait_for(Duration::from_secs(20), "doctor's HSV026", || {
        b.doctor().into_iter().find(|f| f["id"] == "HSV026")
    });
    assert_eq!(found["severity"], "warn", "{found}");
    let c = rig.start(&root.join("three"), "twin", &toml, "machine-id:one");
    wait_for(
        Duration::from_secs(20),
        "the same machine's standby",
        || {
            c.cluster_state()
                .filter(|s| s["role"] == "standby" && s["active"].is_string())
        },
    );
    let state = c.cluster_state().unwrap();
    assert!(state.get("name_clash").is_none(), "{state}");
    assert!(!c.doctor().iter().any(|f| f["id"] == "HSV026"));
}

/// A frozen Telegram active: the new active's first poll ends the frozen one's held poll with
/// 409, as Telegram does. When it wakes, with its run loop held 6 s, it polls no more (a poll
/// would take the updates and confirm the last batch): the mock sees no conflict after that.
#[test]
fn a_frozen_telegram_active_wakes_fenced_and_polls_no_more() {
    let rig = Rig::new("cltgfreeze");
    let toml = |node: &str| {
        let telegram = format!(
            "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"CL_TOKEN\"\n\
             api-base = \"{}\"\npoll-timeout = \"30s\"\n",
            rig.base
        );
        with_cluster(&telegram, &rig.etcd, node, "8s")
    };
    let telegram = || {
        let _g = rig.rt.enter();
        rig.mock.telegram_stats()
    };
    let dir = rig.dir.path();
    let mut a = rig.start(dir, "host-a", &toml("host-a"), "stall:fence-noticed:6000");
    wait_for(Duration::from_secs(30), "host-a polling", || {
        (a.role().as_deref() == Some("active") && telegram().polls >= 2).then_some(())
    });
    let b = rig.start(dir, "host-b", &toml("host-b"), "");
    wait_for(Duration::from_secs(20), "host-b standing by", || {
        (b.role().as_deref() == Some("standby")).then_some(())
    });
    assert_eq!(telegram().conflicts, 0);
    kill(a.pid(), Signal::SIGSTOP).unwrap();
    // The new active's poll ends the frozen one's.
    let conflicts = wait_for(Duration::from_secs(20), "host-b's first poll", || {
        let c = telegram().conflicts;
        (b.role().as_deref() == Some("active") && c >= 1).then_some(c)
    });
    kill(a.pid(), Signal::SIGCONT).unwrap();
    let status = a.exited(Duration::from_secs(15));
    let log = a.log_text();
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(log.contains("fenced"), "{log}");
    assert_eq!(
        telegram().conflicts,
        conflicts,
        "the deposed active polled: {log}"
    );
    assert_eq!(b.role().as_deref(), Some("active"));
}

/// Every member keeps a record in etcd with its wall-clock time, and watches the others': a
/// host whose clock is 5 s ahead (a test fault stands in for its failed time service) is named
/// by doctor on the other host (HSV027), and the state file lists it as a peer.
#[test]
fn a_member_whose_clock_is_off_is_named_by_doctor_on_the_others() {
    let rig = Rig::new("clskew");
    let (_a, b) = rig.active_then_standby_with("8s", "clock-skew:5000");
    let found = wait_for(Duration::from_secs(20), "doctor's HSV027 on host-b", || {
        b.doctor().into_iter().find(|f| f["id"] == "HSV027")
    });
    assert_eq!(found["severity"], "warn", "{found}");
    let message = found["message"].as_str().unwrap();
    assert!(
        message.contains("node host-a is 5.0s ahead of this host's (host-b)")
            || message.contains("node host-a is 4.9s ahead of this host's (host-b)"),
        "{found}"
    );
    let peers = b.cluster_state().unwrap()["peers"].clone();
    assert_eq!(peers[0]["node"], "host-a", "{peers}");
}

/// A profile's gateway that ran in a cluster leaves a note on its host; once someone removes
/// `[cluster]` from that host's gateway.toml, doctor warns that its gateway would run the bot
/// beside the cluster's active (HSV028), naming the endpoints and the note.
#[test]
fn a_host_whose_config_left_the_cluster_is_warned_about() {
    let rig = Rig::new("clleft");
    let mut a = rig.host("host-a", "8s");
    wait_for(Duration::from_secs(30), "host-a active", || {
        (a.role().as_deref() == Some("active")).then_some(())
    });
    assert!(!a.doctor().iter().any(|f| f["id"] == "HSV028"));
    kill(a.pid(), Signal::SIGTERM).unwrap();
    assert!(a.exited(Duration::from_secs(10)).success());
    let toml = a.home.join("gateway.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let (adapters, _) = text.split_once("[cluster]").unwrap();
    std::fs::write(&toml, adapters).unwrap();
    let found = a
        .doctor()
        .into_iter()
        .find(|f| f["id"] == "HSV028")
        .expect("doctor's HSV028");
    assert_eq!(found["severity"], "warn", "{found}");
    let message = found["message"].as_str().unwrap();
    assert!(
        message.contains(&rig.etcd.endpoints()[0]) && message.contains("as node host-a"),
        "{found}"
    );
    assert!(
        found["fix"]
            .as_str()
            .unwrap()
            .contains("state/cluster.json"),
        "{found}"
    );
}
