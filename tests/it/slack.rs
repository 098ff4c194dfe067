//! A real gateway process with a Slack adapter (Socket Mode) against the mock Slack in this
//! process (the outbox rig's, with an `sl` adapter added): stored before acked across a kill,
//! a redelivered envelope stored once, a half-open connection replaced, a planned refresh,
//! Socket Mode turned off, and a reply through the agent API into a thread. Profile names
//! start with `sl`.

use std::process::Child;
use std::time::{Duration, Instant};

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::mock_platform::{MockConfig, Platform, SendFault, SlackConfig, SlackFault};

use crate::harness::{try_wait_for, wait_for};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const APP_VAR: &str = "SL_APP_TOKEN";
const BOT_VAR: &str = "SL_BOT_TOKEN";

/// The outbox rig with a Slack adapter `sl` pinging every second, against a mock Slack that
/// redelivers after `ack_timeout`.
fn rig(profile: &str, ack_timeout: Duration) -> Rig {
    rig_with(profile, ack_timeout, SlackConfig::default().max_retries)
}

/// [`rig`], the mock redelivering an unacknowledged envelope `max_retries` times.
fn rig_with(profile: &str, ack_timeout: Duration, max_retries: u32) -> Rig {
    let extra = format!(
        "[[adapter]]\nname = \"sl\"\nkind = \"slack\"\napp-token-env = \"{APP_VAR}\"\n\
         bot-token-env = \"{BOT_VAR}\"\napi-base = \"{{base}}\"\nping-interval = \"1s\"\n\
         ack-timeout = \"500ms\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    );
    let slack = SlackConfig {
        ack_timeout,
        max_retries,
        ..SlackConfig::default()
    };
    Rig::with_mock(
        profile,
        &extra,
        MockConfig {
            slack,
            ..MockConfig::default()
        },
    )
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    let config = SlackConfig::default();
    let mut env = vec![
        (APP_VAR, config.app_token.as_str()),
        (BOT_VAR, config.bot_token.as_str()),
    ];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

/// Wait for a connection after the first `before`, live.
fn connected(rig: &Rig, before: u64) -> Instant {
    wait_for(
        Duration::from_secs(20),
        "the Socket Mode connection",
        || {
            let s = rig.mock.slack_stats();
            (s.connections > before && s.live_connections >= 1).then(Instant::now)
        },
    )
}

fn events(rig: &Rig) -> Vec<serde_json::Value> {
    rig.events("sl")
}

fn stored(rig: &Rig) -> Vec<String> {
    rig.stored("sl")
}

#[test]
fn killed_between_the_spool_append_and_the_ack_the_event_comes_again_and_is_stored_once() {
    let rig = rig("slkill", Duration::from_secs(1));
    let mut gw = gateway(&rig, "kill:slack-stored");
    connected(&rig, 0);
    let id = rig.mock.slack_emit(1).remove(0);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(stored(&rig), vec![id.clone()], "{}", rig.log());
    assert!(rig.mock.slack_events()[0].acked_at.is_none());

    let before = rig.mock.slack_stats().connections;
    let mut gw = gateway(&rig, "");
    connected(&rig, before);
    wait_for(Duration::from_secs(20), "the redelivery acked", || {
        rig.mock.slack_events()[0].acked_at.map(|_| ())
    });
    let event = &rig.mock.slack_events()[0];
    // Redelivered under a new envelope id, with the same event id.
    assert!(event.deliveries.len() >= 2, "{event:?}");
    assert_ne!(event.deliveries[0].0, event.deliveries[1].0);
    assert_eq!(stored(&rig), vec![id], "stored once");
    sigterm(&mut gw);
}

#[test]
fn a_half_open_connection_is_replaced_and_what_it_lost_comes_again() {
    let rig = rig("slhalf", Duration::from_secs(1));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    rig.mock.slack_set_fault(SlackFault::Silence);
    // Sent into the silence: lost there, delivered again on the next connection.
    let lost = rig.mock.slack_emit(1).remove(0);
    connected(&rig, 1);
    assert!(
        rig.log().contains("socket mode connection lost"),
        "{}",
        rig.log()
    );
    let later = rig.mock.slack_emit(3);
    wait_for(Duration::from_secs(20), "every event stored", || {
        let s = stored(&rig);
        (s.contains(&lost) && later.iter().all(|id| s.contains(id))).then_some(())
    });
    assert_eq!(stored(&rig).len(), 4, "each once");
    sigterm(&mut gw);
}

#[test]
fn a_refresh_opens_the_next_connection_before_closing_the_old_and_link_disabled_exits_78() {
    let rig = rig("slrefresh", Duration::from_secs(3));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    rig.mock
        .slack_set_fault(SlackFault::Disconnect("refresh_requested".into()));
    connected(&rig, 1);
    // The old connection was still open when the new one said hello, and is closed now.
    wait_for(Duration::from_secs(10), "the old connection closed", || {
        (rig.mock.slack_stats().live_connections == 1).then_some(())
    });
    let s = rig.mock.slack_stats();
    assert_eq!((s.connections, s.peak_connections), (2, 2), "{s:?}");
    let id = rig.mock.slack_emit(1).remove(0);
    wait_for(Duration::from_secs(10), "the event stored", || {
        stored(&rig).contains(&id).then_some(())
    });
    // A planned refresh is no outage: the adapter never reconnected.
    let state = rig.state().unwrap();
    let sl = state["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sl")
        .unwrap()
        .clone();
    assert_eq!(sl["reconnects"], 0, "{sl}");
    rig.mock
        .slack_set_fault(SlackFault::Disconnect("link_disabled".into()));
    let status = wait_for(Duration::from_secs(20), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    let log = rig.log();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(log.contains("Settings › Socket Mode"), "{log}");
    // Each URL came from apps.connections.open, one per connection.
    let s = rig.mock.slack_stats();
    assert_eq!(
        (s.urls_issued, s.tickets_refused),
        (s.connections, 0),
        "{s:?}"
    );
}

#[test]
fn a_reply_goes_into_the_thread_and_comes_back_as_the_bots_own() {
    let rig = rig("slreply", Duration::from_secs(3));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    assert!(rig.wait_api(&mut gw));
    let channel = SlackConfig::default().channels[0].clone();
    let thread = "1700000000.000100";
    let message = rig
        .submit(
            "sl-reply-1",
            ("sl", &format!("channel:{channel}")),
            "on it",
            Some(thread),
            Policy::AtMostOnce,
        )
        .unwrap();
    rig.wait_drained(&gw, Duration::from_secs(20));
    let m = rig.message(&message.id);
    assert_eq!(m.state, State::Sent, "{m:?}");
    let posts = rig.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(
        (posts[0].platform, posts[0].reply_to.as_deref()),
        (Platform::Slack, Some(thread))
    );
    assert_eq!(m.platform_id.as_deref(), Some(posts[0].message_id.as_str()));
    // The echo is stored, as the bot's own.
    wait_for(Duration::from_secs(10), "the echo stored", || {
        events(&rig)
            .into_iter()
            .find(|e| e["data"]["bot_id"] == SlackConfig::default().bot_id)
            .map(|_| ())
    });
    sigterm(&mut gw);
}

#[test]
fn a_429_is_waited_out_and_a_lost_answer_follows_the_messages_policy() {
    let rig = rig("slpolicy", Duration::from_secs(3));
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    assert!(rig.wait_api(&mut gw));
    let to = format!("channel:{}", SlackConfig::default().channels[0]);
    let send = |key: &str, text: &str, policy| {
        let m = rig.submit(key, ("sl", &to), text, None, policy).unwrap();
        rig.wait_drained(&gw, Duration::from_secs(20));
        rig.message(&m.id)
    };
    let posted = |text: &str| rig.posts().iter().filter(|p| p.content == text).count();
    // A 429 with Retry-After: nothing sent again before it is over, then sent once.
    let wait = Duration::from_secs(1);
    rig.mock.set_send_fault(
        Platform::Slack,
        SendFault::RateLimited {
            posts: 1,
            retry_after: wait,
        },
    );
    let m = send("sl-429", "after the wait", Policy::AtMostOnce);
    assert_eq!(
        (m.state, posted("after the wait")),
        (State::Sent, 1),
        "{m:?}"
    );
    let tries: Vec<_> = rig
        .mock
        .send_attempts()
        .into_iter()
        .filter(|a| a.platform == Platform::Slack)
        .collect();
    assert_eq!(tries.len(), 2, "{tries:?}");
    assert!(
        tries[1].received_at - tries[0].received_at >= wait,
        "{tries:?}"
    );
    // Posted, and the answer lost: Slack has no idempotency key, so the policy decides.
    rig.mock
        .set_send_fault(Platform::Slack, SendFault::ResetAfterProcessing(1));
    let m = send("sl-amo", "at most once", Policy::AtMostOnce);
    assert_eq!(
        (m.state, posted("at most once")),
        (State::Unknown, 1),
        "{m:?}"
    );
    rig.mock
        .set_send_fault(Platform::Slack, SendFault::ResetAfterProcessing(1));
    let m = send("sl-alo", "at least once", Policy::AtLeastOnce);
    assert_eq!(
        (m.state, posted("at least once")),
        (State::Sent, 2),
        "{m:?}"
    );
    sigterm(&mut gw);
}

#[test]
fn every_kind_of_connection_fault_in_turn_loses_and_repeats_nothing() {
    // Slack's own three retries (1 + 2 + 4 s here) are shorter than a loaded machine can take
    // to notice a deaf socket and dial again: past them the mock drops the envelope, and the
    // test would measure the machine, not the gateway. Six retries span a minute; what is
    // checked is that every event is stored once, however late.
    let rig = rig_with("slcycle", Duration::from_secs(1), 6);
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let faults = [
        SlackFault::Silence,
        SlackFault::Deaf,
        SlackFault::CloseAll,
        SlackFault::Disconnect("refresh_requested".into()),
        SlackFault::Disconnect("warning".into()),
    ];
    let mut ids = vec![];
    for fault in faults.iter().cycle().take(10) {
        let before = rig.mock.slack_stats().connections;
        rig.mock.slack_set_fault(fault.clone());
        ids.extend(rig.mock.slack_emit(10));
        connected(&rig, before);
        rig.mock.slack_clear_faults();
    }
    let all_stored = try_wait_for(Duration::from_secs(90), || {
        let s = stored(&rig);
        ids.iter().all(|id| s.contains(id)).then_some(())
    });
    if all_stored.is_none() {
        let s = stored(&rig);
        let missing: Vec<_> = (rig.mock.slack_events().into_iter())
            .filter(|e| ids.contains(&e.event_id) && !s.contains(&e.event_id))
            .collect();
        panic!("not stored after 90 s: {missing:#?}");
    }
    assert_eq!(stored(&rig).len(), ids.len(), "each once");
    sigterm(&mut gw);
}

/// doctor's findings for the rig's profile, with the tokens in its `.env` (no manager is
/// asked: the bus addresses lead nowhere, which doctor reports as HSV000 and goes on).
fn doctor(rig: &Rig) -> Vec<serde_json::Value> {
    use std::os::unix::fs::PermissionsExt;
    let config = SlackConfig::default();
    let env = rig.profile_home().join(".env");
    let text = format!(
        "{APP_VAR}={}\n{BOT_VAR}={}\nOB_DC_TOKEN=dc\nOB_QQ_SECRET=qq\n",
        config.app_token, config.bot_token
    );
    std::fs::write(&env, text).unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = rig
        .hermes()
        .args(["doctor", "--json"])
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/sl-system-bus",
        )
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/sl-user-bus",
        )
        .env("XDG_RUNTIME_DIR", "/nonexistent/sl-runtime")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    v["findings"].as_array().cloned().unwrap_or_default()
}

fn hsv020(findings: &[serde_json::Value]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f["id"] == "HSV020")
        .map(|f| f.to_string())
        .collect()
}

#[test]
fn doctor_names_a_revoked_token_and_socket_mode_turned_off_with_the_fix() {
    let rig = rig("sldoctor", Duration::from_secs(3));
    assert!(hsv020(&doctor(&rig)).is_empty(), "{:?}", doctor(&rig));
    rig.mock
        .slack_refuse_open(Some(hermes_svc::mock_platform::OpenRefusal::Error(
            "socket_mode_not_enabled".into(),
        )));
    let found = hsv020(&doctor(&rig));
    assert!(
        found.iter().any(|f| f.contains("Settings › Socket Mode")),
        "{found:?}"
    );
    rig.mock.slack_clear_faults();
    rig.mock.slack_revoke_tokens();
    let found = hsv020(&doctor(&rig));
    assert!(
        found
            .iter()
            .any(|f| f.contains("token_revoked") && f.contains("bot-token-env")),
        "{found:?}"
    );
    // No token in any finding.
    let all = doctor(&rig);
    let text = serde_json::to_string(&all).unwrap();
    assert!(!text.contains(&SlackConfig::default().bot_token), "{text}");
    assert!(!text.contains(&SlackConfig::default().app_token), "{text}");
}
