//! Who may talk to the agent, end to end: the real Hermes agent behind a real gateway, through
//! the Relay and through its API server, with the mock platforms in front. A stranger is not
//! answered and the model never sees what they said; an allowed sender is answered once;
//! pairing works through the CLI (a wrong code, approve, deny, revoke, a flood of DMs that gets
//! one code), and a message refused before a sender was approved is never delivered, across a
//! restart too; a group message reaches the agent only when it addresses the bot; a bot is not
//! answered; a look-alike id is refused; a burst is cut at the budget while another sender is
//! answered meanwhile. Profile names start with `ac`.

use std::process::Output;
use std::time::Duration;

use hermes_svc::mock_platform::{Platform, Post};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::harness::{free_port, wait_for, BIN};
use crate::hermes_rig::{signal, stop, Rig};

/// The Telegram users of the mock: 1001 writes in the groups too.
const ALLOWED: i64 = 1001;
const STRANGER: i64 = 2002;
const BURSTER: i64 = 3003;
const GROUP: i64 = -100_777;

fn cli(rig: &Rig, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .args(args)
        .env("HERMES_HOME", rig.home.path())
        .output()
        .unwrap()
}

fn state(rig: &Rig) -> Option<Value> {
    serde_json::from_str(
        &std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?,
    )
    .ok()
}

fn wait_agent(rig: &Rig) {
    wait_for(Duration::from_secs(90), "Hermes to dial in", || {
        (state(rig)?["agent"]["connected"] == true).then_some(())
    });
}

/// Whether the model was ever asked about `text`.
fn model_saw(rig: &Rig, text: &str) -> bool {
    rig.model_calls()
        .iter()
        .any(|c| c["kind"] == "chat" && c["last_user"].as_str().is_some_and(|u| u.contains(text)))
}

fn posts_with(rig: &Rig, text: &str) -> Vec<Post> {
    rig.posts()
        .into_iter()
        .filter(|p| p.content.contains(text))
        .collect()
}

/// A message from `ALLOWED` answered: everything stored before it has been judged and passed
/// by the bridge, so what was refused before it can be checked now.
fn sync(rig: &Rig, tag: &str) {
    let text = format!("sync {tag}");
    rig.mock.telegram_emit_text(ALLOWED, &text);
    assert_eq!(rig.wait_post(&format!("echo: {text}")).len(), 1);
}

/// The pairing code in the one code message posted to `target`.
fn code_sent_to(rig: &Rig, target: &str) -> String {
    nth_code_sent_to(rig, target, 1)
}

/// The code in the `n`th code message posted to `target`, once there are `n`.
fn nth_code_sent_to(rig: &Rig, target: &str, n: usize) -> String {
    let posts = wait_for(Duration::from_secs(30), "a pairing code", || {
        let p: Vec<Post> = posts_with(rig, "Your pairing code: ")
            .into_iter()
            .filter(|p| p.target_id == target)
            .collect();
        (p.len() >= n).then_some(p)
    });
    assert_eq!(posts.len(), n, "{n} code messages: {posts:?}");
    let text = &posts[n - 1].content;
    assert!(
        !text.contains("hermes-svc") && !text.contains(&rig.profile),
        "nothing about the owner: {text}"
    );
    let at = text.find("Your pairing code: ").unwrap() + "Your pairing code: ".len();
    text[at..at + 8].to_owned()
}

