//! A reload of `[cluster]` (issue 49), on the active and on a standby, against the real
//! three-member etcd and the mock platform. What is asserted is what the platform, etcd's
//! other member and the state files show: the active goes on acting through it (its session
//! is never identified again), the keys follow it to the new lease and node name (the
//! standby reads them there, and takes over when that lease, not the old one, runs out), and
//! a section the run cannot take is refused with the running one kept.

use std::fs;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};

use crate::cluster_lan::{never_two_at_once, Rig};
use crate::cluster_rig::Host;
use crate::harness::wait_for;

/// Rewrite `host`'s `gateway.toml` by `edit`, reload it, and wait for the reload's record:
/// its outcome and reason.
fn reload(host: &Host, generation: u64, edit: impl Fn(&str) -> String) -> (String, String) {
    let path = host.home.join("gateway.toml");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, edit(&text)).unwrap();
    kill(host.pid(), Signal::SIGHUP).unwrap();
    wait_for(Duration::from_secs(30), "the reload's record", || {
        let text = fs::read_to_string(host.home.join("state/gateway.json")).ok()?;
        let state: serde_json::Value = serde_json::from_str(&text).ok()?;
        let record = &state["reload"];
        (record["generation"] == generation).then(|| {
            let s = |k: &str| record[k].as_str().unwrap_or_default().to_owned();
            (s("outcome"), s("reason"))
        })
    })
}

/// `text` with its `[cluster] endpoints` line listing `endpoints`.
fn with_endpoints(text: &str, endpoints: &[String]) -> String {
    let line = text.lines().find(|l| l.starts_with("endpoints")).unwrap();
    let listed: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    text.replace(line, &format!("endpoints = [{}]", listed.join(", ")))
}

#[test]
fn a_changed_cluster_section_moves_the_term_and_the_session_goes_on() {
    let rig = Rig::new("clrld");
    let (mut a, b) = rig.active_then_standby("8s");

    // Endpoints the run cannot reach: refused, and the running section kept.
    let original = fs::read_to_string(a.home.join("gateway.toml")).unwrap();
    let nowhere = ["https://127.0.0.1:9".to_owned()];
    let (outcome, reason) = reload(&a, 1, |t| with_endpoints(t, &nowhere));
    assert_eq!(outcome, "refused", "{reason}");
    assert!(
        reason.starts_with("[cluster] not applied: the new endpoints did not answer"),
        "{reason}"
    );
    assert_eq!(a.role().as_deref(), Some("active"), "{}", a.log_text());

    // The active: other endpoints (the same cluster, in another order), a longer lease and
    // another node name, all at once.
    let endpoints = rig.etcd.endpoints();
    let reversed: Vec<String> = endpoints.iter().rev().cloned().collect();
    let moved = |_: &str| {
        with_endpoints(&original, &reversed)
            .replace("node = \"host-a\"", "node = \"host-a2\"")
            .replace("lease-ttl = \"8s\"", "lease-ttl = \"12s\"")
    };
    let (outcome, reason) = reload(&a, 2, moved);
    assert_eq!(outcome, "applied", "{reason}\n{}", a.log_text());
    assert!(reason.contains("etcd asked at"), "{reason}");
    assert!(
        reason.contains("the term moved to a 12s lease as node host-a2"),
        "{reason}"
    );
    let state = a.cluster_state().unwrap();
    assert_eq!(
        (state["role"].as_str(), state["node"].as_str()),
        (Some("active"), Some("host-a2")),
        "{state}"
    );
    assert_eq!(state["lease_ttl_ms"], 12_000, "{state}");
    // The standby reads the keys under the new name: they moved, and were not freed.
    wait_for(Duration::from_secs(30), "host-b to see host-a2", || {
        let state = b.cluster_state()?;
        state["active"]
            .as_str()?
            .starts_with("host-a2 since ")
            .then_some(())
    });
    assert_eq!(b.role().as_deref(), Some("standby"));

    // The standby: another name and takeover delay; it campaigns again with them.
    let (outcome, reason) = reload(&b, 1, |t| {
        t.replace("node = \"host-b\"", "node = \"host-b2\"")
            .replace("takeover-delay = \"0s\"", "takeover-delay = \"1s\"")
    });
    assert_eq!(outcome, "applied", "{reason}\n{}", b.log_text());
    assert!(reason.contains("the campaign starts again"), "{reason}");
    wait_for(Duration::from_secs(30), "host-b2 standing by", || {
        let state = b.cluster_state()?;
        (state["node"] == "host-b2" && state["role"] == "standby").then_some(())
    });

    // Nothing reached the platform: one session all along.
    let s = rig.stats();
    assert_eq!((s.identifies, s.resumes), (1, 0), "the session went on");

    // The keys live on the new lease alone: killed, the active's keys go when it runs out,
    // and the standby takes over under its new name.
    kill(a.pid(), Signal::SIGKILL).unwrap();
    let _ = a.exited(Duration::from_secs(10));
    rig.identified(2, Duration::from_secs(40));
    wait_for(Duration::from_secs(10), "host-b2 active", || {
        let state = b.cluster_state()?;
        (state["role"] == "active" && state["node"] == "host-b2").then_some(())
    });
    never_two_at_once(&rig.stats());
}
