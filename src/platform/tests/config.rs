//! The config parser, with the registry's platforms, against the documented example and
//! every kind of mistake it must name.

use std::path::Path;
use std::time::Duration;

use crate::config::{load, parse, ConfigError, Secret};
use crate::platform::websocket::{self, Fields};
use crate::platform::{qqbot, GatewayConfig, Protocol};

const FULL: &str = r#"
[gateway]
max-outage = "30m"

[[adapter]]
name = "qq"
kind = "qqbot"
app-id = "102000000"
secret-env = "QQ_BOT_SECRET"
api-base = "http://127.0.0.1:9000"
token-url = "http://127.0.0.1:9000/app/getAppAccessToken"
intents = ["public-guild-messages", "direct-message"]

[[adapter]]
name = "dc"
kind = "discord"
token-env = "DISCORD_BOT_TOKEN"

[[adapter]]
name = "custom"
kind = "websocket"
url = "wss://example.com/ws"
ping-interval = "15s"

[[cron]]
name = "daily"
schedule = "0 9 * * *"
command = ["/usr/bin/env", "python3", "tracker.py"]
timeout = "5m"
"#;

fn parse_str(text: &str) -> Result<GatewayConfig, ConfigError> {
    parse(Path::new("/p/gateway.toml"), text)
}