fn events_text(rig: &Rig) -> String {
    let out = cli(rig, &["events", "-p", &rig.profile]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The `events` line of the message whose text is `text`.
fn event_line(rig: &Rig, text: &str) -> String {
    events_text(rig)
        .lines()
        .find(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no event with {text:?}"))
        .to_owned()
}

#[test]
fn through_the_relay_only_whom_the_rules_admit_reaches_hermes() {
    let port = free_port();
    let rig = Rig::new(
        "acrelay",
        &format!(
            "[access]\nallow-users = [\"{ALLOWED}\", \"{BURSTER}\", \"5005\", \"MQ\"]\n\
             unknown-dm = \"pair\"\nrequire-mention = true\nbudget = \"10/10m\"\n\n\
             [agent]\nkind = \"hermes-relay\"\nport = {port}\nturn-timeout = \"60s\"\n"
        ),
    );
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let mut hermes = rig.hermes_relay(port);
    wait_agent(&rig);

    // An allowed sender is answered once.
    rig.mock.telegram_emit_text(ALLOWED, "allowed hello");
    assert_eq!(rig.wait_post("echo: allowed hello").len(), 1);

    // A stranger's flood of DMs gets one code message, and none of it reaches the model.
    rig.mock.telegram_emit_text(STRANGER, "stranger hello");
    for i in 0..9 {
        rig.mock
            .telegram_emit_text(STRANGER, &format!("stranger again {i}"));
    }
    let code = code_sent_to(&rig, &STRANGER.to_string());

    // A look-alike of an allowed id, a bot allowed by id, and a Discord stranger.
    for (i, (id, author)) in [
        ("d-look", json!({"id": "\u{ff11}001", "username": "ann"})),
        ("d-space", json!({"id": "1001 ", "username": "ann"})),
        (
            "d-bot",
            json!({"id": "5005", "username": "robot", "bot": true}),
        ),
        ("d-stranger", json!({"id": "6006", "username": "eve"})),
    ]
    .into_iter()
    .enumerate()
    {
        // No guild: a direct message, in a DM channel of its own.
        rig.discord.emit_dispatch(
            "MESSAGE_CREATE",
            id,
            json!({"id": format!("90{i}"), "channel_id": format!("770{i}"),
                   "author": author, "content": format!("discord {id}")}),
        );
    }
    // In a group: not addressed, then a mention, then QQ's @-message (addressed by its type).
    rig.mock.telegram_emit_text(GROUP, "group not addressed");
    rig.mock
        .telegram_emit_mention(GROUP, "hey ", " group with mention");
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "q-at",
        json!({"author": {"member_openid": "MQ"}, "content": " qq at the bot",
               "group_openid": "GQ", "id": "msg-q-at"}),
    );
    assert_eq!(rig.wait_post("group with mention").len(), 1);
    assert_eq!(rig.wait_post("echo: qq at the bot").len(), 1);
    let discord_code = code_sent_to(&rig, "7703");
    sync(&rig, "one");

    for refused in [
        "stranger",
        "discord d-look",
        "discord d-space",
        "discord d-bot",
        "discord d-stranger",
        "group not addressed",
    ] {
        assert!(!model_saw(&rig, refused), "the model saw {refused:?}");
        assert!(
            posts_with(&rig, &format!("echo: {refused}")).is_empty(),
            "{refused:?} was answered"
        );
    }
    // Why each was refused, in `events` and in the health counts.
    for (text, rule) in [
        ("stranger hello", "refused:unknown-sender"),
        ("discord d-look", "refused:unknown-sender"),
        ("discord d-space", "refused:unknown-sender"),
        ("discord d-bot", "refused:bot"),
        ("group not addressed", "refused:not-addressed"),
        ("allowed hello", "admitted:allow-users"),
    ] {
        let line = event_line(&rig, text);
        assert!(line.contains(rule), "{text}: {line}");
    }
    wait_for(
        Duration::from_secs(10),
        "the counts in the state file",
        || {
            let access = &state(&rig)?["access"];
            (access["refused"]["unknown-sender"].as_u64()? >= 13
                && access["refused"]["bot"] == 1
                && access["refused"]["not-addressed"] == 1
                && access["admitted"]["allow-users"].as_u64()? >= 4)
                .then_some(())
        },
    );

    // Pairing through the CLI: a wrong code does nothing, the right one admits from the next
    // message on, and what the sender said before is never delivered.
    let list = cli(&rig, &["pairing", "list", "-p", &rig.profile, "--json"]);
    let listed: Value = serde_json::from_slice(&list.stdout).unwrap();
    let waiting: Vec<(&str, &str)> = listed["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["adapter"].as_str().unwrap(),
                p["sender"].as_str().unwrap(),
            )
        })
        .collect();
    // The look-alikes are strangers too, each offered a code of their own.
    assert_eq!(
        waiting,
        [
            ("tg", "2002"),
            ("dc", "\u{ff11}001"),
            ("dc", "1001 "),
            ("dc", "6006")
        ],
        "{listed}"
    );
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&code));
    let wrong = if code == "AAAAAAAA" {
        "BBBBBBBB"
    } else {
        "AAAAAAAA"
    };
    let out = cli(&rig, &["pairing", "approve", "-p", &rig.profile, wrong]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no code waiting matches"));
    let out = cli(
        &rig,
        &["pairing", "deny", "-p", &rig.profile, &discord_code],
    );
    assert!(out.status.success(), "{out:?}");
    let out = cli(&rig, &["pairing", "approve", "-p", &rig.profile, &code]);
    assert!(out.status.success(), "{out:?}");
    rig.mock.telegram_emit_text(STRANGER, "paired now");
    assert_eq!(rig.wait_post("echo: paired now").len(), 1);
    assert!(event_line(&rig, "paired now").contains("admitted:pairing"));

    // Across a restart of the gateway, nothing refused earlier is delivered.
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    wait_agent(&rig);
    rig.mock
        .telegram_emit_text(STRANGER, "paired after restart");
    assert_eq!(rig.wait_post("echo: paired after restart").len(), 1);
    assert!(!model_saw(&rig, "stranger hello"));
    assert!(posts_with(&rig, "echo: stranger").is_empty());

    // Revoked: refused again.
    let out = cli(
        &rig,
        &["pairing", "revoke", "-p", &rig.profile, "tg", "2002"],
    );
    assert!(out.status.success(), "{out:?}");
    rig.mock.telegram_emit_text(STRANGER, "after revoke");
    sync(&rig, "two");
    assert!(!model_saw(&rig, "after revoke"));
    assert!(event_line(&rig, "after revoke").contains("refused:unknown-sender"));

    // A burst from one sender is cut at the budget (10 in 10 minutes), with one notice,
    // while another sender is answered meanwhile: the burst's turns take a second each, one
    // after another, and the other chat does not wait behind them.
    for i in 0..30 {
        rig.mock
            .telegram_emit_text(BURSTER, &format!("slow:1 burst {i:02}"));
    }
    rig.mock
        .telegram_emit_text(ALLOWED, "meanwhile, another sender");
    let other = rig.wait_post("echo: meanwhile, another sender");
    let third = rig.wait_post("echo: slow:1 burst 02");
    assert!(
        other[0].received_at < third[0].received_at,
        "the other sender waited behind the burst"
    );
    rig.wait_post("echo: slow:1 burst 09");
    sync(&rig, "three");
    let answered: Vec<Post> = posts_with(&rig, "echo: slow:1 burst");
    assert_eq!(answered.len(), 10, "{answered:?}");
    assert!((10..30).all(|i| !model_saw(&rig, &format!("burst {i:02}"))));
    let notices: Vec<Post> = posts_with(&rig, "faster than they can be answered");
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].target_id, BURSTER.to_string());
    assert_eq!(notices[0].platform, Platform::Telegram);
    assert!(event_line(&rig, "burst 29").contains("refused:budget"));

    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}

