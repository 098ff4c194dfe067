//! A real gateway process with a WeCom AI-bot adapter (the long connection) against the mock
//! WeCom in this process (the outbox rig's, with a `wc` adapter added): stored once across a
//! kill and a redelivery, a half-open socket and unanswered pings noticed within the ping
//! interval plus its deadline, a kick taken as a conflict (exit 78), a revoked secret, and a
//! reply posted once across a lost answer. Profile names start with `wc`.

use std::process::Child;
use std::time::{Duration, Instant};

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::mock_platform::{WeComConfig, WeComFault};

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const BOT_VAR: &str = "WC_BOT_ID";
const SECRET_VAR: &str = "WC_SECRET";

/// The outbox rig with a WeCom adapter `wc` pinging every second, answers due within 500 ms.
fn rig(profile: &str) -> Rig {
    let extra = format!(
        "[[adapter]]\nname = \"wc\"\nkind = \"wecom\"\nbot-id-env = \"{BOT_VAR}\"\n\
         secret-env = \"{SECRET_VAR}\"\nurl = \"{{wecom}}\"\nping-interval = \"1s\"\n\
         ack-timeout = \"500ms\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    );
    let rig = Rig::new(profile, &extra);
    let path = rig.profile_home().join("gateway.toml");
    let toml = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, toml.replace("{wecom}", &rig.mock.wecom_url())).unwrap();
    rig
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    let config = WeComConfig::default();
    let mut env = vec![
        (BOT_VAR, config.bot_id.as_str()),
        (SECRET_VAR, config.secret.as_str()),
    ];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

/// Wait for a subscription after the first `before`, holding the bot.
fn subscribed(rig: &Rig, before: u64) -> Instant {
    wait_for(Duration::from_secs(20), "the bot's subscription", || {
        let s = rig.mock.wecom_stats();
        (s.subscribed > before && rig.mock.wecom_subscribed()).then(Instant::now)
    })
}

fn stored(rig: &Rig) -> Vec<String> {
    rig.stored("wc")
}

fn wait_stored(rig: &Rig, id: &str) {
    wait_for(Duration::from_secs(20), "the callback stored", || {
        stored(rig).iter().any(|s| s == id).then_some(())
    });
}

#[test]
fn killed_after_the_spool_a_redelivered_callback_is_stored_once() {
    let rig = rig("wckill");
    let mut gw = gateway(&rig, "kill:wecom-stored");
    subscribed(&rig, 0);
    let id = rig.mock.wecom_emit(1).remove(0);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(stored(&rig), vec![id.clone()], "{}", rig.log());

    let before = rig.mock.wecom_stats().subscribed;
    let mut gw = gateway(&rig, "");
    subscribed(&rig, before);
    assert!(rig.mock.wecom_redeliver(&id));
    let later = rig.mock.wecom_emit(1).remove(0);
    wait_stored(&rig, &later);
    let event = &rig.mock.wecom_events()[0];
    assert_eq!(event.req_ids.len(), 2, "{event:?}");
    assert_ne!(event.req_ids[0], event.req_ids[1]);
    assert_eq!(stored(&rig), vec![id, later], "stored once each");
    sigterm(&mut gw);
}

#[test]
fn a_half_open_socket_and_unanswered_pings_are_noticed_within_the_interval_and_its_deadline() {
    let rig = rig("wchalf");
    let mut gw = gateway(&rig, "");
    subscribed(&rig, 0);
    // Interval 1 s + deadline 500 ms: an upper bound only, generous for a busy machine.
    let bound = Duration::from_secs(10);
    for (n, fault) in [WeComFault::Silence, WeComFault::NoPong]
        .into_iter()
        .enumerate()
    {
        let before = rig.mock.wecom_stats().subscribed;
        let t0 = Instant::now();
        rig.mock.wecom_set_fault(fault.clone());
        let lost = rig.mock.wecom_emit(1).remove(0);
        let again = subscribed(&rig, before);
        assert!(again - t0 < bound, "{fault:?}: {:?}", again - t0);
        rig.mock.wecom_clear_faults();
        let later = rig.mock.wecom_emit(1).remove(0);
        wait_stored(&rig, &later);
        if n == 1 {
            // Under NoPong the socket still carried the callback.
            assert!(stored(&rig).contains(&lost));
        }
    }
    assert!(
        rig.log().contains("wecom long connection lost"),
        "{}",
        rig.log()
    );
    sigterm(&mut gw);
}

#[test]
fn a_kick_by_another_subscriber_is_a_conflict_and_exits_78() {
    let rig = rig("wckick");
    let mut gw = gateway(&rig, "");
    subscribed(&rig, 0);
    rig.mock.wecom_set_fault(WeComFault::Kick);
    let status = wait_for(Duration::from_secs(20), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    let log = rig.log();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(log.contains("another holder subscribed this bot"), "{log}");
    // It did not take the bot back.
    assert_eq!(rig.mock.wecom_stats().subscribed, 1);
}

#[test]
fn a_revoked_secret_is_fatal_after_three_refusals() {
    let rig = rig("wcrevoke");
    let mut gw = gateway(&rig, "");
    subscribed(&rig, 0);
    rig.mock.wecom_revoke_secret();
    rig.mock.wecom_set_fault(WeComFault::Drop);
    let status = wait_for(Duration::from_secs(30), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    let log = rig.log();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(
        log.contains("refused the bot's subscription 3 times"),
        "{log}"
    );
    assert!(
        !log.contains(&WeComConfig::default().secret),
        "the secret never logged"
    );
}

#[test]
fn a_reply_is_posted_once_across_a_lost_answer() {
    let rig = rig("wcreply");
    let mut gw = gateway(&rig, "");
    subscribed(&rig, 0);
    assert!(rig.wait_api(&mut gw));
    let id = rig.mock.wecom_emit(1).remove(0);
    wait_stored(&rig, &id);
    let req_id = rig.mock.wecom_events()[0].req_ids[0].clone();
    rig.mock.wecom_lose_answers(1);
    let user = WeComConfig::default().user_id;
    let message = rig
        .submit(
            "wc-reply-1",
            ("wc", &format!("chat:{user}")),
            "on it",
            Some(&req_id),
            Policy::AtMostOnce,
        )
        .unwrap();
    rig.wait_drained(&gw, Duration::from_secs(60));
    let m = rig.message(&message.id);
    assert_eq!(m.state, State::Sent, "{m:?}");
    let posts = rig.mock.wecom_posts();
    assert_eq!(posts.len(), 1, "posted once: {posts:?}");
    assert_eq!(
        (posts[0].req_id.as_str(), posts[0].content.as_str()),
        (req_id.as_str(), "on it")
    );
    assert!(
        posts[0].refreshes >= 1,
        "the repeat refreshed it: {posts:?}"
    );
    assert_eq!(rig.mock.wecom_stats().answers_lost, 1);
    // A message the bot starts goes to the chat.
    rig.submit(
        "wc-send-1",
        ("wc", &format!("chat:{user}")),
        "hello",
        None,
        Policy::AtMostOnce,
    )
    .unwrap();
    rig.wait_drained(&gw, Duration::from_secs(30));
    let posts = rig.mock.wecom_posts();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(posts[1].chat_id.as_deref(), Some(user.as_str()));
    sigterm(&mut gw);
}