#[test]
fn the_documented_example_parses() {
    let c = parse_str(FULL).unwrap();
    assert_eq!(c.max_outage, Duration::from_secs(1800));
    assert_eq!(c.adapters.len(), 3);
    assert_eq!(c.adapters[0].protocol.kind(), "qqbot");
    match &c.adapters[0].protocol {
        Protocol::QqBot(qqbot::Config { intents, .. }) => {
            assert_eq!(*intents, (1 << 30) | (1 << 12))
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(c.cron[0].timeout, Duration::from_secs(300));
}

#[test]
fn errors_name_file_line_and_fix() {
    let cases = [
        ("[gateway]\nmax-outgae = \"1m\"\n", "gateway.toml:2", "unknown field `max-outgae`"),
        ("[[adapter]]\nname = \"a\"\nkind = \"qqbot\"\nsecret-env = \"S\"\n", "gateway.toml:1", "add app-id"),
        ("[[adapter]]\nname = \"a\"\nkind = \"irc\"\n", "gateway.toml:3", "unknown kind \"irc\"; use qqbot, discord, feishu, "),
        ("[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"ws://example.com\"\n", "gateway.toml:4", "only to loopback"),
        ("[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\nping-interval = \"often\"\n", "gateway.toml:5", "not a duration"),
        ("[[adapter]]\nname = \"a\"\nkind = \"discord\"\ntoken-env = \"T\"\napp-id = \"1\"\n", "gateway.toml:1", "app-id does not apply"),
        ("[[cron]]\nname = \"c\"\nschedule = \"61 * * * *\"\ncommand = [\"/bin/true\"]\n", "gateway.toml:3", "schedule"),
        ("[[cron]]\nname = \"c\"\nschedule = \"* * * * *\"\ncommand = [\"/bin/true\"]\nattach-from = [\"out\"]\n", "gateway.toml:5", "attach-from needs deliver"),
        ("[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\n[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://y\"\n", "gateway.toml:6", "used twice"),
    ];
    for (text, at, what) in cases {
        let e = parse_str(text).unwrap_err().to_string();
        assert!(e.contains(at) && e.contains(what), "{text:?} gave: {e}");
    }
}

#[test]
fn a_duration_past_a_year_is_an_error_not_a_crash() {
    // Found while writing the config_parse fuzz target (fuzz/), which computes the
    // adapter's retry deadline as the gateway does at start: this config parsed, and the
    // gateway then panicked adding the durations ("overflow when adding durations").
    let text = "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\nconnect-timeout = \"500000000000y\"\nhello-timeout = \"500000000000y\"\n";
    let e = parse_str(text).unwrap_err().to_string();
    assert!(
        e.contains("gateway.toml:5") && e.contains("365 days"),
        "{e}"
    );
    let text = "[gateway]\nmax-outage = \"365d\"\nwatchdog = \"366d\"\n";
    let e = parse_str(text).unwrap_err().to_string();
    assert!(e.contains("gateway.toml:3"), "{e}");
}

#[test]
fn urls_are_read_by_the_parser_that_dials_them_and_app_ids_are_numbers() {
    let head = "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\n";
    for (url, what) in [
        ("ws://127.0.0.1:99999/ws", "invalid port number"),
        ("wss://", "empty host"),
        ("wss://x/\\ny", "control character"),
        ("ws://127.0.0.1.evil.example/ws", "only to loopback"),
        ("ftp://x", "must start with wss://"),
    ] {
        let text = format!("{head}url = \"{url}\"\n");
        let e = parse_str(&text).unwrap_err().to_string();
        assert!(
            e.contains("gateway.toml:4") && e.contains(what),
            "{url:?} gave: {e}"
        );
    }
    let qq = |id: &str| {
        format!(
            "[[adapter]]\nname = \"q\"\nkind = \"qqbot\"\napp-id = \"{id}\"\nsecret-env = \"S\"\n"
        )
    };
    assert!(parse_str(&qq("102000000")).is_ok());
    for bad in ["1\\n2", "", "12a", "1 2"] {
        let e = parse_str(&qq(bad)).unwrap_err().to_string();
        assert!(e.contains("is not a QQ AppID"), "{bad:?} gave: {e}");
    }
}

#[test]
fn loopback_plain_urls_are_allowed() {
    let text =
        "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"ws://127.0.0.1:8080/ws\"\n";
    assert!(parse_str(text).is_ok());
    let text = "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"ws://[::1]:8080/ws\"\n";
    assert!(parse_str(text).is_ok());
}

#[test]
fn missing_file_is_an_empty_config() {
    let c: GatewayConfig = load(Path::new("/nonexistent/gateway.toml")).unwrap();
    assert!(c.adapters.is_empty() && c.cron.is_empty());
}

#[test]
fn secrets_do_not_debug_print() {
    assert_eq!(format!("{:?}", Secret::new("hunter2".into())), "Secret(..)");
}

#[test]
fn send_frame_errors_name_the_line_and_the_fix() {
    let head = "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\n";
    for (frame, what) in [
        (r#"'{"text": "{text}"'"#, "is not JSON"),
        (r#"'{"text": {text}}'"#, "outside a JSON string"),
        (r#"'{"text": "{txt}"}'"#, "unknown placeholder {txt}"),
        (r#"'{"to": "{target}"}'"#, "has no {text}"),
    ] {
        let text = format!("{head}ping-interval = \"15s\"\nsend-frame = {frame}\n");
        let e = parse_str(&text).unwrap_err().to_string();
        assert!(
            e.contains("gateway.toml:6") && e.contains("send-frame") && e.contains(what),
            "{frame} gave: {e}"
        );
    }
    let text = "[[adapter]]\nname = \"a\"\nkind = \"discord\"\ntoken-env = \"T\"\nsend-frame = '{\"t\":\"{text}\"}'\n";
    let e = parse_str(text).unwrap_err().to_string();
    assert!(
        e.contains("send-frame does not apply to kind discord"),
        "{e}"
    );
}

#[test]
fn a_good_send_frame_parses_and_is_optional() {
    let text = "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\nsend-frame = '''\n{\"type\": \"send\", \"to\": \"{target}\",\n \"text\": \"{text}\", \"id\": \"{id}\", \"re\": \"{reply_to}\"}\n'''\n";
    let c = parse_str(text).unwrap();
    let Protocol::WebSocket(websocket::Config {
        send_frame: Some(frame),
        ..
    }) = &c.adapters[0].protocol
    else {
        panic!("{:?}", c.adapters[0]);
    };
    let out = frame.render(&Fields {
        target: "r",
        text: "a \"b\"\nc",
        id: "m1",
        reply_to: "",
    });
    assert_eq!(
        out,
        r#"{"id":"m1","re":"","text":"a \"b\"\nc","to":"r","type":"send"}"#
    );
    let c = parse_str(FULL).unwrap();
    assert!(matches!(
        c.adapters[2].protocol,
        Protocol::WebSocket(websocket::Config {
            send_frame: None,
            ..
        })
    ));
}

#[test]
fn the_agent_section_reads_each_bridge_and_names_each_mistake() {
    use crate::config::{Bridge, Busy, DEFAULT_RELAY_PORT};
    let relay = parse_str("[agent]\nkind = \"hermes-relay\"\n").unwrap();
    let agent = relay.agent.unwrap();
    assert_eq!(
        agent.bridge,
        Bridge::HermesRelay {
            port: DEFAULT_RELAY_PORT
        }
    );
    let port = parse_str("[agent]\nkind = \"hermes-relay\"\nport = 9100\n").unwrap();
    assert_eq!(
        port.agent.unwrap().bridge,
        Bridge::HermesRelay { port: 9100 }
    );
    assert!(parse_str("").unwrap().agent.is_none());

    let openai = parse_str(
        "[agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:8642/v1/\"\nkey-env = \"API_SERVER_KEY\"\nbusy = \"latest\"\nturn-timeout = \"2m\"\n",
    )
    .unwrap();
    let agent = openai.agent.unwrap();
    assert_eq!(agent.turn_timeout, Duration::from_secs(120));
    match agent.bridge {
        Bridge::OpenAi(o) => {
            assert_eq!(o.url, "http://127.0.0.1:8642/v1");
            assert_eq!(o.key_env.as_deref(), Some("API_SERVER_KEY"));
            assert_eq!(o.busy, Busy::Latest);
            assert_eq!(o.failure_notice, None);
        }
        b => panic!("{b:?}"),
    }

    for (text, says) in [
        ("[agent]\nkind = \"hermes\"\n", "not a kind of agent bridge"),
        ("[agent]\nkind = \"hermes-relay\"\nport = 80\n", "1024 to 65535"),
        ("[agent]\nkind = \"hermes-relay\"\nport = 70000\n", "1024 to 65535"),
        ("[agent]\nkind = \"hermes-relay\"\nurl = \"http://127.0.0.1/v1\"\n", "url is a key of kind = \"openai\""),
        ("[agent]\nkind = \"openai\"\n", "needs url"),
        ("[agent]\nkind = \"openai\"\nurl = \"http://example.com/v1\"\n", "only to loopback"),
        ("[agent]\nkind = \"openai\"\nurl = \"https://a.example/v1\"\nkey-env = \"sk-live-abc123\"\n", "not hold the key itself"),
        ("[agent]\nkind = \"openai\"\nurl = \"https://a.example/v1\"\nbusy = \"drop\"\n", "expected `queue` or `latest`"),
        ("[agent]\nkind = \"hermes-relay\"\nport = 9100\ncolour = 1\n", "colour"),
    ] {
        let e = parse_str(text).unwrap_err().to_string();
        assert!(e.contains(says), "{text:?}: {e}");
        assert!(e.contains("/p/gateway.toml"), "{e}");
        assert!(!e.contains("sk-live-abc123"), "the key is not echoed: {e}");
    }
}