#[test]
fn through_the_api_server_a_stranger_is_refused_until_paired() {
    let api = free_port();
    let rig = Rig::new(
        "acapi",
        &format!(
            "[access]\nallow-users = [\"{ALLOWED}\"]\nunknown-dm = \"pair\"\n\n\
             [agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:{api}/v1\"\n\
             key-env = \"HA_API_KEY\"\nturn-timeout = \"60s\"\n"
        ),
    );
    let mut hermes = rig.hermes_api(api);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    rig.mock.telegram_emit_text(STRANGER, "api stranger");
    let code = code_sent_to(&rig, &STRANGER.to_string());
    sync(&rig, "api");
    assert!(!model_saw(&rig, "api stranger"));

    // An hour on (the store's clock moved back by hand), the code has expired: approving it
    // does nothing, and the stranger's next DM gets a new one.
    let store = rig.profile_home().join("access/pairing.json");
    let mut book: Value = serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    for p in book["pending"].as_array_mut().unwrap() {
        p["created_at"] = json!(p["created_at"].as_u64().unwrap() - 3601);
    }
    std::fs::write(&store, book.to_string()).unwrap();
    let out = cli(&rig, &["pairing", "approve", "-p", &rig.profile, &code]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    rig.mock.telegram_emit_text(STRANGER, "api stranger again");
    let code = nth_code_sent_to(&rig, &STRANGER.to_string(), 2);
    let out = cli(&rig, &["pairing", "approve", "-p", &rig.profile, &code]);
    assert!(out.status.success(), "{out:?}");
    rig.mock.telegram_emit_text(STRANGER, "api paired");
    assert_eq!(rig.wait_post("echo: api paired").len(), 1);
    assert!(posts_with(&rig, "echo: api stranger").is_empty());
    assert!(!model_saw(&rig, "api stranger"));
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}
