//! A real gateway process with a DingTalk adapter (Stream mode) against the mock DingTalk in
//! this process (the outbox rig's, with a `dt` adapter added): stored before acked across a
//! kill, a half-open connection noticed within the ping interval plus its deadline, a planned
//! disconnect (the next connection opened before the old one closes, nothing lost or stored
//! twice), revoked credentials ending the adapter with the fix, and a reply posted once
//! across a lost answer. Profile names start with `dt`.

use std::process::Child;
use std::time::{Duration, Instant};

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::mock_platform::dingtalk::{
    DingTalkConfig, DingTalkFault, DingTalkSide, OpenRefusal,
};
use hermes_svc::mock_platform::{MockConfig, Platform, SendFault};

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const SECRET_VAR: &str = "DT_CLIENT_SECRET";

/// The outbox rig with a DingTalk adapter `dt` pinging every second (answer deadline 500 ms),
/// against a mock DingTalk that pushes an unacked message again after `ack_timeout`. The app
/// is the profile's own: token locks are machine-wide, and rigs run side by side.
fn rig(profile: &str, ack_timeout: Duration) -> Rig {
    rig_with(profile, dingtalk(profile, ack_timeout))
}

fn rig_with(profile: &str, config: DingTalkConfig) -> Rig {
    let extra = format!(
        "[[adapter]]\nname = \"dt\"\nkind = \"dingtalk\"\nclient-id = \"{}\"\n\
         secret-env = \"{SECRET_VAR}\"\napi-base = \"{{base}}\"\nping-interval = \"1s\"\n\
         ack-timeout = \"500ms\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n",
        config.client_id
    );
    Rig::with_mock(
        profile,
        &extra,
        MockConfig {
            dingtalk: config,
            ..MockConfig::default()
        },
    )
}

