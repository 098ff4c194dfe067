//! Files out to Matrix and Slack, through a real gateway process (`media_out.rs` does Telegram
//! and Discord): a file put in through the API reaches the mock homeserver's room and the
//! mock Slack channel natively, with the same bytes, once; and across a SIGKILL between the
//! post and the outbox's record of its answer, Matrix's transaction ids keep it one event
//! (the upload made again, an orphan), and Slack, which has no key, has one post and the
//! message `unknown` under at-most-once. Profile names start with `mm`.

use std::process::Child;
use std::time::Duration;

use hermes_svc::gateway::outbox::State;
use hermes_svc::mock_platform::{MatrixConfig, MockConfig, Platform, SlackConfig};

use crate::media_out::{body, id_of, pdf, photo, posts_of, sha256, submit, upload};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const MX_TOKEN: &str = "MM_MX_TOKEN";

/// The outbox rig with a Matrix adapter `mx` against the mock homeserver.
fn matrix_rig(profile: &str) -> Rig {
    let config = MatrixConfig::default();
    let extra = format!(
        "[[adapter]]\nname = \"mx\"\nkind = \"matrix\"\nhomeserver = \"{{base}}\"\n\
         user-id = \"{}\"\ntoken-env = \"{MX_TOKEN}\"\npoll-timeout = \"1s\"\n\
         poll-grace = \"1s\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n",
        config.user_id
    );
    let mock = MockConfig {
        matrix: config,
        ..MockConfig::default()
    };
    Rig::with_mock(profile, &extra, mock)
}

fn matrix_gateway(rig: &Rig, faults: &str) -> Child {
    let token = MatrixConfig::default().access_token;
    rig.gateway_with(&[(MX_TOKEN, &token)], faults)
}

/// The room the mock's bot is in, as a target.
fn room() -> String {
    format!("room:{}", MatrixConfig::default().rooms[0])
}

#[test]
fn files_through_the_api_reach_the_matrix_room_as_events_with_their_bytes_once() {
    let rig = matrix_rig("mmfiles");
    let mut gw = matrix_gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    let (photo, pdf) = (photo(), pdf());
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    let room = room();
    submit(
        &rig,
        "mx-files",
        ("mx", &room),
        "two files",
        &[chart, report],
    );

    // One event per file: the photo an m.image with the text as its caption, the PDF an
    // m.file with no caption.
    let first = posts_of(&rig, "two files", 1);
    assert_eq!(first[0].platform, Platform::Matrix);
    let f = &first[0].files[0];
    assert_eq!(
        (f.field.as_str(), f.filename.as_deref(), f.sha256.as_str()),
        ("m.image", Some("chart.png"), sha256(&photo).as_str())
    );
    let second = posts_of(&rig, "", 1);
    let f = &second[0].files[0];
    assert_eq!(
        (f.field.as_str(), f.filename.as_deref(), f.sha256.as_str()),
        ("m.file", Some("report.pdf"), sha256(&pdf).as_str())
    );

    rig.wait_drained(&gw, Duration::from_secs(30));
    assert_eq!(rig.posts().len(), 2, "once each");
    assert_eq!(rig.mock.matrix_stats().uploaded, 2, "one upload each");
    let message = rig.message(&id_of(&rig, "mx-files"));
    assert_eq!(message.state, State::Sent);
    assert_eq!(
        message.platform_id.as_deref(),
        Some(first[0].message_id.as_str())
    );
    sigterm(&mut gw);
}

