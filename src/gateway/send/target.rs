//! `--to` text to a [`Target`] and back, for every platform that can send: QQ
//! (`group:`, `user:`, `channel:`, `dm:`), Discord (`channel:ID` or the id), Feishu (`chat:`,
//! `user:`), Telegram (`chat:ID` or `chat:@USERNAME`), Weixin (`user:`) and a plain WebSocket
//! (docs/outbox.md#targets lists them for people; the `send --to` help and docs/api.md too).
//! A QQ or Discord id ends up as a segment of the request's URL path, so anything that could
//! end the segment, start a query, or climb out of the path is refused here rather than sent;
//! a Feishu or Weixin id keys the outbox's order per target, and is held to the same rule. A
//! plain WebSocket's target only ever lands inside a JSON string (`config::SendFrame`), so any
//! one-line text will do.

use std::fmt;

use super::{Target, TargetError};

/// Longer than any id either platform hands out (QQ openids are 32 characters, snowflakes
/// at most 20), short enough that a pasted paragraph is refused.
const MAX_ID: usize = 128;

/// A plain WebSocket's target, in characters: room for a URL or a composite key, not for a
/// pasted paragraph.
const MAX_WS_TARGET: usize = 256;

const QQ_EXPECTED: &str = "group:OPENID, user:OPENID, channel:ID or dm:GUILD_ID";
const QQ_EXAMPLE: &str = "group:0C6E4F1A9B2D4E7F8A3B5C6D7E8F9A0B";
const DISCORD_EXPECTED: &str = "channel:ID or a channel ID (a snowflake: digits)";
const DISCORD_EXAMPLE: &str = "channel:1234567890123456789";
const FEISHU_EXPECTED: &str = "chat:CHAT_ID or user:OPEN_ID";
const FEISHU_EXAMPLE: &str = "chat:oc_5ad11d72b830411d72b836c20";
const TELEGRAM_EXPECTED: &str =
    "chat:CHAT_ID (an integer, negative for groups) or chat:@channelusername";
const TELEGRAM_EXAMPLE: &str = "chat:-1001234567890";
const WEIXIN_EXPECTED: &str = "user:USER_ID (the from_user_id of the peer's messages)";
const WEIXIN_EXAMPLE: &str = "user:o9cq80zL8rVhWxG4zz2ZeZ1M@im.wechat";
const WS_EXPECTED: &str = "1-256 characters without control characters";
const WS_EXAMPLE: &str = "room-42";

impl Target {
    /// Parse `text` as a target on an adapter of `kind` (`qqbot`, `discord`, ...).
    pub fn parse(kind: &str, text: &str) -> Result<Target, TargetError> {
        match kind {
            "qqbot" => parse_qq(text),
            "discord" => parse_discord(text),
            "websocket" => parse_websocket(text),
            "feishu" => parse_feishu(text),
            "telegram" => parse_telegram(text),
            "weixin" => parse_weixin(text),
            other => Err(TargetError::CannotSend {
                kind: other.to_owned(),
            }),
        }
    }

    /// The id that goes into the request path (a WebSocket frame's `{target}`).
    pub(crate) fn id(&self) -> &str {
        match self {
            Target::QqGroup(id)
            | Target::QqUser(id)
            | Target::QqChannel(id)
            | Target::QqDm(id)
            | Target::DiscordChannel(id)
            | Target::WebSocket(id)
            | Target::FeishuChat(id)
            | Target::FeishuUser(id)
            | Target::TelegramChat(id)
            | Target::WeixinUser(id) => id,
        }
    }
}

fn parse_qq(text: &str) -> Result<Target, TargetError> {
    let malformed = || malformed(text, QQ_EXPECTED, QQ_EXAMPLE);
    let (scheme, id) = text.split_once(':').ok_or_else(malformed)?;
    if !valid_id(id) {
        return Err(malformed());
    }
    let id = id.to_owned();
    Ok(match scheme {
        "group" => Target::QqGroup(id),
        "user" => Target::QqUser(id),
        "channel" => Target::QqChannel(id),
        "dm" => Target::QqDm(id),
        _ => return Err(malformed()),
    })
}

fn parse_discord(text: &str) -> Result<Target, TargetError> {
    let id = text.strip_prefix("channel:").unwrap_or(text);
    // A snowflake is a 64-bit integer written in decimal.
    if valid_id(id) && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) {
        Ok(Target::DiscordChannel(id.to_owned()))
    } else {
        Err(malformed(text, DISCORD_EXPECTED, DISCORD_EXAMPLE))
    }
}

