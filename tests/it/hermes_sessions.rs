//! A chat's conversation goes on after the switch from Hermes's own gateway to hermes-svc
//! (`[agent] platform-ids = true`, issue 48): the real Hermes 0.19.0 first holds Telegram
//! itself (its own adapter, python-telegram-bot, against the mock's Bot API) and answers a DM
//! and a group; then it is stopped, its home moved into the agent's (as adopt moves it), the
//! gateway holds Telegram and Hermes runs behind the Relay (`hermes-svc agent run`). The next
//! message in each chat reaches the model with the earlier turn before it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::weixin::WeixinConfig;
use hermes_svc::mock_platform::{FeishuMessage, Platform};
use serde_json::json;

use crate::harness::{free_port, wait_for};
use crate::hermes_rig::{stop, user_turns as users, Rig, WX_PEER};

/// A Telegram group of the mock (a basic group: negative, above -10^12).
const GROUP: i64 = -2002;

/// The model's last request whose newest user message is `text`, once it is made.
fn asked(rig: &Rig, text: &str) -> serde_json::Value {
    wait_for(Duration::from_secs(60), "the model to be asked", || {
        rig.model_calls()
            .into_iter()
            .rev()
            .find(|c| c["kind"] == "chat" && c["last_user"].as_str() == Some(text))
    })
}

fn copy_dir(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cp -a {} {}", from.display(), to.display());
}

/// The rig, with the Relay on a free port and `platform-ids` on.
fn platform_ids_rig(profile: &str) -> Rig {
    let port = free_port();
    let agent = format!(
        "[agent]\nkind = \"hermes-relay\"\nport = {port}\nplatform-ids = true\n\
         turn-timeout = \"60s\"\n"
    );
    Rig::new(profile, &agent)
}

