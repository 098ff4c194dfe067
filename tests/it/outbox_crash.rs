//! Exactly once across SIGKILL: a gateway is killed at each point of a send, twenty times a
//! point, and after the last restart every message is on the platform once, where the
//! platform dedupes (a Discord channel, by nonce; a QQ reply, by msg_seq; a Feishu chat, by
//! uuid). Where it cannot
//! (a QQ active message), the policy holds: at most one post and an `unknown` state by
//! default, at least one under at-least-once.
//!
//! The points: after the outbox append (the submit's answer never arrives), after the
//! `sending` record (the request never went out), with the request on the platform and no
//! answer yet (the mock records it and hangs; the test kills), and after the platform
//! answered but before the outbox recorded it.

use std::time::Duration;

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::mock_platform::{Platform, SendFault};

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigkill, sigterm, Rig};

const ROUNDS: usize = 20;
/// The mock Feishu's chat (`FeishuConfig::default().chat_id`).
const TARGET_CHAT: &str = "chat:oc_mockchat00000000000000000000001";

#[derive(Clone, Copy, Debug)]
enum Point {
    Appended,
    Sending,
    InFlight,
    Answered,
}

const POINTS: [Point; 4] = [
    Point::Appended,
    Point::Sending,
    Point::InFlight,
    Point::Answered,
];

struct Target {
    adapter: &'static str,
    target: &'static str,
    reply_to: Option<&'static str>,
    platform: Platform,
}

/// Lives of the gateway until one dies at `point` for message `key` (the fault is aimed at
/// that key, so messages left over from earlier rounds pass the point unharmed). Should a
/// life die before the submit is answered, the submit is repeated in the next life with the
/// same key, as any client would.
fn one_crash(rig: &Rig, t: &Target, point: Point, key: &str, text: &str, policy: Policy) {
    let fault = match point {
        Point::Appended => format!("kill:outbox-appended:{key}"),
        Point::Sending => format!("kill:outbox-sending:{key}"),
        Point::Answered => format!("kill:outbox-answered:{key}"),
        Point::InFlight => String::new(),
    };
    loop {
        let mut gw = rig.gateway(&fault);
        if !rig.wait_api(&mut gw) {
            continue;
        }
        let hung_before = hung(rig);
        if let Point::InFlight = point {
            rig.mock
                .set_send_fault(t.platform, SendFault::HangAfterProcessing(1));
        }
        let submitted = rig.submit(key, (t.adapter, t.target), text, t.reply_to, policy);
        match point {
            Point::InFlight => {
                submitted.unwrap();
                wait_for(Duration::from_secs(20), "the hung request", || {
                    (hung(rig) > hung_before).then_some(())
                });
                sigkill(&mut gw);
                rig.mock.clear_send_fault(t.platform);
                return;
            }
            Point::Appended | Point::Sending | Point::Answered => {
                killed_by_fault(&mut gw, Duration::from_secs(20));
                if submitted.is_ok() || matches!(point, Point::Appended) {
                    return;
                }
            }
        }
    }
}

/// Requests the platform recorded and never answered.
fn hung(rig: &Rig) -> usize {
    rig.mock
        .send_attempts()
        .iter()
        .filter(|a| a.status.is_none())
        .count()
}

/// A last, clean life delivers what is left.
fn drain(rig: &Rig) {
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(60));
    sigterm(&mut gw);
}

fn count(rig: &Rig, text: &str) -> usize {
    rig.posts().iter().filter(|p| p.content == text).count()
}

fn exactly_once_at_every_point(profile: &str, extra: &str, t: Target) {
    let rig = Rig::new(profile, extra);
    let mut texts = vec![];
    for point in POINTS {
        for round in 0..ROUNDS {
            let text = format!("{point:?} {round}");
            let key = format!("{profile}-{point:?}-{round}");
            one_crash(&rig, &t, point, &key, &text, Policy::AtMostOnce);
            texts.push(text);
        }
    }
    drain(&rig);
    for text in &texts {
        assert_eq!(count(&rig, text), 1, "{text:?} posted once\n{}", rig.log());
    }
    assert_eq!(rig.posts().len(), texts.len());
}