/// A chat id goes into the body and an open id too, but each is also the key the outbox
/// orders a target's messages by, so the same rule as QQ's ids holds.
fn parse_feishu(text: &str) -> Result<Target, TargetError> {
    let malformed = || malformed(text, FEISHU_EXPECTED, FEISHU_EXAMPLE);
    let (scheme, id) = text.split_once(':').ok_or_else(malformed)?;
    if !valid_id(id) {
        return Err(malformed());
    }
    Ok(match scheme {
        "chat" => Target::FeishuChat(id.to_owned()),
        "user" => Target::FeishuUser(id.to_owned()),
        _ => return Err(malformed()),
    })
}

/// Telegram's `chat_id`: "Integer or String", the chat's id or a channel's `@username`
/// (5-32 characters of letters, digits and underscores).
fn parse_telegram(text: &str) -> Result<Target, TargetError> {
    let id = text.strip_prefix("chat:").unwrap_or(text);
    let number = id
        .strip_prefix('-')
        .unwrap_or(id)
        .bytes()
        .all(|b| b.is_ascii_digit())
        && id.trim_start_matches('-').len() <= 20
        && id.parse::<i64>().is_ok();
    let username = id.strip_prefix('@').is_some_and(|u| {
        (5..=32).contains(&u.len()) && u.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if number || username {
        Ok(Target::TelegramChat(id.to_owned()))
    } else {
        Err(malformed(text, TELEGRAM_EXPECTED, TELEGRAM_EXAMPLE))
    }
}

/// An iLink user id only lands in a JSON body, but it is also the key the outbox orders a
/// peer's messages by, so the usual id rule holds.
fn parse_weixin(text: &str) -> Result<Target, TargetError> {
    match text.strip_prefix("user:") {
        Some(id) if valid_id(id) => Ok(Target::WeixinUser(id.to_owned())),
        _ => Err(malformed(text, WEIXIN_EXPECTED, WEIXIN_EXAMPLE)),
    }
}

fn parse_websocket(text: &str) -> Result<Target, TargetError> {
    let len = text.chars().count();
    if (1..=MAX_WS_TARGET).contains(&len) && !text.chars().any(char::is_control) {
        Ok(Target::WebSocket(text.to_owned()))
    } else {
        Err(malformed(text, WS_EXPECTED, WS_EXAMPLE))
    }
}

fn malformed(text: &str, expected: &'static str, example: &'static str) -> TargetError {
    TargetError::Malformed {
        // The text may be anything a caller typed: keep the error a line long.
        target: text.chars().take(MAX_ID + 16).collect(),
        expected,
        example,
    }
}

/// An id safe as one URL path segment: not empty, not `.` or `..` (which a URL parser
/// resolves away), and without a character that ends the segment or the path (`/`, `\`,
/// `?`, `#`), escapes one (`%`), or is space or a control.
pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && !id.bytes().all(|b| b == b'.')
        && !id.chars().any(|c| {
            matches!(c, '/' | '\\' | '?' | '#' | '%') || c.is_whitespace() || c.is_control()
        })
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self {
            Target::WebSocket(id) => return f.write_str(id),
            Target::QqGroup(_) => "group",
            Target::QqUser(_) | Target::FeishuUser(_) | Target::WeixinUser(_) => "user",
            Target::FeishuChat(_) | Target::TelegramChat(_) => "chat",
            Target::QqChannel(_) | Target::DiscordChannel(_) => "channel",
            Target::QqDm(_) => "dm",
        };
        write!(f, "{scheme}:{}", self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn qq_targets_by_scheme() {
        let id = "0C6E4F1A9B2D4E7F8A3B5C6D7E8F9A0B";
        for (text, want) in [
            (format!("group:{id}"), Target::QqGroup(id.into())),
            (format!("user:{id}"), Target::QqUser(id.into())),
            ("channel:123".into(), Target::QqChannel("123".into())),
            ("dm:456".into(), Target::QqDm("456".into())),
        ] {
            assert_eq!(Target::parse("qqbot", &text), Ok(want.clone()), "{text}");
            assert_eq!(want.to_string(), text);
        }
    }

    #[test]
    fn discord_targets_with_or_without_the_scheme() {
        let want = Target::DiscordChannel("1234567890123456789".into());
        assert_eq!(
            Target::parse("discord", "1234567890123456789"),
            Ok(want.clone())
        );
        assert_eq!(
            Target::parse("discord", "channel:1234567890123456789"),
            Ok(want.clone())
        );
        assert_eq!(want.to_string(), "channel:1234567890123456789");
        for bad in [
            "",
            "channel:",
            "group:1",
            "12a",
            "channel:1 2",
            "123456789012345678901",
        ] {
            assert!(
                matches!(
                    Target::parse("discord", bad),
                    Err(TargetError::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn telegram_and_weixin_targets() {
        for (text, id) in [
            ("chat:1001", "1001"),
            ("-1001234567890", "-1001234567890"),
            ("chat:@my_channel", "@my_channel"),
        ] {
            let t = Target::parse("telegram", text).unwrap();
            assert_eq!(t, Target::TelegramChat(id.into()), "{text}");
            assert_eq!(t.to_string(), format!("chat:{id}"));
        }
        for bad in [
            "chat:",
            "chat:12a",
            "chat:@ab",
            "chat:--1",
            "user:1",
            "chat:@a b",
        ] {
            assert!(Target::parse("telegram", bad).is_err(), "{bad:?}");
        }
        let w = Target::parse("weixin", "user:abc@im.wechat").unwrap();
        assert_eq!(w, Target::WeixinUser("abc@im.wechat".into()));
        assert_eq!(w.to_string(), "user:abc@im.wechat");
        for bad in ["abc@im.wechat", "user:", "user:a b", "chat:x"] {
            assert!(Target::parse("weixin", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ids_that_would_leave_their_path_segment_are_refused() {
        for bad in [
            "group:",
            "group:a/b",
            "group:a?b",
            "group:a#b",
            "group:a%2Fb",
            "group:a\\b",
            "group:..",
            "group:.",
            "group:a b",
            "group:a\tb",
            "group:a\nb",
            "group:a\u{7f}b",
            "group:a\u{85}b",
            "group:a\u{3000}b",
            "channel",
            "room:1",
            "Group:1",
        ] {
            let e = Target::parse("qqbot", bad).unwrap_err();
            assert!(matches!(e, TargetError::Malformed { .. }), "{bad:?}: {e:?}");
        }
        let long = format!("group:{}", "A".repeat(MAX_ID + 1));
        assert!(Target::parse("qqbot", &long).is_err());
        // The error quotes what was given, cut short.
        let huge = format!("group:{}", "/".repeat(10_000));
        let msg = Target::parse("qqbot", &huge).unwrap_err().to_string();
        assert!(msg.len() < 600, "{}", msg.len());
        assert!(msg.contains("group:OPENID"), "{msg}");
    }

    #[test]
    fn kinds_that_cannot_send_say_so() {
        assert_eq!(
            Target::parse("irc", "anything"),
            Err(TargetError::CannotSend { kind: "irc".into() })
        );
    }

    #[test]
    fn feishu_targets_are_chats_and_users() {
        for (text, want) in [
            (
                "chat:oc_a0553eda9014c201e6969b478895c230",
                Target::FeishuChat("oc_a0553eda9014c201e6969b478895c230".into()),
            ),
            (
                "user:ou_7d8a6e6df7621556ce0d21922b676706",
                Target::FeishuUser("ou_7d8a6e6df7621556ce0d21922b676706".into()),
            ),
        ] {
            assert_eq!(Target::parse("feishu", text), Ok(want.clone()), "{text}");
            assert_eq!(want.to_string(), text);
        }
        for bad in [
            "oc_1",
            "group:oc_1",
            "chat:",
            "chat:a/b",
            "user:a b",
            "user:..",
            "Chat:oc_1",
        ] {
            let e = Target::parse("feishu", bad).unwrap_err();
            assert!(
                matches!(&e, TargetError::Malformed { expected, .. } if expected.contains("chat:CHAT_ID")),
                "{bad:?}: {e:?}"
            );
        }
    }

    #[test]
    fn websocket_targets_are_any_one_line_text() {
        for text in [
            "room-42",
            "a/b?c#d%2F ..",
            "..",
            "用户 🦀",
            "{text}",
            "\"quoted\"",
            &"x".repeat(MAX_WS_TARGET),
            &"字".repeat(MAX_WS_TARGET),
        ] {
            let t = Target::parse("websocket", text).unwrap();
            assert_eq!(t, Target::WebSocket(text.into()));
            assert_eq!((t.id(), t.to_string().as_str()), (text, text));
        }
        for bad in ["", "a\nb", "a\tb", "a\u{0}", "a\u{7f}", "a\u{85}b"] {
            let e = Target::parse("websocket", bad).unwrap_err();
            assert!(matches!(e, TargetError::Malformed { .. }), "{bad:?}: {e:?}");
        }
        let long = "x".repeat(MAX_WS_TARGET + 1);
        let msg = Target::parse("websocket", &long).unwrap_err().to_string();
        assert!(msg.contains("1-256 characters"), "{msg}");
    }

    proptest! {
        #[test]
        fn display_parses_back(id in "[A-Za-z0-9_.:!~-]{1,64}", scheme in 0..4usize) {
            prop_assume!(!id.bytes().all(|b| b == b'.'));
            let t = match scheme {
                0 => Target::QqGroup(id),
                1 => Target::QqUser(id),
                2 => Target::QqChannel(id),
                _ => Target::QqDm(id),
            };
            prop_assert_eq!(Target::parse("qqbot", &t.to_string()), Ok(t));
        }

        #[test]
        fn parse_never_panics(kind in "qqbot|discord|websocket|feishu", text in "\\PC{0,80}") {
            let _ = Target::parse(&kind, &text);
        }
    }
}