#[test]
fn a_chat_hermess_own_gateway_held_goes_on_behind_the_relay() {
    let rig = platform_ids_rig("hasess");
    let dm = TelegramConfig::default().chats[0];

    // Before the switch: Hermes's own gateway holds the bot, as a Hermes install does.
    let telegram = format!(
        "platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: {}\n",
        rig.telegram_base_url()
    );
    let mut own = rig.hermes_own_gateway(
        &telegram,
        &[
            ("TELEGRAM_BOT_TOKEN", TelegramConfig::default().token),
            ("TELEGRAM_ALLOW_ALL_USERS", "true".to_owned()),
            ("WEIXIN_TOKEN", WeixinConfig::default().token),
            ("WEIXIN_ACCOUNT_ID", "habot@im.bot".to_owned()),
            ("WEIXIN_BASE_URL", rig.mock.http_base()),
            ("WEIXIN_DM_POLICY", "allowlist".to_owned()),
            ("WEIXIN_ALLOWED_USERS", WX_PEER.to_owned()),
        ],
    );
    let hermes_home = rig.hermes_home_dir();
    rig.wait_hermes_platform(&hermes_home, "telegram", &mut own);
    rig.wait_hermes_platform(&hermes_home, "weixin", &mut own);
    rig.mock.weixin_emit_text(WX_PEER, "eta on weixin");
    rig.wait_post("echo: eta on weixin");
    rig.mock.telegram_emit_text(dm, "alpha in the dm");
    rig.wait_post("echo: alpha in the dm");
    rig.mock.telegram_emit_text(GROUP, "beta in the group");
    rig.wait_post("echo: beta in the group");
    stop(&mut own);

    // The switch: the gateway holds the bot; Hermes's home, its sessions in it, becomes the
    // agent's, without the platform.
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let agent_home = rig.profile_home().join("agent/hermes");
    copy_dir(&hermes_home, &agent_home);
    std::fs::write(
        agent_home.join("config.yaml"),
        crate::hermes_rig::config_yaml(rig.model_port()),
    )
    .unwrap();
    // A message while no agent is there: delivered as soon as Hermes says hello, inside the
    // second in which Hermes holds inbound while it starts.
    rig.mock
        .telegram_emit_text(dm, "zeta while hermes was away");
    let _agent = rig.agent_run();
    wait_for(Duration::from_secs(60), "Hermes to dial in", || {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?,
        )
        .ok()?;
        (s["agent"]["connected"] == true).then_some(())
    });

    rig.wait_post("echo: zeta while hermes was away");
    rig.mock.telegram_emit_text(dm, "gamma in the dm");
    rig.wait_post("echo: gamma in the dm");
    let call = asked(&rig, "gamma in the dm");
    assert_eq!(
        users(&call),
        [
            "alpha in the dm",
            "zeta while hermes was away",
            "gamma in the dm"
        ],
        "the DM's earlier turn, and only its: {call}"
    );
    rig.mock.telegram_emit_text(GROUP, "delta in the group");
    rig.wait_post("echo: delta in the group");
    let call = asked(&rig, "delta in the group");
    assert_eq!(
        users(&call),
        ["beta in the group", "delta in the group"],
        "the group's earlier turn, and only its: {call}"
    );

    rig.mock.weixin_emit_text(WX_PEER, "theta on weixin");
    rig.wait_post("echo: theta on weixin");
    let call = asked(&rig, "theta on weixin");
    // Its earlier turn is there. (The gateway's Weixin adapter starts from an empty cursor,
    // and the mock's iLink then gives it the message Hermes's own adapter took once more: the
    // model may see it twice. Carrying Hermes's cursor over is adopt's.)
    let weixin = users(&call);
    assert_eq!(
        weixin.first().map(String::as_str),
        Some("eta on weixin"),
        "{call}"
    );
    assert_eq!(
        weixin.last().map(String::as_str),
        Some("theta on weixin"),
        "{call}"
    );

    // A command Hermes answers itself, through the Relay adapter it has (`/status`).
    rig.mock.telegram_emit_text(dm, "/status");
    let status = rig.wait_post("Hermes Gateway Status");
    assert_eq!(status[0].target_id, dm.to_string());
    assert!(status[0].reply_to.is_some(), "{status:?}");

    // A chat Hermes never saw starts afresh, and is answered in its chat.
    rig.mock.telegram_emit_text(-3003, "epsilon in a new group");
    let posts = rig.wait_post("echo: epsilon in a new group");
    assert_eq!(posts[0].target_id, "-3003");
    let call = asked(&rig, "epsilon in a new group");
    assert_eq!(users(&call), ["epsilon in a new group"]);
    // Hermes's one-time "No home channel is set for Telegram" notice on a new chat's first
    // turn (its own gateway sent one to each chat above) goes to `adapters[telegram]`, which a
    // Hermes behind the Relay has not: it is not sent.
    let new_chat: Vec<_> = rig
        .posts()
        .into_iter()
        .filter(|p| p.target_id == "-3003")
        .collect();
    assert_eq!(new_chat.len(), 1, "{new_chat:?}");
    // Each message was answered once: Hermes's own adapter took its updates, and no earlier
    // one came to the gateway again.
    for text in [
        "alpha in the dm",
        "beta in the group",
        "zeta while hermes was away",
        "gamma in the dm",
    ] {
        let n = rig
            .posts()
            .iter()
            .filter(|p| p.content == format!("echo: {text}"))
            .count();
        assert_eq!(n, 1, "{text}: {:?}", rig.posts());
    }

    // Hermes's cron delivers through the Relay to `relay:ADAPTER/TARGET` when its gateway's
    // ticker runs the job: the one process with the Relay adapter live. (`hermes cron run`
    // runs it in the CLI's own process, where `relay` is no platform: "platform 'relay' not
    // configured/enabled".) The job is made due now; the ticker looks once a minute.
    let id = cron_job(&agent_home, "Say cron-ping-48", "relay:tg/chat:1001");
    make_due(&agent_home, &id);
    let post = crate::harness::try_wait_for(Duration::from_secs(180), || {
        rig.posts()
            .into_iter()
            .find(|p| p.content.contains("cron-ping-48"))
    })
    .unwrap_or_else(|| {
        let log = rig.hermes_log();
        let cron: Vec<&str> = log
            .lines()
            .filter(|l| l.to_lowercase().contains("cron"))
            .collect();
        panic!(
            "the cron job {id} was not delivered in 180 s; jobs.json: {}\nHermes on cron: {cron:#?}\n{}",
            std::fs::read_to_string(agent_home.join("cron/jobs.json")).unwrap_or_default(),
            crate::hermes_rig::tail(&rig.log()),
        )
    });
    assert_eq!(post.target_id, dm.to_string(), "{post:?}");
}

