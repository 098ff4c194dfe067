//! A real gateway process with a Mattermost adapter against the mock Mattermost in this
//! process (the outbox rig's, with an `mm` adapter added): a post stored across a kill
//! between the spool and the catch-up mark (read again by REST, stored once), a half-open
//! socket noticed within the ping interval plus its deadline and what it lost caught up,
//! every connection fault in turn losing and repeating nothing, a reply posted once across a
//! lost answer (`pending_post_id`), and a revoked token ending the adapter with exit 78.
//! Profile names start with `mm`.

use std::process::Child;
use std::time::{Duration, Instant};

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::mock_platform::mattermost::{MattermostConfig, MattermostFault};
use hermes_svc::mock_platform::{MockConfig, Platform, SendFault};

use crate::harness::{try_wait_for, wait_for};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const TOKEN_VAR: &str = "MM_TOKEN";

/// The ping interval and pong deadline the adapter is given here.
const PING: Duration = Duration::from_secs(1);
const PONG_DEADLINE: Duration = Duration::from_millis(500);

pub(crate) fn rig(profile: &str) -> Rig {
    let extra = format!(
        "[[adapter]]\nname = \"mm\"\nkind = \"mattermost\"\nserver-url = \"{{base}}\"\n\
         token-env = \"{TOKEN_VAR}\"\nping-interval = \"1s\"\nack-timeout = \"500ms\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    );
    Rig::with_mock(profile, &extra, MockConfig::default())
}

pub(crate) fn gateway(rig: &Rig, faults: &str) -> Child {
    let config = MattermostConfig::default();
    let mut env = vec![(TOKEN_VAR, config.token.as_str())];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

/// Wait for a connection after the first `before`, live, and its catch-up done (the mock
/// saw the catch-up's channel list, or this was a first start, which reads none).
pub(crate) fn connected(rig: &Rig, before: u64) -> Instant {
    wait_for(Duration::from_secs(20), "the websocket connection", || {
        let s = rig.mock.mattermost_stats();
        (s.connections > before && s.live_connections >= 1 && s.challenges_ok > before)
            .then(Instant::now)
    })
}

pub(crate) fn stored(rig: &Rig) -> Vec<String> {
    rig.stored("mm")
}

pub(crate) fn wait_stored(rig: &Rig, ids: &[String], within: Duration) {
    let all = try_wait_for(within, || {
        let s = stored(rig);
        ids.iter().all(|id| s.contains(id)).then_some(())
    });
    if all.is_none() {
        let s = stored(rig);
        let missing: Vec<_> = ids.iter().filter(|id| !s.contains(id)).collect();
        panic!("not stored: {missing:?}\n{}", rig.log());
    }
}

#[test]
fn killed_between_the_spool_and_the_mark_the_post_is_caught_up_and_stored_once() {
    let rig = rig("mmkill");
    let mut gw = gateway(&rig, "kill:mattermost-stored");
    connected(&rig, 0);
    let id = rig.mock.mattermost_emit(1).remove(0);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(stored(&rig), vec![id.clone()], "{}", rig.log());

    let before = rig.mock.mattermost_stats().connections;
    let mut gw = gateway(&rig, "");
    connected(&rig, before);
    // The catch-up runs before the socket is read: a post made now is stored after it.
    let later = rig.mock.mattermost_emit(1).remove(0);
    wait_stored(&rig, std::slice::from_ref(&later), Duration::from_secs(20));
    let s = rig.mock.mattermost_stats();
    assert!(s.since_calls >= 1, "{s:?}");
    assert_eq!(stored(&rig), vec![id, later], "stored once each");
    sigterm(&mut gw);
}

#[test]
fn a_half_open_socket_is_noticed_within_the_ping_interval_and_its_deadline_and_its_posts_caught_up()
{
    let rig = rig("mmhalf");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let first = rig.mock.mattermost_emit(1);
    wait_stored(&rig, &first, Duration::from_secs(20));
    let silenced = Instant::now();
    rig.mock.mattermost_set_fault(MattermostFault::Silence);
    // Posted into the silence: never written to the socket, read back by the catch-up.
    let lost = rig.mock.mattermost_emit(2);
    let back = connected(&rig, 1);
    let took = back - silenced;
    // Noticed within one interval plus the deadline; the rest is the reconnect (its backoff
    // is at most 1 s here) on a busy machine: only an upper bound, and a generous one.
    assert!(
        took < PING + PONG_DEADLINE + Duration::from_secs(8),
        "took {took:?}"
    );
    assert!(rig.log().contains("half-open"), "{}", rig.log());
    let more = rig.mock.mattermost_emit(3);
    let all: Vec<String> = first.into_iter().chain(lost).chain(more).collect();
    wait_stored(&rig, &all, Duration::from_secs(20));
    assert_eq!(stored(&rig).len(), all.len(), "each once");
    sigterm(&mut gw);
}

#[test]
fn every_kind_of_connection_fault_in_turn_loses_and_repeats_nothing() {
    let rig = rig("mmcycle");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let faults = [
        MattermostFault::Silence,
        MattermostFault::Deaf,
        MattermostFault::Drop,
        MattermostFault::Close(1001),
    ];
    let mut ids = vec![];
    for fault in faults.iter().cycle().take(8) {
        let before = rig.mock.mattermost_stats().connections;
        rig.mock.mattermost_set_fault(fault.clone());
        ids.extend(rig.mock.mattermost_emit(5));
        connected(&rig, before);
        // A server replaying what it buffered: the same posts again, stored once.
        rig.mock.mattermost_redeliver(5);
    }
    // An upgrade refused for a while, then accepted.
    rig.mock.mattermost_refuse_upgrade(Some(503));
    let before = rig.mock.mattermost_stats().connections;
    rig.mock.mattermost_set_fault(MattermostFault::Drop);
    ids.extend(rig.mock.mattermost_emit(5));
    wait_for(Duration::from_secs(20), "a refused upgrade", || {
        (rig.mock.mattermost_stats().upgrades_refused > 0).then_some(())
    });
    rig.mock.mattermost_refuse_upgrade(None);
    connected(&rig, before);
    wait_stored(&rig, &ids, Duration::from_secs(60));
    assert_eq!(stored(&rig).len(), ids.len(), "each once");
    assert!(rig.mock.mattermost_stats().redeliveries > 0);
    sigterm(&mut gw);
}

#[test]
fn a_reply_goes_into_its_thread_once_across_a_lost_answer() {
    let rig = rig("mmreply");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    assert!(rig.wait_api(&mut gw));
    let channel = MattermostConfig::default().channels[0].id.clone();
    let root = rig.mock.mattermost_emit(1).remove(0);
    // Posted, and the answer lost: the repeat carries the same pending_post_id, and the
    // server answers it with the first post, whatever the message's policy.
    rig.mock
        .set_send_fault(Platform::Mattermost, SendFault::ResetAfterProcessing(1));
    let message = rig
        .submit(
            "mm-reply-1",
            ("mm", &format!("channel:{channel}")),
            "on it",
            Some(&root),
            Policy::AtMostOnce,
        )
        .unwrap();
    rig.wait_drained(&gw, Duration::from_secs(30));
    let m = rig.message(&message.id);
    assert_eq!(m.state, State::Sent, "{m:?}\n{}", rig.log());
    let posts: Vec<_> = rig
        .posts()
        .into_iter()
        .filter(|p| p.content == "on it")
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].reply_to.as_deref(), Some(root.as_str()));
    assert_eq!(m.platform_id.as_deref(), Some(posts[0].message_id.as_str()));
    let attempts = rig
        .mock
        .send_attempts()
        .into_iter()
        .filter(|a| a.platform == Platform::Mattermost)
        .count();
    assert!(attempts >= 2, "the lost answer was asked again");
    // The bot's own post comes back as an event, marked as its own.
    wait_for(Duration::from_secs(10), "the echo stored", || {
        rig.events("mm")
            .into_iter()
            .find(|e| e["data"]["own"] == true)
            .map(|_| ())
    });
    sigterm(&mut gw);
}

