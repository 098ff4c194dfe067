//! The senders the registry builds from an adapter's settings, and what each says of itself.

use std::time::Duration;

use crate::config::{Secret, Timing};
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::adapter::Shared;
use crate::gateway::outbox::worker;
use crate::gateway::send::{Answer, Outgoing, Post, TargetError};
use crate::platform::{
    discord, feishu, qqbot, telegram, websocket, AdapterSpec, Protocol, Sender, Target,
};

fn spec(protocol: Protocol) -> AdapterSpec {
    AdapterSpec {
        name: "a".into(),
        timing: Timing::default(),
        access: Default::default(),
        protocol,
    }
}

fn discord() -> AdapterSpec {
    spec(Protocol::Discord(discord::Config {
        token_env: "T".into(),
        // Nothing listens here: a send that got this far would be a Retry.
        api_base: "http://127.0.0.1:9".into(),
        gateway_url: None,
        intents: 0,
        ws_ping: true,
    }))
}

fn discord_sender(secret: &str) -> discord::Sender {
    match Sender::new(&discord(), &[Secret::new(secret.into())], &shared()) {
        Some(Sender::Discord(d)) => d,
        other => panic!("{other:?}"),
    }
}

fn shared() -> Shared {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Shared::new(ProxyEnv::default()).unwrap()
}

fn msg<T>(target: T, text: &str, reply_to: Option<&str>) -> Outgoing<T> {
    Outgoing {
        id: "m".into(),
        target,
        text: text.into(),
        reply_to: reply_to.map(Into::into),
        seq: Some(1),
        files: vec![],
    }
}

fn plain(send_frame: Option<&str>) -> AdapterSpec {
    spec(Protocol::WebSocket(websocket::Config {
        url: "ws://127.0.0.1:1".into(),
        token_env: None,
        ping_interval: Duration::from_secs(15),
        app_ping: None,
        send_frame: send_frame.map(|t| websocket::SendFrame::parse(t).unwrap()),
    }))
}

