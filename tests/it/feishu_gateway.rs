//! A real gateway process with a Feishu adapter against the mock Feishu in this process
//! (the outbox rig's, with an `fs` adapter added): killed between the spool append and the
//! ack, two profiles of one app, and a reply through the agent API across a platform 500 and
//! two crashes. Profile names start with `fs`.

use std::fs;
use std::process::Child;
use std::time::Duration;

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::gateway::spool;
use hermes_svc::mock_platform::{FeishuConfig, Platform, SendFault};

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const SECRET_VAR: &str = "FS_APP_SECRET";

/// The outbox rig with a Feishu adapter `fs` for the mock's app, and token locks of its own.
fn rig(profile: &str) -> Rig {
    let rig = Rig::new(profile, "");
    let toml = rig.profile_home().join("gateway.toml");
    let mut text = fs::read_to_string(&toml).unwrap();
    text.push_str(&feishu_adapter(&rig.mock.http_base()));
    fs::write(&toml, text).unwrap();
    rig
}

fn feishu_adapter(base: &str) -> String {
    format!(
        "\n[[adapter]]\nname = \"fs\"\nkind = \"feishu\"\napp-id = \"{}\"\n\
         secret-env = \"{SECRET_VAR}\"\napi-base = \"{base}\"\nbackoff-min = \"200ms\"\n\
         backoff-max = \"1s\"\n",
        FeishuConfig::default().app_id
    )
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    let locks = rig.home.path().join("locks");
    let secret = FeishuConfig::default().app_secret;
    let mut env = vec![
        (SECRET_VAR, secret.as_str()),
        ("HERMES_LOCK_DIR", locks.to_str().unwrap()),
    ];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

fn connected(rig: &Rig, before: u64) {
    wait_for(Duration::from_secs(20), "the Feishu connection", || {
        let s = rig.mock.feishu_stats();
        (s.connections > before && s.live_connections >= 1).then_some(())
    });
}

fn stored(rig: &Rig) -> Vec<String> {
    spool::read(&rig.profile_home().join("inbox"), None)
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

#[test]
fn killed_between_the_spool_append_and_the_ack_the_event_comes_again_and_is_stored_once() {
    let rig = rig("fskill");
    let mut gw = gateway(&rig, "kill:feishu-stored");
    connected(&rig, 0);
    let id = rig.mock.feishu_emit(1).remove(0);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    // Stored, and the platform never heard of it: the ack comes only after the append.
    assert_eq!(stored(&rig), vec![id.clone()], "{}", rig.log());
    assert!(
        rig.mock.feishu_acks().is_empty(),
        "{:?}",
        rig.mock.feishu_acks()
    );

    let before = rig.mock.feishu_stats().connections;
    let mut gw = gateway(&rig, "");
    connected(&rig, before);
    // The platform pushes it again when its ack does not come (3 s in the mock).
    wait_for(Duration::from_secs(30), "the redelivery acked", || {
        rig.mock.feishu_unacked().is_empty().then_some(())
    });
    let event = &rig.mock.feishu_events()[0];
    assert!(event.deliveries >= 2, "{event:?}");
    assert_eq!(stored(&rig), vec![id], "stored once");
    sigterm(&mut gw);
}

#[test]
fn a_second_profile_with_the_same_app_id_exits_78() {
    let rig = rig("fsone");
    let mut first = gateway(&rig, "");
    connected(&rig, 0);
    // Another profile of the same home, with the same app and a different secret variable.
    let other = rig.home.path().join("profiles/fstwo");
    fs::create_dir_all(&other).unwrap();
    fs::write(
        other.join("gateway.toml"),
        feishu_adapter(&rig.mock.http_base()),
    )
    .unwrap();
    let locks = rig.home.path().join("locks");
    let out = rig
        .hermes()
        .args(["gateway", "run", "--profile", "fstwo"])
        .env(SECRET_VAR, "another-secret")
        .env("HERMES_LOCK_DIR", &locks)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("fs") && stderr.contains("already held"),
        "{stderr}"
    );
    assert!(!stderr.contains("another-secret"), "{stderr}");
    // The first one never noticed.
    assert_eq!(rig.mock.feishu_stats().connections, 1);
    sigterm(&mut first);
}

#[test]
fn a_reply_reaches_feishu_once_across_a_500_and_two_crashes() {
    let rig = rig("fsreply");
    let chat = FeishuConfig::default().chat_id;
    rig.mock.feishu_emit(1);
    let om = rig.mock.feishu_events()[0].message_id.clone().unwrap();
    let key = "fs-reply-1";
    let text = "收到，马上处理";
    let kill = format!("kill:outbox-answered:{key}");

    // First life: the platform answers 500, and the gateway dies before recording it.
    rig.mock
        .set_send_fault(Platform::Feishu, SendFault::ServerError(1));
    let mut gw = gateway(&rig, &kill);
    assert!(rig.wait_api(&mut gw));
    let submitted = rig.submit(
        key,
        ("fs", &format!("chat:{chat}")),
        text,
        Some(&om),
        Policy::AtMostOnce,
    );
    let id = submitted.unwrap().id;
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(rig.posts().len(), 0);

    // Second life: the platform posts it, and the gateway dies before recording that.
    let mut gw = gateway(&rig, &kill);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(rig.posts().len(), 1);

    // Third life: sent again with the same uuid, which the platform drops as a repeat.
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let m = rig.message(&id);
    assert_eq!(m.state, State::Sent, "{m:?}");
    let posts = rig.posts();
    assert_eq!(posts.len(), 1, "posted once: {posts:?}");
    let post = &posts[0];
    assert_eq!(post.platform, Platform::Feishu);
    assert_eq!(
        (post.content.as_str(), post.reply_to.as_deref()),
        (text, Some(om.as_str()))
    );
    assert_eq!(m.platform_id.as_deref(), Some(post.message_id.as_str()));
    let attempts: Vec<_> = rig
        .mock
        .send_attempts()
        .into_iter()
        .filter(|a| a.platform == Platform::Feishu)
        .collect();
    assert_eq!(attempts.len(), 3, "a 500, a post, a repeat: {attempts:?}");
    sigterm(&mut gw);
}

/// A 1×1 PNG's first bytes: enough for the type to be read from them.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde";

/// What the agent is given for a Feishu message with a file that `emit` sends: its type, the
/// stored file's name and its bytes.
fn agent_gets(profile: &str, emit: impl FnOnce(&Rig)) -> (String, String, Vec<u8>) {
    let port = crate::harness::free_port();
    let extra = format!(
        "[[adapter]]\nname = \"fs\"\nkind = \"feishu\"\napp-id = \"{}\"\n\
         secret-env = \"OB_FS_SECRET\"\napi-base = \"{{base}}\"\n\n{}[agent]\n\
         kind = \"hermes-relay\"\nport = {port}\n",
        FeishuConfig::default().app_id,
        crate::hermes_rig::OPEN
    );
    let rig = Rig::new(profile, &extra);
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_adapter(&gw, "fs");
    let mut agent = crate::relay::greeted(&rig, port);
    emit(&rig);
    let inbound = rig.rt.block_on(agent.next_of("inbound"));
    let event = &inbound["event"];
    let path = event["media_urls"][0]
        .as_str()
        .unwrap_or_else(|| panic!("a local path: {inbound}\n{}", rig.log()));
    assert!(
        path.starts_with(rig.profile_home().join("media").to_str().unwrap()),
        "{path}"
    );
    let got = (
        event["message_type"].as_str().unwrap().to_owned(),
        path.rsplit('/').next().unwrap().to_owned(),
        fs::read(path).unwrap(),
    );
    sigterm(&mut gw);
    got
}

/// A Feishu image and file reach the agent as local files, fetched by the message's id and
/// the file's key with the app's tenant token ("获取消息中的资源文件"), each with the same bytes.
#[test]
fn an_image_and_a_file_reach_the_agent_fetched_by_message_and_key() {
    let (kind, _, bytes) = agent_gets("fsimage", |rig| {
        rig.mock.feishu_emit_image(PNG.to_vec());
    });
    assert_eq!(kind, "photo");
    assert_eq!(bytes, PNG, "the same bytes");
    let pdf = b"%PDF-1.4\nminutes of the meeting\n".to_vec();
    let sent = pdf.clone();
    let (kind, name, bytes) = agent_gets("fsfile", move |rig| {
        rig.mock.feishu_emit_file("minutes.pdf", sent);
    });
    assert_eq!(kind, "document");
    assert_eq!(bytes, pdf, "the same bytes");
    assert!(name.ends_with("_minutes.pdf"), "{name}");
}