#[test]
fn a_discord_message_is_posted_exactly_once_whatever_the_kill() {
    exactly_once_at_every_point(
        "obdc",
        "",
        Target {
            adapter: "dc",
            target: "channel:4242",
            reply_to: None,
            platform: Platform::Discord,
        },
    );
}

#[test]
fn a_qq_reply_is_posted_exactly_once_whatever_the_kill() {
    exactly_once_at_every_point(
        "obqq",
        "",
        Target {
            adapter: "qq",
            target: "group:G1",
            reply_to: Some("evt-1"),
            platform: Platform::Qq,
        },
    );
}

#[test]
fn a_feishu_message_is_posted_exactly_once_whatever_the_kill() {
    let fs = hermes_svc::mock_platform::FeishuConfig::default();
    exactly_once_at_every_point(
        "obfs",
        &format!(
            "[[adapter]]\nname = \"fs\"\nkind = \"feishu\"\napp-id = \"{}\"\n\
             secret-env = \"OB_FS_SECRET\"\napi-base = \"{{base}}\"\n",
            fs.app_id
        ),
        Target {
            adapter: "fs",
            target: TARGET_CHAT,
            reply_to: None,
            platform: Platform::Feishu,
        },
    );
}

/// A QQ active message has no dedupe key: killed after the platform answered, it is posted
/// once and then, by default, never again (its state says the outcome is unknown); under
/// at-least-once it is sent again, so it is posted at least once. Killed before the request
/// went out, at-most-once leaves it unposted and unknown, and at-least-once posts it.
#[test]
fn without_a_dedupe_key_the_policy_decides_and_the_unknown_outcome_is_reported() {
    let rig = Rig::new("obact", "");
    let t = Target {
        adapter: "qq",
        target: "group:G2",
        reply_to: None,
        platform: Platform::Qq,
    };
    let mut ids = vec![];
    for round in 0..ROUNDS {
        for (point, policy) in [
            (Point::Answered, Policy::AtMostOnce),
            (Point::Answered, Policy::AtLeastOnce),
            (Point::Sending, Policy::AtMostOnce),
            (Point::Sending, Policy::AtLeastOnce),
        ] {
            let text = format!("{point:?} {policy:?} {round}");
            let key = format!("act-{point:?}-{policy:?}-{round}");
            one_crash(&rig, &t, point, &key, &text, policy);
            ids.push((point, policy, text, key));
        }
    }
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(60));
    let state_of = |key: &str| {
        let body =
            std::fs::read_to_string(rig.profile_home().join("outbox/journal.jsonl")).unwrap();
        let id = body
            .lines()
            .find(|l| l.contains(&format!("\"idempotency_key\":\"{key}\"")))
            .and_then(|l| l.split("\"id\":\"").nth(1))
            .map(|r| r.split('"').next().unwrap().to_owned())
            .unwrap();
        rig.message(&id)
    };
    for (point, policy, text, key) in &ids {
        let posts = count(&rig, text);
        let m = state_of(key);
        match (point, policy) {
            (_, Policy::AtLeastOnce) => {
                assert!(posts >= 1, "{text}: at least once, got {posts}");
                assert_eq!(m.state, State::Sent, "{text}");
            }
            (Point::Answered, Policy::AtMostOnce) => {
                assert_eq!(posts, 1, "{text}: posted by the killed life, never again");
                assert_eq!(m.state, State::Unknown, "{text}");
            }
            (_, Policy::AtMostOnce) => {
                assert_eq!(posts, 0, "{text}: never went out, never sent again");
                assert_eq!(m.state, State::Unknown, "{text}");
            }
        }
    }
    let unknown = rig.state().unwrap()["outbox"]["unknown"].as_u64().unwrap();
    assert_eq!(
        unknown,
        2 * ROUNDS as u64,
        "status counts the unknown outcomes"
    );
    sigterm(&mut gw);
}
