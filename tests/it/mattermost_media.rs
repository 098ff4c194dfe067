//! Files people attach to Mattermost posts reaching the agent: a real gateway process with a
//! Mattermost adapter and the Relay agent bridge, against the mock Mattermost in this
//! process. A photo and a PDF arrive as local files in the profile's media store with the
//! bytes that were attached, fetched by file id from the adapter's own server with its
//! token. Profile names start with `mmm`.

use std::fs;
use std::process::Child;

use hermes_svc::mock_platform::mattermost::{MattermostConfig, MattermostFault, MattermostFile};
use hermes_svc::mock_platform::MockConfig;
use serde_json::Value;

use crate::media_out::{pdf, photo, sha256};
use crate::outbox_rig::{sigterm, Rig};
use crate::relay::Agent;

const TOKEN_VAR: &str = "MMM_TOKEN";

/// A gateway with a Mattermost adapter `mm` and the Relay bridge, its agent greeted.
fn start(profile: &str) -> (Rig, Child, Agent) {
    let port = crate::harness::free_port();
    let extra = format!(
        "[[adapter]]\nname = \"mm\"\nkind = \"mattermost\"\nserver-url = \"{{base}}\"\n\
         token-env = \"{TOKEN_VAR}\"\nping-interval = \"1s\"\nack-timeout = \"500ms\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n{}[agent]\nkind = \"hermes-relay\"\n\
         port = {port}\n",
        crate::hermes_rig::OPEN
    );
    let rig = Rig::with_mock(profile, &extra, MockConfig::default());
    let config = MattermostConfig::default();
    let mut gw = rig.gateway_with_env(&[(TOKEN_VAR, config.token.as_str())]);
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_adapter(&gw, "mm");
    let agent = crate::relay::greeted(&rig, port);
    (rig, gw, agent)
}

/// The bot's channels: one chat each, so neither message waits on the other's answer.
fn channel(n: usize) -> String {
    MattermostConfig::default().channels[n].id.clone()
}

/// The `inbound` event the agent gets for a post of `files` in channel `n`.
fn inbound(rig: &Rig, agent: &mut Agent, n: usize, files: Vec<MattermostFile>) -> Value {
    rig.mock
        .mattermost_emit_files(&channel(n), "see attached", files);
    let frame = rig.rt.block_on(agent.next_of("inbound"));
    frame["event"].clone()
}

/// The stored file an event names: its path checked to be in the profile's store, its name
/// and bytes.
fn local_file(rig: &Rig, event: &Value, n: usize) -> (String, Vec<u8>) {
    let path = event["media_urls"][n]
        .as_str()
        .unwrap_or_else(|| panic!("a local path: {event}\n{}", rig.log()));
    let store = rig.profile_home().join("media");
    assert!(path.starts_with(store.to_str().unwrap()), "{path}");
    let name = path.rsplit('/').next().unwrap().to_owned();
    (name, fs::read(path).unwrap())
}

/// A photo in a direct message, then a PDF and a photo together in a channel: each reaches
/// the agent as a local file with the bytes attached, typed by what it is and named as it
/// was; every byte came through `GET /api/v4/files/{id}`, and the token is in no log.
#[test]
fn a_posts_files_reach_the_agent_as_local_files_with_their_bytes() {
    let (rig, mut gw, mut agent) = start("mmmfiles");
    let shot = MattermostFile::new("screen shot.png", "image/png", photo());
    let event = inbound(&rig, &mut agent, 1, vec![shot]);
    assert_eq!(event["message_type"], "photo", "{event}");
    assert_eq!(event["text"], "see attached");
    let (_, bytes) = local_file(&rig, &event, 0);
    assert_eq!(sha256(&bytes), sha256(&photo()), "the photo's bytes");

    let mut minutes = pdf();
    minutes.extend_from_slice(b"\nminutes of the meeting\n");
    let files = vec![
        MattermostFile::new("minutes.pdf", "application/pdf", minutes.clone()),
        MattermostFile::new("chart.png", "image/png", photo()),
    ];
    let event = inbound(&rig, &mut agent, 0, files);
    let (name, bytes) = local_file(&rig, &event, 0);
    assert_eq!(sha256(&bytes), sha256(&minutes), "the PDF's bytes");
    assert!(name.ends_with("_minutes.pdf"), "{name}");
    let (_, bytes) = local_file(&rig, &event, 1);
    assert_eq!(sha256(&bytes), sha256(&photo()), "the second file's bytes");

    let stats = rig.mock.mattermost_stats();
    assert_eq!(stats.file_downloads, 3, "{stats:?}");
    assert!(
        !rig.log().contains(&MattermostConfig::default().token),
        "no token in the log"
    );
    sigterm(&mut gw);
}

/// A post with a file made while the socket is half-open is never written to it: the
/// catch-up reads it back by REST (`posts?since=`, its `file_ids` and `metadata.files`), and
/// its file reaches the agent with its bytes all the same.
#[test]
fn a_file_posted_into_a_half_open_socket_is_caught_up_with_its_bytes() {
    let (rig, mut gw, mut agent) = start("mmmcatch");
    let before = rig.mock.mattermost_stats().connections;
    rig.mock.mattermost_set_fault(MattermostFault::Silence);
    let mut report = pdf();
    report.extend_from_slice(b"\nposted while the socket was silent\n");
    let file = MattermostFile::new("report.pdf", "application/pdf", report.clone());
    let event = inbound(&rig, &mut agent, 1, vec![file]);
    assert!(
        rig.mock.mattermost_stats().connections > before,
        "the post came by the catch-up after a reconnect"
    );
    assert_eq!(event["message_type"], "document", "{event}");
    let (name, bytes) = local_file(&rig, &event, 0);
    assert_eq!(
        sha256(&bytes),
        sha256(&report),
        "the caught-up file's bytes"
    );
    assert!(name.ends_with("_report.pdf"), "{name}");
    sigterm(&mut gw);
}
