//! Files people share on Slack reaching the agent: a real gateway process with a Slack
//! adapter and the Relay agent bridge, against the mock Slack in this process. A photo and a
//! PDF (one of them from a Slack Connect channel, looked up with `files.info`) arrive as local
//! files with their bytes; a file Slack will not give (a token without `files:read` gets the
//! HTML sign-in page) or one on another host is said in the message. Profile names start
//! with `sm`.

use std::fs;
use std::process::Child;

use hermes_svc::mock_platform::{MockConfig, SlackConfig, SlackFile};
use serde_json::Value;

use crate::media_out::{pdf, photo, sha256};
use crate::outbox_rig::{sigterm, Rig};
use crate::relay::Agent;

const APP_VAR: &str = "SM_APP_TOKEN";
const BOT_VAR: &str = "SM_BOT_TOKEN";
/// One channel per message: each is a chat of its own, so none waits on another's answer.
const CHANNELS: [&str; 4] = ["C0SMONE", "C0SMTWO", "C0SMTHREE", "C0SMFOUR"];

/// A gateway with a Slack adapter `sl` and the Relay bridge, its agent greeted.
fn start(profile: &str) -> (Rig, Child, Agent) {
    let port = crate::harness::free_port();
    let extra = format!(
        "[[adapter]]\nname = \"sl\"\nkind = \"slack\"\napp-token-env = \"{APP_VAR}\"\n\
         bot-token-env = \"{BOT_VAR}\"\napi-base = \"{{base}}\"\nping-interval = \"1s\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n{}[agent]\n\
         kind = \"hermes-relay\"\nport = {port}\n",
        crate::hermes_rig::OPEN
    );
    let slack = SlackConfig {
        channels: CHANNELS.iter().map(|c| (*c).to_owned()).collect(),
        ..SlackConfig::default()
    };
    let rig = Rig::with_mock(
        profile,
        &extra,
        MockConfig {
            slack,
            ..MockConfig::default()
        },
    );
    let config = SlackConfig::default();
    let mut gw = rig.gateway_with_env(&[
        (APP_VAR, config.app_token.as_str()),
        (BOT_VAR, config.bot_token.as_str()),
    ]);
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_adapter(&gw, "sl");
    let agent = crate::relay::greeted(&rig, port);
    (rig, gw, agent)
}

/// The `inbound` event the agent gets for a message of `files` in channel `n`.
fn inbound(rig: &Rig, agent: &mut Agent, n: usize, files: Vec<SlackFile>) -> Value {
    rig.mock
        .slack_emit_files(CHANNELS[n], "see attached", files);
    let frame = rig.rt.block_on(agent.next_of("inbound"));
    frame["event"].clone()
}

/// The stored file an event names: its path checked to be in the profile's store, its name
/// and bytes.
fn local_file(rig: &Rig, event: &Value) -> (String, Vec<u8>) {
    let path = event["media_urls"][0]
        .as_str()
        .unwrap_or_else(|| panic!("a local path: {event}\n{}", rig.log()));
    let store = rig.profile_home().join("media");
    assert!(path.starts_with(store.to_str().unwrap()), "{path}");
    let name = path.rsplit('/').next().unwrap().to_owned();
    (name, fs::read(path).unwrap())
}

/// A photo and a PDF reach the agent as local files with the bytes that were shared, typed
/// by what they are; a PDF from a Slack Connect channel (no URL in the event) is looked up
/// with `files.info` first.
#[test]
fn a_photo_and_a_pdf_reach_the_agent_as_local_files_with_their_bytes() {
    let (rig, mut gw, mut agent) = start("smfiles");
    let shot = SlackFile::new("screen shot.png", "image/png", photo());
    let event = inbound(&rig, &mut agent, 0, vec![shot]);
    assert_eq!(event["message_type"], "photo", "{event}");
    assert_eq!(event["text"], "see attached");
    let (_, bytes) = local_file(&rig, &event);
    assert_eq!(sha256(&bytes), sha256(&photo()), "the photo's bytes");

    let minutes = SlackFile::new("minutes.pdf", "application/pdf", pdf());
    let event = inbound(&rig, &mut agent, 1, vec![minutes]);
    assert_eq!(event["message_type"], "document", "{event}");
    let (name, bytes) = local_file(&rig, &event);
    assert_eq!(sha256(&bytes), sha256(&pdf()), "the PDF's bytes");
    assert!(name.ends_with("_minutes.pdf"), "{name}");
    assert_eq!(
        rig.mock.slack_stats().files_info_calls,
        0,
        "the event had the URLs"
    );

    let mut shared = pdf();
    shared.extend_from_slice(b"\nshared from another organisation\n");
    let connect = SlackFile::new("terms.pdf", "application/pdf", shared.clone()).connect();
    let event = inbound(&rig, &mut agent, 2, vec![connect]);
    let (_, bytes) = local_file(&rig, &event);
    assert_eq!(
        sha256(&bytes),
        sha256(&shared),
        "the Slack Connect file's bytes"
    );
    let stats = rig.mock.slack_stats();
    assert_eq!(stats.files_info_calls, 1, "{stats:?}");
    assert_eq!(
        (stats.file_downloads, stats.sign_in_pages),
        (3, 0),
        "{stats:?}"
    );
    sigterm(&mut gw);
}

/// What cannot be fetched is said in the message, never given as a file: a token without
/// `files:read` gets Slack's HTML sign-in page with a 200 (and `missing_scope` from
/// `files.info`), and a URL on another host is never asked for.
#[test]
fn a_file_slack_will_not_give_or_on_another_host_is_said_in_the_message() {
    let (rig, mut gw, mut agent) = start("smrefused");
    rig.mock.slack_set_files_read(false);
    let shot = SlackFile::new("shot.png", "image/png", photo());
    let event = inbound(&rig, &mut agent, 0, vec![shot]);
    let text = event["text"].as_str().unwrap();
    assert!(
        text.starts_with("see attached\n\n[a photo that could not be fetched:")
            && text.contains("sign-in page"),
        "{text}"
    );
    assert_eq!(event["media_urls"], serde_json::json!([]), "{event}");
    assert_eq!(rig.mock.slack_stats().sign_in_pages, 1);

    let connect = SlackFile::new("terms.pdf", "application/pdf", pdf()).connect();
    let event = inbound(&rig, &mut agent, 1, vec![connect]);
    let text = event["text"].as_str().unwrap();
    assert!(
        text.contains("could not be fetched") && text.contains("files:read"),
        "{text}"
    );

    // The mock's own port under another name: served if it were asked, and never asked.
    rig.mock.slack_set_files_read(true);
    let elsewhere = format!("http://localhost:{}", rig.mock.addr().port());
    let far = SlackFile::new("far.pdf", "application/pdf", pdf()).at(&elsewhere);
    let event = inbound(&rig, &mut agent, 2, vec![far]);
    let text = event["text"].as_str().unwrap();
    assert!(
        text.contains("could not be fetched") && text.contains("not on the platform's own hosts"),
        "{text}"
    );
    let stats = rig.mock.slack_stats();
    assert_eq!(
        (stats.file_downloads, stats.sign_in_pages),
        (0, 1),
        "{stats:?}"
    );
    assert!(
        !rig.log().contains(&SlackConfig::default().bot_token),
        "no token in the log"
    );
    sigterm(&mut gw);
}
