//! What reaches the agent bridges from outside: the Relay's frames and upgrade token (any local
//! user can dial a loopback port), platform payloads read as messages, a Hermes `config.yaml`
//! read for platform credentials, and a platform's file id and name made a stored file's name.
//! Never a panic; a frame too long is refused, a made-up token never passes, and every
//! message's ready-made reply is a target its platform reads back.

#![no_main]

use hermes_svc::agent::relay::{auth, frames::Lines};
use hermes_svc::gateway::spool::Event;
use hermes_svc::hermes_home::config_yaml;
use hermes_svc::media::{sniff, store};
use hermes_svc::platform::{normalise, Target};
use libfuzzer_sys::fuzz_target;

const KINDS: [(&str, &[&str]); 5] = [
    (
        "qqbot",
        &[
            "C2C_MESSAGE_CREATE",
            "GROUP_AT_MESSAGE_CREATE",
            "AT_MESSAGE_CREATE",
            "MESSAGE_CREATE",
            "DIRECT_MESSAGE_CREATE",
        ],
    ),
    ("discord", &["MESSAGE_CREATE"]),
    ("feishu", &["im.message.receive_v1"]),
    ("telegram", &["message", "channel_post", "business_message"]),
    ("weixin", &["message"]),
];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match mode % 5 {
        0 => {
            // Frames, cut wherever the input says.
            let mut lines = Lines::default();
            for chunk in text.split('\u{1}') {
                if lines.push(chunk).is_err() {
                    break;
                }
            }
        }
        1 => {
            let header = format!("Bearer {text}");
            assert!(auth::check(
                Some(&header),
                "hermes-svc-fuzz",
                b"fuzz-secret",
                1_800_000_000
            )
            .is_err());
            assert!(auth::check(
                Some(&text),
                "hermes-svc-fuzz",
                b"fuzz-secret",
                1_800_000_000
            )
            .is_err());
        }
        4 => {
            // A platform's file id and name as a stored file's name: never a path, always
            // KIND_ID_NAME of safe characters; and any bytes get a type.
            let (id, name) = text.split_once('\u{1}').unwrap_or((text.as_ref(), ""));
            let stored = store::file_name("photo", id, Some(name), "bin");
            assert!(
                !stored.contains('/') && !stored.starts_with('.'),
                "{stored:?}"
            );
            assert!(stored
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
            assert_eq!(stored.splitn(3, '_').count(), 3, "{stored:?}");
            let _ = sniff::sniff(rest);
        }
        3 => {
            // A Hermes config.yaml: whatever it holds, only the platforms asked about are
            // found, each at a key path, never a value.
            let platforms: &[(&str, &[&str])] = &[("telegram", &["TELEGRAM_BOT_TOKEN"])];
            for found in config_yaml::credentials(&text, platforms) {
                assert_eq!(found.platform, "telegram");
                assert!(!found.key.contains(": "), "{:?}", found.key);
            }
        }
        _ => {
            let Ok(data) = serde_json::from_slice::<serde_json::Value>(rest) else {
                return;
            };
            for (kind, events) in KINDS {
                for event in events {
                    let e = Event::new("e", "a", *event, None, data.clone());
                    if let Some(m) = normalise(kind, &e) {
                        if let Some(reply) = &m.reply {
                            let t = Target::parse(kind, &reply.target)
                                .unwrap_or_else(|e| panic!("{kind} reply {:?}: {e}", reply.target));
                            assert_eq!(t.to_string(), reply.target);
                        }
                        serde_json::to_string(&m).unwrap();
                    }
                }
            }
        }
    }
});