fn dingtalk(profile: &str, ack_timeout: Duration) -> DingTalkConfig {
    let id = format!("dingtest{profile}");
    DingTalkConfig {
        client_id: id.clone(),
        robot_code: id,
        ack_timeout,
        max_retries: 3,
        server_ping: Some(Duration::from_millis(500)),
        ..DingTalkConfig::default()
    }
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    let secret = DingTalkConfig::default().client_secret;
    let mut env = vec![(SECRET_VAR, secret.as_str())];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

/// Wait for a live connection after the first `before`; when it came.
fn connected(rig: &Rig, before: u64) -> Instant {
    wait_for(Duration::from_secs(30), "the Stream connection", || {
        let s = rig.mock.dingtalk_stats();
        (s.connections > before && s.live_connections >= 1).then(Instant::now)
    })
}

#[test]
fn killed_between_the_spool_append_and_the_ack_the_message_comes_again_and_is_stored_once() {
    let rig = rig("dtkill", Duration::from_secs(1));
    let mut gw = gateway(&rig, "kill:dingtalk-stored");
    connected(&rig, 0);
    let id = rig.mock.dingtalk_emit(1).remove(0);
    killed_by_fault(&mut gw, Duration::from_secs(30));
    assert_eq!(rig.stored("dt"), vec![id.clone()], "{}", rig.log());
    assert!(rig.mock.dingtalk_events()[0].acked_at.is_none());

    let before = rig.mock.dingtalk_stats().connections;
    let mut gw = gateway(&rig, "");
    connected(&rig, before);
    wait_for(Duration::from_secs(30), "the push again acked", || {
        rig.mock.dingtalk_events()[0].acked_at.map(|_| ())
    });
    let event = &rig.mock.dingtalk_events()[0];
    // Pushed again in a frame of its own, with the same msgId.
    assert!(event.deliveries.len() >= 2, "{event:?}");
    assert_ne!(event.deliveries[0].0, event.deliveries[1].0);
    assert_eq!(rig.stored("dt"), vec![id], "stored once");
    sigterm(&mut gw);
}

#[test]
fn a_half_open_connection_is_noticed_within_the_ping_interval_and_its_deadline() {
    let rig = rig("dthalf", Duration::from_secs(2));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    for (n, fault) in [DingTalkFault::Silence, DingTalkFault::Deaf]
        .into_iter()
        .enumerate()
    {
        let before = rig.mock.dingtalk_stats().connections;
        let went = Instant::now();
        rig.mock.dingtalk_set_fault(fault);
        // Pushed into the dead socket: lost there, pushed again on the next connection.
        let lost = rig.mock.dingtalk_emit(1).remove(0);
        let back = connected(&rig, before);
        // 1 s interval + 500 ms deadline, plus the reconnect; an upper bound only, generous
        // for a busy machine.
        let took = back - went;
        assert!(
            took < Duration::from_secs(15),
            "{fault:?}: {took:?}\n{}",
            rig.log()
        );
        wait_for(Duration::from_secs(30), "the lost message stored", || {
            rig.stored("dt").contains(&lost).then_some(())
        });
        assert_eq!(rig.stored("dt").len(), n + 1, "each once");
    }
    assert!(
        rig.log().contains("dingtalk stream connection lost"),
        "{}",
        rig.log()
    );
    sigterm(&mut gw);
}

#[test]
fn a_disconnect_is_a_planned_reconnect_and_a_drop_without_a_close_is_noticed() {
    let rig = rig("dtdisc", Duration::from_secs(2));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    for fault in [DingTalkFault::Disconnect, DingTalkFault::Drop] {
        let before = rig.mock.dingtalk_stats().connections;
        rig.mock.dingtalk_set_fault(fault);
        connected(&rig, before);
        let id = rig.mock.dingtalk_emit(1).remove(0);
        wait_for(Duration::from_secs(20), "the message stored", || {
            rig.stored("dt").contains(&id).then_some(())
        });
    }
    let s = rig.mock.dingtalk_stats();
    // Every connection had a ticket of its own, none reused; the server's pings answered.
    assert_eq!((s.tickets_refused, s.disconnects), (0, 1), "{s:?}");
    assert_eq!(s.stray_acks, 0, "{s:?}");
    wait_for(Duration::from_secs(10), "a SYSTEM ping answered", || {
        (rig.mock.dingtalk_stats().system_pongs >= 1).then_some(())
    });
    assert_eq!(rig.stored("dt").len(), 2);
    sigterm(&mut gw);
}

#[test]
fn a_disconnect_opens_the_next_connection_before_the_old_one_closes_and_loses_nothing() {
    // The server would close the old connection only after a minute, and would push an
    // unacked message again only after a minute: whatever happens sooner is the gateway's.
    let rig = rig_with(
        "dtmove",
        DingTalkConfig {
            disconnect_grace: Duration::from_secs(60),
            ..dingtalk("dtmove", Duration::from_secs(60))
        },
    );
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    // `disconnect`, then a message pushed on the same socket after it.
    let late = rig.mock.dingtalk_disconnect_delivering(1).remove(0);
    let spans = wait_for(Duration::from_secs(30), "the old connection closed", || {
        let c = rig.mock.dingtalk_connections();
        (c.len() >= 2 && c[0].closed_at.is_some()).then_some(c)
    });
    let (old, new) = (&spans[0], &spans[1]);
    let closed = old.closed_at.unwrap();
    // The successor was opened while the old connection was open, and proven (its first
    // ping) before the gateway closed the old one, long before the server would have.
    assert_eq!(old.closed_by, Some(DingTalkSide::Client), "{spans:#?}");
    assert!(old.disconnect_at.unwrap() <= new.opened_at, "{spans:#?}");
    assert!(new.opened_at < closed, "the spans overlap: {spans:#?}");
    assert!(new.first_ping_at.is_some_and(|p| p < closed), "{spans:#?}");
    assert!(new.closed_at.is_none(), "{spans:#?}");
    // The late message was stored and acked on the old socket: pushed once, stored once.
    wait_for(Duration::from_secs(20), "the late message stored", || {
        rig.stored("dt").contains(&late).then_some(())
    });
    let event = rig
        .mock
        .dingtalk_events()
        .into_iter()
        .find(|e| e.msg_id == late)
        .unwrap();
    assert!(event.acked_at.is_some_and(|a| a < closed), "{event:?}");
    assert_eq!(event.deliveries.len(), 1, "{event:?}");
    // The next message comes on the new connection.
    let next = rig.mock.dingtalk_emit(1).remove(0);
    wait_for(Duration::from_secs(20), "the next message stored", || {
        rig.stored("dt").contains(&next).then_some(())
    });
    assert_eq!(rig.stored("dt"), vec![late, next], "each once");
    let s = rig.mock.dingtalk_stats();
    assert_eq!(
        (s.connections, s.tickets_refused, s.stray_acks),
        (2, 0, 0),
        "{s:?}"
    );
    // A planned move is no outage: the adapter never reconnected.
    let state = rig.state().unwrap();
    let dt = state["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "dt")
        .unwrap()
        .clone();
    assert_eq!(dt["reconnects"], 0, "{dt}");
    assert!(
        rig.log().contains("opening it before closing this one"),
        "{}",
        rig.log()
    );
    sigterm(&mut gw);
}

#[test]
fn a_successor_that_cannot_open_leaves_the_old_connection_reading_until_the_server_closes_it() {
    let rig = rig_with(
        "dtstay",
        DingTalkConfig {
            disconnect_grace: Duration::from_secs(2),
            ..dingtalk("dtstay", Duration::from_secs(60))
        },
    );
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let refused = OpenRefusal::Status(503, "ServiceUnavailable".into());
    rig.mock.dingtalk_refuse_open(Some(refused));
    let late = rig.mock.dingtalk_disconnect_delivering(1).remove(0);
    let spans = wait_for(Duration::from_secs(30), "the server's close", || {
        let c = rig.mock.dingtalk_connections();
        c[0].closed_at.is_some().then_some(c)
    });
    // No successor came up, so the old connection was read until the server closed it.
    assert_eq!(
        (spans.len(), spans[0].closed_by),
        (1, Some(DingTalkSide::Server)),
        "{spans:#?}"
    );
    let event = rig
        .mock
        .dingtalk_events()
        .into_iter()
        .find(|e| e.msg_id == late)
        .unwrap();
    assert!(event.acked_at.is_some(), "{event:?}");
    rig.mock.dingtalk_refuse_open(None);
    connected(&rig, 1);
    let next = rig.mock.dingtalk_emit(1).remove(0);
    wait_for(Duration::from_secs(20), "the next message stored", || {
        rig.stored("dt").contains(&next).then_some(())
    });
    assert_eq!(rig.stored("dt"), vec![late, next], "each once");
    assert!(rig.log().contains("did not come up"), "{}", rig.log());
    sigterm(&mut gw);
}

#[test]
fn revoked_credentials_end_the_gateway_with_the_fix_rather_than_retrying_for_ever() {
    let rig = rig("dtrevoke", Duration::from_secs(2));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    rig.mock.dingtalk_revoke(true);
    rig.mock.dingtalk_set_fault(DingTalkFault::Drop);
    let status = wait_for(Duration::from_secs(30), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    let log = rig.log();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(
        log.contains("invalidClientIdOrSecret") && log.contains("client-id"),
        "{log}"
    );
    assert!(
        !log.contains(&DingTalkConfig::default().client_secret),
        "{log}"
    );
    // One refused open, not one every 10 s.
    assert_eq!(rig.mock.dingtalk_stats().opens_refused, 1);
}

#[test]
fn a_reply_is_posted_once_across_a_lost_answer_and_a_throttled_200_is_retried() {
    let rig = rig("dtreply", Duration::from_secs(2));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    assert!(rig.wait_api(&mut gw));
    let config = DingTalkConfig::default();
    let group = format!("group:{}", config.groups[0]);
    let user = format!("user:{}", config.staff[0]);
    let send = |key: &str, to: &str, text: &str, policy| {
        let m = rig.submit(key, ("dt", to), text, None, policy).unwrap();
        rig.wait_drained(&gw, Duration::from_secs(30));
        rig.message(&m.id)
    };
    let posted = |text: &str| rig.posts().iter().filter(|p| p.content == text).count();
    let m = send("dt-group", &group, "to the group", Policy::AtMostOnce);
    assert_eq!((m.state, posted("to the group")), (State::Sent, 1), "{m:?}");
    // HTTP 200 with a throttling errcode is no success: sent again, once.
    rig.mock.set_send_fault(
        Platform::DingTalk,
        SendFault::RateLimited {
            posts: 1,
            retry_after: Duration::from_secs(1),
        },
    );
    let m = send("dt-user", &user, "to the person", Policy::AtMostOnce);
    assert_eq!(
        (m.state, posted("to the person")),
        (State::Sent, 1),
        "{m:?}"
    );
    // Posted, and the answer lost: no idempotency key, so at-most-once leaves it unknown and
    // never posts it again.
    rig.mock
        .set_send_fault(Platform::DingTalk, SendFault::ResetAfterProcessing(1));
    let m = send("dt-lost", &group, "answer lost", Policy::AtMostOnce);
    assert_eq!(
        (m.state, posted("answer lost")),
        (State::Unknown, 1),
        "{m:?}"
    );
    let posts: Vec<_> = rig
        .posts()
        .into_iter()
        .filter(|p| p.platform == Platform::DingTalk)
        .collect();
    assert_eq!(posts.len(), 3, "{posts:?}");
    sigterm(&mut gw);
}

/// doctor's HSV020 findings for the rig's profile, with the secret in its `.env` (no manager
/// is asked: the bus addresses lead nowhere, which doctor reports as HSV000 and goes on).
fn hsv020(rig: &Rig) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let env = rig.profile_home().join(".env");
    let secret = DingTalkConfig::default().client_secret;
    let text = format!("{SECRET_VAR}={secret}\nOB_DC_TOKEN=dc\nOB_QQ_SECRET=qq\n");
    std::fs::write(&env, text).unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = rig
        .hermes()
        .args(["doctor", "--json"])
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/dt-system-bus",
        )
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/dt-user-bus",
        )
        .env("XDG_RUNTIME_DIR", "/nonexistent/dt-runtime")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(&secret), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let findings = v["findings"].as_array().cloned().unwrap_or_default();
    findings
        .iter()
        .filter(|f| f["id"] == "HSV020")
        .map(|f| f.to_string())
        .collect()
}

#[test]
fn doctor_names_refused_credentials_with_the_fix() {
    let rig = rig("dtdoctor", Duration::from_secs(2));
    assert!(hsv020(&rig).is_empty(), "{:?}", hsv020(&rig));
    rig.mock.dingtalk_revoke(true);
    let found = hsv020(&rig);
    assert!(
        found
            .iter()
            .any(|f| f.contains("invalidClientIdOrSecret") && f.contains("secret-env")),
        "{found:?}"
    );
}