#[test]
fn senders_by_kind() {
    assert!(Sender::new(&plain(None), &[], &shared()).is_none());
    let w = Sender::new(&plain(Some(r#"{"t":"{text}"}"#)), &[], &shared()).unwrap();
    assert_eq!((w.kind(), w.route().max_text), ("websocket", 65536));
    let Sender::WebSocket(ws) = &w else {
        panic!("{w:?}")
    };
    assert!(!ws.dedupes(&msg(websocket::Target("r".into()), "hi", Some("M"))));
    let qq = spec(Protocol::QqBot(qqbot::Config {
        app_id: "1".into(),
        secret_env: "S".into(),
        api_base: "http://127.0.0.1:9".into(),
        token_url: "http://127.0.0.1:9/token".into(),
        gateway_url: None,
        intents: 0,
        shard: [0, 1],
        ws_ping: false,
    }));
    let q = Sender::new(&qq, &[Secret::new("s".into())], &shared()).unwrap();
    assert_eq!((q.kind(), q.route().max_text), ("qqbot", 2000));
    let Sender::QqBot(q) = &q else {
        panic!("{q:?}")
    };
    let group = qqbot::Target::Group("G".into());
    assert!(q.dedupes(&msg(group.clone(), "hi", Some("M"))));
    assert!(!q.dedupes(&msg(group, "hi", None)));
    let d = Sender::new(&discord(), &[Secret::new("tok".into())], &shared()).unwrap();
    assert_eq!((d.kind(), d.route().max_text), ("discord", 2000));
    assert_eq!(format!("{d:?}"), "Sender(discord)");
    let d = discord_sender("tok");
    assert!(d.dedupes(&msg(discord::Target("1".into()), "hi", None)));
    let f = spec(Protocol::Feishu(feishu::Config {
        domain: feishu::FeishuDomain::Feishu,
        app_id: "cli_x".into(),
        secret_env: "S".into(),
        api_base: "http://127.0.0.1:9".into(),
    }));
    let f = Sender::new(&f, &[Secret::new("s".into())], &shared()).unwrap();
    assert_eq!((f.kind(), f.route().max_text), ("feishu", 30_000));
    let Sender::Feishu(f) = &f else {
        panic!("{f:?}")
    };
    // The uuid makes every send safe to repeat, a reply or not.
    assert!(f.dedupes(&msg(feishu::Target::Chat("oc_1".into()), "hi", None)));
    assert!(f.dedupes(&msg(
        feishu::Target::User("ou_1".into()),
        "hi",
        Some("om_1")
    )));
}

#[tokio::test]
async fn too_long_fails_before_any_request() {
    let d = discord_sender("tok");
    let long = "字".repeat(2001);
    let (a, _) = worker::send(&d, &msg(discord::Target("1".into()), &long, None)).await;
    assert!(
        matches!(&a, Answer::Failed(r) if r.message.contains("2001")),
        "{a:?}"
    );
    // Exactly the limit goes out (and finds nobody listening).
    let text = "字".repeat(2000);
    let (a, _) = worker::send(&d, &msg(discord::Target("1".into()), &text, None)).await;
    assert!(matches!(a, Answer::Retry { .. }), "{a:?}");
}

#[tokio::test]
async fn a_bad_token_never_shows_in_the_answer() {
    let d = discord_sender("sec\nret-token");
    let (a, _) = d.send(&msg(discord::Target("1".into()), "hi", None)).await;
    let text = format!("{a:?}");
    assert!(matches!(a, Answer::Failed(_)), "{text}");
    assert!(!text.contains("ret-token"), "{text}");
}

/// Each adapter's connection task and outbox worker idle for as long as the gateway runs,
/// a thousand of each in a big gateway, so what they hold is paid a thousand times over
/// (docs/benchmarks.md, the 1,000-adapter RSS). A send's or a connect's state belongs
/// in a box that exists only while it runs; these limits catch one that moves inline.
#[tokio::test]
async fn idle_tasks_stay_small() {
    use crate::gateway::health::{ComponentKind, Registry};
    let d = discord_sender("tok");
    let dir = tempfile::tempdir().unwrap();
    let outbox = std::sync::Arc::new(
        crate::gateway::outbox::Outbox::open(dir.path(), Default::default()).unwrap(),
    );
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let worker = worker::run("a".into(), d, outbox, None, rx.clone());
    let worker = std::mem::size_of_val(&worker);
    assert!(worker <= 1024, "an outbox worker holds {worker} bytes");

    let spec = discord();
    let deps = crate::gateway::adapter::Deps {
        spool: std::sync::Arc::new(
            crate::gateway::spool::Spool::open(&dir.path().join("inbox")).unwrap(),
        ),
        heartbeat: Registry::new().register(
            "a",
            ComponentKind::Adapter(spec.protocol.kind()),
            Duration::from_secs(60),
        ),
        shared: shared(),
        shutdown: rx,
    };
    let adapter = crate::platform::receive(spec, vec![], deps);
    let adapter = std::mem::size_of_val(&adapter);
    assert!(adapter <= 4 * 1024, "an adapter task holds {adapter} bytes");
}

#[test]
fn targets_read_by_kind_and_kinds_that_cannot_send_say_so() {
    let t = Target::parse("telegram", "-1001234567890").unwrap();
    assert_eq!(
        t,
        Target::Telegram(telegram::Target("-1001234567890".into()))
    );
    assert_eq!(t.to_string(), "chat:-1001234567890");
    assert_eq!(
        Target::parse("irc", "anything"),
        Err(TargetError::CannotSend { kind: "irc".into() })
    );
}

proptest::proptest! {
    #[test]
    fn target_parse_never_panics(
        kind in "qqbot|discord|websocket|feishu|telegram|weixin",
        text in "\\PC{0,80}",
    ) {
        let _ = Target::parse(&kind, &text);
    }
}

#[test]
fn a_platform_with_logins_says_what_one_needs() {
    let needs = crate::platform::login_needs("weixin").unwrap();
    assert!(needs.contains("QR code"), "{needs}");
    assert_eq!(crate::platform::login_needs("telegram"), None);
    assert_eq!(crate::platform::login_needs("irc"), None);
}

#[test]
fn a_message_whose_ids_make_no_target_has_no_ready_made_reply() {
    use crate::gateway::spool::Event;
    let event = |group: &str| {
        Event::new(
            "e1",
            "qq",
            "GROUP_AT_MESSAGE_CREATE",
            None,
            serde_json::json!({"author": {"member_openid": "M"}, "content": "hi",
                               "group_openid": group, "id": "m1"}),
        )
    };
    let fine = crate::platform::normalise("qqbot", &event("G1")).unwrap();
    assert_eq!(fine.reply.unwrap().target, "group:G1");
    // Still a message, with its chat; but `group:a/b` is not a target QQ's sender takes.
    let odd = crate::platform::normalise("qqbot", &event("a/b")).unwrap();
    assert_eq!(odd.said.chat.id, "a/b");
    assert!(odd.reply.is_none());
}

#[test]
fn platforms_that_post_a_long_text_in_messages_say_how_long_one_is() {
    let text = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"T\"\n\n\
                [[adapter]]\nname = \"wx\"\nkind = \"weixin\"\n";
    let config = crate::config::parse(std::path::Path::new("/p/gateway.toml"), text).unwrap();
    let routes: Vec<_> = config
        .adapters
        .iter()
        .map(|a| {
            let secrets = [Secret::new("s".into())];
            Sender::new(a, &secrets, &shared()).unwrap().route()
        })
        .map(|r| (r.kind, r.max_text, r.max_piece))
        .collect();
    // An agent's answer is split to the piece, so that each piece is one message, a reply.
    assert_eq!(
        routes,
        [("telegram", 4096 * 16, 4096), ("weixin", 2000 * 16, 2000)]
    );
    let q = Sender::new(&discord(), &[Secret::new("t".into())], &shared()).unwrap();
    assert_eq!(q.route().max_piece, q.route().max_text);
}
