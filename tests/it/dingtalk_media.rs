//! Pictures someone sends a DingTalk robot reaching the agent: a real gateway process with a
//! DingTalk adapter (Stream mode) and the Relay agent bridge, against the mock DingTalk in
//! this process. The message's `downloadCode` is exchanged for a link at
//! `messageFiles/download` with the access token, and the link (on the mock, standing for
//! DingTalk's file host) is fetched into the media store; a link on a host that is not
//! DingTalk's is never fetched and is said in the message. Profile names start with `dm`.

use std::fs;
use std::process::Child;
use std::time::Duration;

use hermes_svc::mock_platform::dingtalk::DingTalkConfig;
use hermes_svc::mock_platform::MockConfig;
use serde_json::Value;

use crate::media_out::{photo, sha256};
use crate::outbox_rig::{sigterm, Rig};
use crate::relay::Agent;

const SECRET_VAR: &str = "DM_CLIENT_SECRET";

/// A gateway with a DingTalk adapter `dt` and the Relay bridge, its agent greeted. The app is
/// the profile's own: token locks are machine-wide, and rigs run side by side.
fn start(profile: &str) -> (Rig, Child, Agent) {
    let port = crate::harness::free_port();
    let id = format!("dingtest{profile}");
    let config = DingTalkConfig {
        client_id: id.clone(),
        robot_code: id.clone(),
        ack_timeout: Duration::from_secs(60),
        ..DingTalkConfig::default()
    };
    let extra = format!(
        "[[adapter]]\nname = \"dt\"\nkind = \"dingtalk\"\nclient-id = \"{id}\"\n\
         secret-env = \"{SECRET_VAR}\"\napi-base = \"{{base}}\"\nping-interval = \"1s\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n{}[agent]\n\
         kind = \"hermes-relay\"\nport = {port}\n",
        crate::hermes_rig::OPEN
    );
    let rig = Rig::with_mock(
        profile,
        &extra,
        MockConfig {
            dingtalk: config,
            ..MockConfig::default()
        },
    );
    let secret = DingTalkConfig::default().client_secret;
    let mut gw = rig.gateway_with_env(&[(SECRET_VAR, secret.as_str())]);
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_adapter(&gw, "dt");
    let agent = crate::relay::greeted(&rig, port);
    (rig, gw, agent)
}

/// The `inbound` event the agent gets for a picture of `bytes` from the first staff member in
/// the first group.
fn picture(rig: &Rig, agent: &mut Agent, bytes: Vec<u8>) -> Value {
    let c = DingTalkConfig::default();
    rig.mock
        .dingtalk_emit_picture(&c.groups[0], &c.staff[0], bytes);
    let frame = rig.rt.block_on(agent.next_of("inbound"));
    frame["event"].clone()
}

/// A picture reaches the agent as a stored file with the bytes that were sent, fetched once
/// through one link.
#[test]
fn a_picture_reaches_the_agent_as_a_stored_file_with_its_bytes() {
    let (rig, mut gw, mut agent) = start("dmpicture");
    let event = picture(&rig, &mut agent, photo());
    assert_eq!(event["message_type"], "photo", "{event}");
    let path = event["media_urls"][0]
        .as_str()
        .unwrap_or_else(|| panic!("a local path: {event}\n{}", rig.log()));
    let store = rig.profile_home().join("media");
    assert!(path.starts_with(store.to_str().unwrap()), "{path}");
    let bytes = fs::read(path).unwrap();
    assert_eq!(sha256(&bytes), sha256(&photo()), "the picture's bytes");
    let stats = rig.mock.dingtalk_stats();
    assert_eq!(
        (stats.file_links, stats.file_downloads),
        (1, 1),
        "{stats:?}"
    );
    sigterm(&mut gw);
}

/// A link DingTalk's answer points off its hosts (here: a host that is neither DingTalk's nor
/// the API base) is never fetched; the agent is told a picture came and could not be.
#[test]
fn a_link_off_dingtalk_s_hosts_is_not_fetched_and_is_said() {
    let (rig, mut gw, mut agent) = start("dmoffhost");
    rig.mock
        .dingtalk_set_file_host(Some("https://files.example.invalid".into()));
    let event = picture(&rig, &mut agent, photo());
    let text = event["text"].as_str().unwrap_or("");
    assert!(
        text.contains("could not be fetched") && text.contains("files.example.invalid"),
        "{event}"
    );
    assert_eq!(event["media_urls"], serde_json::json!([]), "{event}");
    let stats = rig.mock.dingtalk_stats();
    assert_eq!(
        (stats.file_links, stats.file_downloads),
        (1, 0),
        "{stats:?}"
    );
    sigterm(&mut gw);
}
