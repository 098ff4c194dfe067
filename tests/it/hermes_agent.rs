//! The real Hermes agent behind the gateway, end to end: a message from each platform is
//! answered on that platform once, in its chat, as a reply where the platform has replies;
//! through the Relay and through the OpenAI-compatible bridge to Hermes's API server; across
//! SIGKILLs of Hermes and of the gateway mid-turn, busy chats, long replies, a busy agent (429)
//! and a failed turn.

use std::time::Duration;

use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::{FeishuMessage, Platform, Post};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::harness::free_port;
use crate::harness::wait_for;
use crate::hermes_rig::{signal, stop, Rig, WX_PEER};

/// One message from each platform, each answered once in its chat. Returns nothing; panics
/// with the logs when an answer does not come.
fn each_platform_is_answered_once(rig: &Rig, tag: &str) {
    let text = |kind: &str| format!("hello {kind} {tag}");
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        &format!("q-{tag}"),
        json!({"author": {"member_openid": "MQ"}, "content": format!(" {}", text("qq")),
               "group_openid": "GQ", "id": format!("msg-q-{tag}")}),
    );
    let discord_id = format!("11{}", tag.bytes().map(u32::from).sum::<u32>());
    rig.discord.emit_dispatch(
        "MESSAGE_CREATE",
        &format!("d-{tag}"),
        json!({"id": discord_id, "channel_id": "2001", "guild_id": "3001",
               "author": {"id": "4001", "username": "ann"}, "content": text("discord")}),
    );
    rig.mock.feishu_emit_message(FeishuMessage {
        chat_id: "oc_ha1".into(),
        chat_type: "group".into(),
        sender_open_id: "ou_ha1".into(),
        text: text("feishu"),
    });
    let tg_chat = TelegramConfig::default().chats[0];
    rig.mock.telegram_emit_text(tg_chat, &text("telegram"));
    rig.mock.weixin_emit_text(WX_PEER, &text("weixin"));

    let one = |kind: &str, platform: Platform| -> Post {
        let want = format!("echo: {}", text(kind));
        let posts = rig.wait_post(&want);
        assert_eq!(posts.len(), 1, "{kind}: answered once: {posts:?}");
        assert_eq!(posts[0].platform, platform, "{kind}: on its own platform");
        posts[0].clone()
    };
    let qq = one("qq", Platform::Qq);
    assert_eq!(qq.target_id, "GQ");
    assert_eq!(
        qq.reply_to.as_deref(),
        Some(format!("msg-q-{tag}").as_str())
    );
    let dc = one("discord", Platform::Discord);
    assert_eq!(dc.target_id, "2001");
    assert_eq!(dc.reply_to.as_deref(), Some(discord_id.as_str()));
    let fs = one("feishu", Platform::Feishu);
    assert!(fs.reply_to.is_some(), "a reply: {fs:?}");
    let tg = one("telegram", Platform::Telegram);
    assert_eq!(tg.target_id, tg_chat.to_string());
    assert!(tg.reply_to.is_some(), "{tg:?}");
    let wx = one("weixin", Platform::Weixin);
    assert_eq!(wx.target_id, WX_PEER);
}

fn count(rig: &Rig, text: &str) -> usize {
    rig.posts()
        .iter()
        .filter(|p| p.content.contains(text))
        .count()
}

/// Wait until the model has been asked about `text` (the turn is running).
fn wait_model_asked(rig: &Rig, text: &str) {
    wait_for(
        Duration::from_secs(30),
        &format!("the model to be asked {text:?}"),
        || {
            rig.model_calls()
                .iter()
                .any(|c| {
                    c["kind"] == "chat" && c["last_user"].as_str().is_some_and(|u| u.contains(text))
                })
                .then_some(())
        },
    );
}

