//! Property test: any `gateway.toml` text parses or fails with an error that names a line of
//! it; none panics.

use std::path::Path;
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::odd_text::text;

/// Lines a `gateway.toml` is made of: real sections and keys with odd values, and junk.
fn toml_line() -> impl Strategy<Value = String> {
    let key = proptest::sample::select(vec![
        "name",
        "kind",
        "url",
        "app-id",
        "secret-env",
        "token-env",
        "api-base",
        "token-url",
        "gateway-url",
        "intents",
        "shard",
        "ws-ping",
        "ping-interval",
        "app-ping",
        "connect-timeout",
        "hello-timeout",
        "ack-timeout",
        "backoff-min",
        "backoff-max",
        "stable-after",
        "max-outage",
        "watchdog",
        "schedule",
        "command",
        "timeout",
        "bogus",
    ]);
    let string = || {
        prop_oneof![
            proptest::sample::select(vec![
                "qqbot",
                "discord",
                "websocket",
                "a",
                "a",
                "30s",
                "0s",
                "1h 30m",
                "99999999999h",
                "wss://x",
                "ws://127.0.0.1:1/",
                "ws://[::1",
                "https://",
                "http://localhost",
                "0 9 * * *",
                "61 * * * *",
                "* * * * * * *",
                "guilds",
                "message-content",
                "QQ_BOT_SECRET",
                "{\"op\":1}",
                "",
                "ws://@[",
                "https://u@[::1]:x",
            ])
            .prop_map(str::to_owned),
            text(16),
        ]
    };
    let value = prop_oneof![
        string().prop_map(|s| format!("{s:?}")),
        string().prop_map(|s| format!("'{s}'")),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        proptest::collection::vec(string(), 0..3).prop_map(|v| format!("{v:?}")),
        proptest::collection::vec(any::<u32>(), 0..4).prop_map(|v| format!("{v:?}")),
        text(8),
    ];
    prop_oneof![
        3 => proptest::sample::select(vec!["[gateway]", "[[adapter]]", "[[cron]]", "[adapter]", "[x]", ""])
            .prop_map(str::to_owned),
        8 => (key, value).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => text(24),
    ]
}

#[test]
fn any_gateway_toml_parses_or_names_a_line() {
    let path = Path::new("/p/gateway.toml");
    let mut runner = TestRunner::new(Config {
        cases: 1024,
        failure_persistence: None,
        ..Config::default()
    });
    let parsed = std::cell::Cell::new(0);
    let started = Instant::now();
    let result = runner.run(
        &proptest::collection::vec(toml_line(), 0..24).prop_map(|l| l.join("\n")),
        |text| {
            match hermes_svc::config::parse::<hermes_svc::platform::Protocol>(path, &text) {
                Ok(_) => parsed.set(parsed.get() + 1),
                Err(hermes_svc::config::ConfigError::Invalid { path: p, line, .. }) => {
                    let lines = text.matches('\n').count() + 1;
                    prop_assert_eq!(p.as_path(), path);
                    prop_assert!(
                        (1..=lines).contains(&line),
                        "line {} of a {}-line file",
                        line,
                        lines
                    );
                }
                Err(e) => prop_assert!(false, "not a line error: {e:?}"),
            }
            Ok(())
        },
    );
    eprintln!(
        "gateway.toml: 1024 texts in {:?}, {} parsed",
        started.elapsed(),
        parsed.get()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