/// The output of the `hermes` CLI in Hermes's home `home`; it must succeed.
fn hermes_cli(home: &Path, args: &[&str]) -> String {
    let venv = crate::hermes_rig::venv();
    let out = Command::new(venv.join("bin/hermes"))
        .args(args)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", venv.join("bin").display()),
        )
        .env("HOME", home)
        .env("HERMES_HOME", home)
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "hermes {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A Hermes cron job made with its own CLI (`hermes cron create`), delivering to `deliver`;
/// its id, read from `cron/jobs.json`.
fn cron_job(home: &Path, prompt: &str, deliver: &str) -> String {
    hermes_cli(
        home,
        &[
            "cron",
            "create",
            "every 1h",
            prompt,
            "--name",
            "ping",
            "--deliver",
            deliver,
        ],
    );
    let jobs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("cron/jobs.json")).unwrap())
            .unwrap();
    jobs["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|j| j["prompt"] == prompt)
        .and_then(|j| j["id"].as_str())
        .unwrap_or_else(|| panic!("no job {prompt:?} in {jobs}"))
        .to_owned()
}

/// Make job `id` of Hermes's `cron/jobs.json` in `home` due now, as its schedule would.
fn make_due(home: &Path, id: &str) {
    let path = home.join("cron/jobs.json");
    let mut jobs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for job in jobs["jobs"].as_array_mut().into_iter().flatten() {
        if job["id"] == id {
            job["next_run_at"] = job["created_at"].clone();
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&jobs).unwrap()).unwrap();
}

/// With `platform-ids`, a message from each platform is answered once, in its chat, as a reply:
/// Hermes tags each answer with the platform its chat came from, and the gateway finds the
/// adapter and target from the platform's own chat id (a QQ group's openid, a Feishu `oc_`, a
/// Discord channel).
#[test]
fn with_platform_ids_each_platform_is_answered_in_its_chat() {
    let rig = platform_ids_rig("haids");
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let agent_home = rig.profile_home().join("agent/hermes");
    std::fs::create_dir_all(&agent_home).unwrap();
    std::fs::write(
        agent_home.join("config.yaml"),
        crate::hermes_rig::config_yaml(rig.model_port()),
    )
    .unwrap();
    let _agent = rig.agent_run();
    wait_for(Duration::from_secs(60), "Hermes to dial in", || {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?,
        )
        .ok()?;
        (s["agent"]["connected"] == true).then_some(())
    });
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-ids",
        json!({"author": {"member_openid": "MQ"}, "content": " hello qq",
               "group_openid": "GQ", "id": "msg-q-ids"}),
    );
    rig.discord.emit_dispatch(
        "MESSAGE_CREATE",
        "d-ids",
        json!({"id": "1100", "channel_id": "2001", "guild_id": "3001",
               "author": {"id": "4001", "username": "ann"}, "content": "hello discord"}),
    );
    rig.mock.feishu_emit_message(FeishuMessage {
        chat_id: "oc_ha1".into(),
        chat_type: "group".into(),
        sender_open_id: "ou_ha1".into(),
        text: "hello feishu".into(),
    });
    rig.mock
        .telegram_emit_text(TelegramConfig::default().chats[0], "hello telegram");
    rig.mock.weixin_emit_text(WX_PEER, "hello weixin");
    for (text, platform, target) in [
        ("qq", Platform::Qq, Some("GQ")),
        ("discord", Platform::Discord, Some("2001")),
        // Feishu's reply is posted at the message it answers.
        ("feishu", Platform::Feishu, None),
        ("telegram", Platform::Telegram, Some("1001")),
        ("weixin", Platform::Weixin, Some(WX_PEER)),
    ] {
        let posts = rig.wait_post(&format!("echo: hello {text}"));
        assert_eq!(posts.len(), 1, "{text}: answered once: {posts:?}");
        assert_eq!(posts[0].platform, platform, "{text}");
        if let Some(target) = target {
            assert_eq!(posts[0].target_id, target, "{text}: {posts:?}");
        }
        if platform != Platform::Weixin {
            assert!(posts[0].reply_to.is_some(), "{text}: a reply: {posts:?}");
        }
    }
    // Hermes keyed each by its platform: the QQ group's member has a session of their own, as
    // Hermes's own QQ adapter would have made it.
    let sessions = std::fs::read_to_string(
        rig.profile_home()
            .join("agent/hermes/sessions/sessions.json"),
    )
    .unwrap_or_default();
    for key in [
        "agent:main:qqbot:group:GQ:MQ",
        "agent:main:discord:group:2001:4001",
        "agent:main:telegram:dm:1001",
        "agent:main:weixin:dm:hauser@im.wechat",
    ] {
        assert!(sessions.contains(key), "{key} in {sessions}");
    }
}