#[test]
fn hermes_through_the_relay_answers_every_platform_once_across_kills() {
    let port = free_port();
    let rig = Rig::new(
        "harelay",
        &format!("[agent]\nkind = \"hermes-relay\"\nport = {port}\nturn-timeout = \"60s\"\n"),
    );
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let mut hermes = rig.hermes_relay(port);
    wait_for(Duration::from_secs(30), "Hermes to dial in", || {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?,
        )
        .ok()?;
        (s["agent"]["connected"] == true).then_some(())
    });
    each_platform_is_answered_once(&rig, "r1");

    // Two more to one chat while its turn runs, and one to another chat meanwhile: each is
    // answered, in order, and the other chat does not wait.
    let tg_chat = TelegramConfig::default().chats[0];
    rig.mock.telegram_emit_text(tg_chat, "slow:2 busy one");
    rig.mock.telegram_emit_text(tg_chat, "busy two");
    rig.mock.telegram_emit_text(tg_chat, "busy three");
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-other",
        json!({"author": {"member_openid": "MQ"}, "content": " meanwhile",
               "group_openid": "GQ2", "id": "msg-q-other"}),
    );
    let three = rig.wait_post("echo: busy three");
    let one = rig.wait_post("echo: slow:2 busy one");
    // The chat showed Telegram's typing indicator while its turns ran (Hermes sends none
    // through the Relay; the connector does, from the turn).
    let typing = rig.mock.typing();
    assert!(
        typing.iter().any(|(p, chat, at)| *p == Platform::Telegram
            && *chat == tg_chat.to_string()
            && *at < one[0].received_at),
        "{typing:?}"
    );
    let two = rig.wait_post("echo: busy two");
    let other = rig.wait_post("echo: meanwhile");
    assert!(one[0].received_at < two[0].received_at && two[0].received_at < three[0].received_at);
    assert!(
        other[0].received_at < one[0].received_at,
        "the other chat did not wait"
    );
    assert_eq!(
        [one.len(), two.len(), three.len(), other.len()],
        [1, 1, 1, 1]
    );

    // A reply longer than QQ takes arrives in pieces, in order.
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-long",
        json!({"author": {"member_openid": "MQ"}, "content": " long:4500",
               "group_openid": "GLONG", "id": "msg-q-long"}),
    );
    let pieces = wait_for(Duration::from_secs(60), "the long reply's pieces", || {
        let p: Vec<Post> = rig
            .posts()
            .into_iter()
            .filter(|p| p.target_id == "GLONG")
            .collect();
        let len: usize = p.iter().map(|p| p.content.chars().count()).sum();
        (len >= 4500).then_some(p)
    });
    assert!(pieces.len() >= 3, "{} pieces", pieces.len());
    let joined: String = pieces.iter().map(|p| p.content.as_str()).collect();
    let expected: String = (0..450).map(|i| format!("{i:04}abcdef")).collect();
    assert_eq!(joined, expected, "whole and in order");

    // Hermes killed mid-turn: the message is answered once it is back, and so is one that came
    // while it was away.
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-kill",
        json!({"author": {"member_openid": "MQ"}, "content": " slow:3 hermes-killed",
               "group_openid": "GQ", "id": "msg-q-kill"}),
    );
    wait_model_asked(&rig, "hermes-killed");
    signal(&mut hermes, Signal::SIGKILL);
    rig.mock
        .telegram_emit_text(tg_chat, "while hermes was away");
    let mut hermes = rig.hermes_relay(port);
    rig.wait_post("hermes-killed");
    rig.wait_post("echo: while hermes was away");

    // The gateway killed mid-turn.
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-gw",
        json!({"author": {"member_openid": "MQ"}, "content": " slow:3 gateway-killed",
               "group_openid": "GQ", "id": "msg-q-gw"}),
    );
    wait_model_asked(&rig, "gateway-killed");
    signal(&mut gw, Signal::SIGKILL);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    rig.wait_post("gateway-killed");
    each_platform_is_answered_once(&rig, "r2");

    // Nothing was answered twice.
    for text in ["hermes-killed", "while hermes was away", "gateway-killed"] {
        assert_eq!(count(&rig, text), 1, "{text}\n{}", rig.hermes_log());
    }
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}

#[test]
fn hermes_through_its_api_server_answers_every_platform_once() {
    let api = free_port();
    let rig = Rig::new(
        "haapi",
        &format!(
            "[agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:{api}/v1\"\n\
             key-env = \"HA_API_KEY\"\nturn-timeout = \"60s\"\n\
             failure-notice = \"sorry, that turn failed\"\n"
        ),
    );
    let mut hermes = rig.hermes_api(api);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    each_platform_is_answered_once(&rig, "a1");
    // Discord's typing indicator in the channel while a longer turn ran.
    rig.discord.emit_dispatch(
        "MESSAGE_CREATE",
        "d-slow",
        json!({"id": "1177", "channel_id": "2002", "guild_id": "3001",
               "author": {"id": "4001", "username": "ann"}, "content": "slow:3 think"}),
    );
    let answer = rig.wait_post("echo: slow:3 think");
    let typing = rig.discord.typing();
    assert!(
        typing.iter().any(|(p, channel, at)| *p == Platform::Discord
            && channel == "2002"
            && *at < answer[0].received_at),
        "{typing:?}"
    );

    // More turns at once than Hermes runs (max_concurrent_runs = 2): the ones it refuses with
    // 429 are asked again, and every chat is answered.
    for i in 0..4 {
        rig.mock.emit_dispatch(
            "GROUP_AT_MESSAGE_CREATE",
            &format!("q-par-{i}"),
            json!({"author": {"member_openid": "MQ"}, "content": format!(" slow:1 parallel {i}"),
                   "group_openid": format!("GP{i}"), "id": format!("msg-q-par-{i}")}),
        );
    }
    for i in 0..4 {
        assert_eq!(rig.wait_post(&format!("parallel {i}")).len(), 1);
    }

    // A failed turn is not posted as a reply; the configured notice is.
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-fail",
        json!({"author": {"member_openid": "MQ"}, "content": " please fail",
               "group_openid": "GF", "id": "msg-q-fail"}),
    );
    let notice = rig.wait_post("sorry, that turn failed");
    assert_eq!(notice.len(), 1);
    assert_eq!(notice[0].target_id, "GF");
    assert!(rig
        .posts()
        .iter()
        .all(|p| !p.content.contains("failed after")));

    // The bridge (the gateway) killed mid-turn, and back while Hermes still runs the call:
    // the call asked again joins the running one (its Idempotency-Key), so the model is asked
    // once and the one answer says the message once, not the two calls merged.
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-api-gw",
        json!({"author": {"member_openid": "MQ"}, "content": " slow:5 bridge-killed",
               "group_openid": "GQ", "id": "msg-q-api-gw"}),
    );
    wait_model_asked(&rig, "bridge-killed");
    signal(&mut gw, Signal::SIGKILL);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let answer = rig.wait_post("bridge-killed");
    each_platform_is_answered_once(&rig, "a2");
    assert_eq!(count(&rig, "bridge-killed"), 1, "{}", rig.log());
    assert_eq!(
        answer[0].content.matches("bridge-killed").count(),
        1,
        "{answer:?}"
    );
    let asked = rig
        .model_calls()
        .iter()
        .filter(|c| {
            c["kind"] == "chat"
                && c["last_user"]
                    .as_str()
                    .is_some_and(|u| u.contains("bridge-killed"))
        })
        .count();
    assert_eq!(asked, 1, "the model was asked once\n{}", rig.hermes_log());
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}
