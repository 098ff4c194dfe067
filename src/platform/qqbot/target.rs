//! Where a QQ message goes: a v2 group or one-to-one chat (`group:OPENID`, `user:OPENID`), a
//! guild channel (`channel:ID`) or a guild direct message (`dm:GUILD_ID`). Every id ends up as
//! a segment of the request's path, so each is held to the path rule.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, valid_id};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "group:OPENID, user:OPENID, channel:ID or dm:GUILD_ID";
const EXAMPLE: &str = "group:0C6E4F1A9B2D4E7F8A3B5C6D7E8F9A0B";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A v2 group chat, by group openid.
    Group(String),
    /// A v2 one-to-one chat, by user openid.
    User(String),
    /// A guild channel, by channel id.
    Channel(String),
    /// A guild direct message, by the DM session's guild id.
    Dm(String),
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let malformed = || malformed(text, EXPECTED, EXAMPLE);
        let (scheme, id) = text.split_once(':').ok_or_else(malformed)?;
        if !valid_id(id) {
            return Err(malformed());
        }
        let id = id.to_owned();
        Ok(match scheme {
            "group" => Target::Group(id),
            "user" => Target::User(id),
            "channel" => Target::Channel(id),
            "dm" => Target::Dm(id),
            _ => return Err(malformed()),
        })
    }
}

impl Target {
    pub fn id(&self) -> &str {
        match self {
            Target::Group(id) | Target::User(id) | Target::Channel(id) | Target::Dm(id) => id,
        }
    }

    /// A v2 chat (group or user), where a passive reply carries `msg_seq`.
    pub fn is_v2(&self) -> bool {
        matches!(self, Target::Group(_) | Target::User(_))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self {
            Target::Group(_) => "group",
            Target::User(_) => "user",
            Target::Channel(_) => "channel",
            Target::Dm(_) => "dm",
        };
        write!(f, "{scheme}:{}", self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::send::target::MAX_ID;
    use proptest::prelude::*;

    #[test]
    fn qq_targets_by_scheme() {
        let id = "0C6E4F1A9B2D4E7F8A3B5C6D7E8F9A0B";
        for (text, want) in [
            (format!("group:{id}"), Target::Group(id.into())),
            (format!("user:{id}"), Target::User(id.into())),
            ("channel:123".into(), Target::Channel("123".into())),
            ("dm:456".into(), Target::Dm("456".into())),
        ] {
            assert_eq!(Target::from_str(&text), Ok(want.clone()), "{text}");
            assert_eq!(want.to_string(), text);
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
            let e = Target::from_str(bad).unwrap_err();
            assert!(matches!(e, TargetError::Malformed { .. }), "{bad:?}: {e:?}");
        }
        let long = format!("group:{}", "A".repeat(MAX_ID + 1));
        assert!(Target::from_str(&long).is_err());
        // The error quotes what was given, cut short.
        let huge = format!("group:{}", "/".repeat(10_000));
        let msg = Target::from_str(&huge).unwrap_err().to_string();
        assert!(msg.len() < 600, "{}", msg.len());
        assert!(msg.contains("group:OPENID"), "{msg}");
    }

    proptest! {
        #[test]
        fn display_parses_back(id in "[A-Za-z0-9_.:!~-]{1,64}", scheme in 0..4usize) {
            prop_assume!(!id.bytes().all(|b| b == b'.'));
            let t = match scheme {
                0 => Target::Group(id),
                1 => Target::User(id),
                2 => Target::Channel(id),
                _ => Target::Dm(id),
            };
            prop_assert_eq!(Target::from_str(&t.to_string()), Ok(t));
        }
    }
}
