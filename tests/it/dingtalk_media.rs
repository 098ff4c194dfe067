//! A picture someone sends a DingTalk robot reaching the agent: a real gateway process with a
//! DingTalk adapter (Stream mode) and the Relay agent bridge, against the mock DingTalk in
//! this process. The message's `downloadCode` is exchanged for a link at
//! `messageFiles/download` with the access token, and the link (on the mock, standing for
//! DingTalk's file host) is fetched into the media store. Profile names start with `dm`.

use std::fs;
use std::time::Duration;

use hermes_svc::mock_platform::dingtalk::DingTalkConfig;
use hermes_svc::mock_platform::MockConfig;

use crate::media_out::{photo, sha256};
use crate::outbox_rig::{sigterm, Rig};

const SECRET_VAR: &str = "DM_CLIENT_SECRET";

/// A picture in a group reaches the agent as a stored file with the bytes that were sent,
/// fetched once through one link.
#[test]
fn a_picture_reaches_the_agent_as_a_stored_file_with_its_bytes() {
    let profile = "dmpicture";
    let port = crate::harness::free_port();
    let id = format!("dingtest{profile}");
    let config = DingTalkConfig {
        client_id: id.clone(),
        robot_code: id.clone(),
        ack_timeout: Duration::from_secs(60),
        ..DingTalkConfig::default()
    };
    let (group, staff) = (config.groups[0].clone(), config.staff[0].clone());
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
    let mut agent = crate::relay::greeted(&rig, port);

    rig.mock.dingtalk_emit_picture(&group, &staff, photo());
    let frame = rig.rt.block_on(agent.next_of("inbound"));
    let event = &frame["event"];
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
