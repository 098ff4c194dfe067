//! DingTalk's official Stream client, `dingtalk-stream` from PyPI (pinned and installed by
//! scripts/official-client-dingtalk; what Hermes 0.19.0 uses), against the mock DingTalk in
//! this process: it opens a connection with `connections/open`, receives a robot message,
//! acknowledges it, answers the server's SYSTEM pings, fetches an access token and answers
//! through the message's session webhook. What the mock is checked against is the client the platform ships, not our
//! adapter.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_svc::mock_platform::dingtalk::DingTalkConfig;
use hermes_svc::mock_platform::{MockConfig, Platform};

use crate::harness::{scratch_dir, try_wait_for, wait_for};
use crate::mock_runtime::{mock_runtime, start_mock};

/// The bot the official client runs: every robot message is answered with `echo: TEXT`
/// through its session webhook (`reply_text`), after an access token was fetched.
const BOT: &str = r#"
import os, sys, logging
import dingtalk_stream
from dingtalk_stream import AckMessage, ChatbotMessage

class Echo(dingtalk_stream.ChatbotHandler):
    async def process(self, callback):
        msg = ChatbotMessage.from_dict(callback.data)
        token = self.dingtalk_client.get_access_token()
        print("token", bool(token), flush=True)
        self.reply_text("echo: " + msg.text.content.strip(), msg)
        return AckMessage.STATUS_OK, "OK"

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
credential = dingtalk_stream.Credential(os.environ["DT_CLIENT_ID"], os.environ["DT_CLIENT_SECRET"])
client = dingtalk_stream.DingTalkStreamClient(credential)
client.register_callback_handler(ChatbotMessage.TOPIC, Echo())
client.start_forever()
"#;

/// The official client's python, installed on first use.
fn python() -> String {
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/official-client-dingtalk"
    ))
    .stderr(Stdio::inherit())
    .output()
    .expect("scripts/official-client-dingtalk runs");
    assert!(out.status.success(), "installing dingtalk-stream failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .last()
        .expect("the python's path")
        .trim()
        .to_owned()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_official_client_connects_receives_acks_and_answers() {
    let config = DingTalkConfig {
        client_id: "dingofficialclient".to_owned(),
        robot_code: "dingofficialclient".to_owned(),
        server_ping: Some(Duration::from_millis(200)),
        ..DingTalkConfig::default()
    };
    let rt = mock_runtime();
    let mock = start_mock(
        &rt,
        MockConfig {
            dingtalk: config.clone(),
            ..MockConfig::default()
        },
    );
    let dir = scratch_dir("dtofficial");
    let log = dir.path().join("client.log");
    let client = Command::new(python())
        .args(["-c", BOT])
        .env("DINGTALK_OPENAPI_ENDPOINT", mock.http_base())
        .env("DT_CLIENT_ID", &config.client_id)
        .env("DT_CLIENT_SECRET", &config.client_secret)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the official client starts");
    let _client = Killed(client);
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for(
        Duration::from_secs(60),
        "the official client's connection",
        || (mock.dingtalk_stats().live_connections >= 1).then_some(()),
    );
    let id = mock.dingtalk_emit(1).remove(0);
    let acked = try_wait_for(Duration::from_secs(30), || {
        mock.dingtalk_events()[0].acked_at.map(|_| ())
    });
    assert!(
        acked.is_some(),
        "no ack: {:?}\n{:?}\n{}",
        mock.dingtalk_stats(),
        mock.dingtalk_events(),
        said()
    );
    let post = wait_for(
        Duration::from_secs(30),
        "the official client's answer",
        || {
            mock.posts()
                .into_iter()
                .find(|p| p.platform == Platform::DingTalk)
        },
    );
    assert_eq!(post.content, "echo: dingtalk message 1", "{}", said());
    assert_eq!(post.target_id, config.groups[0]);
    let s = mock.dingtalk_stats();
    assert_eq!(
        (s.tickets_issued, s.tickets_refused, s.stray_acks),
        (1, 0, 0),
        "{s:?}\n{}",
        said()
    );
    assert!(s.tokens_issued >= 1, "{s:?}");
    // The server's SYSTEM pings are answered, echoing their data.
    wait_for(Duration::from_secs(10), "a SYSTEM ping answered", || {
        (mock.dingtalk_stats().system_pongs >= 1).then_some(())
    });
    assert_eq!(mock.dingtalk_events()[0].msg_id, id);
    assert_eq!(
        mock.dingtalk_events()[0].deliveries.len(),
        1,
        "acked in time, pushed once"
    );
}
