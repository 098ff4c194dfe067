//! Where a Telegram message goes: a chat (private, group, supergroup or channel) by its
//! `chat_id`, "Integer or String": the chat's id (`chat:ID`, negative for groups) or a
//! channel's `@username` (`chat:@channelusername`, 5-32 letters, digits and underscores).

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::malformed;
use crate::gateway::send::TargetError;

const EXPECTED: &str = "chat:CHAT_ID (an integer, negative for groups) or chat:@channelusername";
const EXAMPLE: &str = "chat:-1001234567890";

/// A chat, by `chat_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
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
            Ok(Target(id.to_owned()))
        } else {
            Err(malformed(text, EXPECTED, EXAMPLE))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chat:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telegram_targets() {
        for (text, id) in [
            ("chat:1001", "1001"),
            ("-1001234567890", "-1001234567890"),
            ("chat:@my_channel", "@my_channel"),
        ] {
            let t = Target::from_str(text).unwrap();
            assert_eq!(t, Target(id.into()), "{text}");
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
            assert!(Target::from_str(bad).is_err(), "{bad:?}");
        }
    }
}