/// Killed after the homeserver took the upload and the event and before the outbox recorded
/// the answer: the next life uploads the file again (an orphan copy) and sends the event
/// under the same transaction id, which the homeserver answers with the event it has.
#[test]
fn a_sigkill_between_the_event_and_its_record_leaves_one_matrix_event() {
    let rig = matrix_rig("mmkill");
    let photo = photo();
    let key = "kill-mx";
    let mut gw = matrix_gateway(&rig, &format!("kill:outbox-answered:{key}"));
    assert!(rig.wait_api(&mut gw));
    let chart = upload(&rig, "chart.png", &photo);
    let room = room();
    // The answer may be lost to the kill: the message is journalled before the worker sends it.
    let body = body(key, ("mx", &room), key, &[chart]);
    let _ = rig.rt.block_on(rig.client().submit(&body));
    killed_by_fault(&mut gw, Duration::from_secs(30));
    assert_eq!(rig.mock.matrix_stats().uploaded, 1);

    let mut gw = matrix_gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let posts = posts_of(&rig, key, 1);
    assert_eq!(posts.len(), 1, "one event");
    assert_eq!(posts[0].files[0].sha256, sha256(&photo));
    let stats = rig.mock.matrix_stats();
    assert_eq!(
        (stats.uploaded, stats.txn_hits),
        (2, 1),
        "the upload again, an orphan; the event answered from its transaction id"
    );
    let message = rig.message(&id_of(&rig, key));
    assert_eq!(message.state, State::Sent);
    assert_eq!(
        message.platform_id.as_deref(),
        Some(posts[0].message_id.as_str())
    );
    sigterm(&mut gw);
}

const SL_APP: &str = "MM_SL_APP_TOKEN";
const SL_BOT: &str = "MM_SL_BOT_TOKEN";

/// The outbox rig with a Slack adapter `sl` against the mock Slack.
fn slack_rig(profile: &str) -> Rig {
    let extra = format!(
        "[[adapter]]\nname = \"sl\"\nkind = \"slack\"\napp-token-env = \"{SL_APP}\"\n\
         bot-token-env = \"{SL_BOT}\"\napi-base = \"{{base}}\"\nping-interval = \"1s\"\n\
         ack-timeout = \"500ms\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    );
    Rig::new(profile, &extra)
}

fn slack_gateway(rig: &Rig, faults: &str) -> Child {
    let config = SlackConfig::default();
    let env = [(SL_APP, &*config.app_token), (SL_BOT, &*config.bot_token)];
    rig.gateway_with(&env, faults)
}

fn channel() -> String {
    format!("channel:{}", SlackConfig::default().channels[0])
}

#[test]
fn files_through_the_api_reach_the_slack_channel_in_one_post_with_their_bytes_once() {
    let rig = slack_rig("mmslack");
    let mut gw = slack_gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    let (photo, pdf) = (photo(), pdf());
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    let to = channel();
    submit(&rig, "sl-files", ("sl", &to), "two files", &[chart, report]);

    let posts = posts_of(&rig, "two files", 1);
    assert_eq!(posts[0].platform, Platform::Slack);
    let sent: Vec<(Option<&str>, &str)> = posts[0]
        .files
        .iter()
        .map(|f| (f.filename.as_deref(), f.sha256.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            (Some("chart.png"), sha256(&photo).as_str()),
            (Some("report.pdf"), sha256(&pdf).as_str())
        ]
    );
    rig.wait_drained(&gw, Duration::from_secs(30));
    assert_eq!(rig.posts().len(), 1, "once");
    let stats = rig.mock.slack_stats();
    assert_eq!((stats.uploads, stats.files_shared), (2, 2));
    assert_eq!(rig.message(&id_of(&rig, "sl-files")).state, State::Sent);
    sigterm(&mut gw);
}

/// Killed after Slack shared the file and before the outbox recorded the answer: Slack has
/// no key to make a repeat safe, so the next life sends nothing more and the at-most-once
/// message is `unknown`, with one post.
#[test]
fn a_sigkill_between_the_share_and_its_record_leaves_one_slack_post_unknown() {
    let rig = slack_rig("mmslkill");
    let photo = photo();
    let key = "kill-sl";
    let mut gw = slack_gateway(&rig, &format!("kill:outbox-answered:{key}"));
    assert!(rig.wait_api(&mut gw));
    let chart = upload(&rig, "chart.png", &photo);
    let to = channel();
    let body = body(key, ("sl", &to), key, &[chart]);
    let _ = rig.rt.block_on(rig.client().submit(&body));
    killed_by_fault(&mut gw, Duration::from_secs(30));

    let mut gw = slack_gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let posts = posts_of(&rig, key, 1);
    assert_eq!(posts.len(), 1, "one post");
    assert_eq!(posts[0].files[0].sha256, sha256(&photo));
    assert_eq!(rig.mock.slack_stats().uploads, 1, "nothing sent again");
    assert_eq!(rig.message(&id_of(&rig, key)).state, State::Unknown);
    sigterm(&mut gw);
}