#[test]
fn a_revoked_token_ends_the_adapter_with_exit_78_and_the_fix() {
    let rig = rig("mmrevoked");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    rig.mock.mattermost_revoke_token(true);
    rig.mock.mattermost_set_fault(MattermostFault::Drop);
    let status = wait_for(Duration::from_secs(30), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    let log = rig.log();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(log.contains("token-env"), "{log}");
    assert!(
        !log.contains(&MattermostConfig::default().token),
        "the token never logged"
    );
}

/// doctor's HSV020 findings for the rig's profile, with the token in its `.env` (no manager
/// is asked: the bus addresses lead nowhere, which doctor reports as HSV000 and goes on).
fn hsv020(rig: &Rig) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let env = rig.profile_home().join(".env");
    let text = format!(
        "{TOKEN_VAR}={}\nOB_DC_TOKEN=dc\nOB_QQ_SECRET=qq\n",
        MattermostConfig::default().token
    );
    std::fs::write(&env, text).unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = rig
        .hermes()
        .args(["doctor", "--json"])
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/mm-system-bus",
        )
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/mm-user-bus",
        )
        .env("XDG_RUNTIME_DIR", "/nonexistent/mm-runtime")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(&MattermostConfig::default().token), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["id"] == "HSV020")
        .map(|f| f.to_string())
        .collect()
}

#[test]
fn doctor_names_a_revoked_token_with_the_fix() {
    let rig = rig("mmdoctor");
    assert!(hsv020(&rig).is_empty(), "{:?}", hsv020(&rig));
    rig.mock.mattermost_revoke_token(true);
    let found = hsv020(&rig);
    assert!(
        found
            .iter()
            .any(|f| f.contains("HTTP 401") && f.contains("token-env")),
        "{found:?}"
    );
}
