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

use crate::harness::{free_port, wait_for};
use crate::hermes_rig::{stop, Rig};

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

/// The user messages the model was given in `call`, oldest first.
fn users(call: &serde_json::Value) -> Vec<String> {
    call["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
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

#[test]
fn a_chat_hermess_own_gateway_held_goes_on_behind_the_relay() {
    let port = free_port();
    let rig = Rig::new(
        "hasess",
        &format!(
            "[agent]\nkind = \"hermes-relay\"\nport = {port}\nplatform-ids = true\n\
             turn-timeout = \"60s\"\n"
        ),
    );
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
        ],
    );
    let hermes_home = rig.hermes_home_dir();
    rig.wait_hermes_platform(&hermes_home, "telegram", &mut own);
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
    let _agent = rig.agent_run();
    wait_for(Duration::from_secs(60), "Hermes to dial in", || {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?,
        )
        .ok()?;
        (s["agent"]["connected"] == true).then_some(())
    });

    rig.mock.telegram_emit_text(dm, "gamma in the dm");
    rig.wait_post("echo: gamma in the dm");
    let call = asked(&rig, "gamma in the dm");
    assert_eq!(
        users(&call),
        ["alpha in the dm", "gamma in the dm"],
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

    // A chat Hermes never saw starts afresh, and is answered in its chat.
    rig.mock.telegram_emit_text(-3003, "epsilon in a new group");
    let posts = rig.wait_post("echo: epsilon in a new group");
    assert_eq!(posts[0].target_id, "-3003");
    let call = asked(&rig, "epsilon in a new group");
    assert_eq!(users(&call), ["epsilon in a new group"]);
    // Each message was answered once: Hermes's own adapter took its updates, and no earlier
    // one came to the gateway again.
    for text in ["alpha in the dm", "beta in the group", "gamma in the dm"] {
        let n = rig
            .posts()
            .iter()
            .filter(|p| p.content == format!("echo: {text}"))
            .count();
        assert_eq!(n, 1, "{text}: {:?}", rig.posts());
    }
}
