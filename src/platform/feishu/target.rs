//! Where a Feishu/Lark message goes: a group or one-to-one chat (`chat:oc_...`) or a user by
//! the open id this app sees (`user:ou_...`). Each id goes into the body, but it is also the
//! key the outbox orders a target's messages by, so the usual id rule holds.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, valid_id};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "chat:CHAT_ID or user:OPEN_ID";
const EXAMPLE: &str = "chat:oc_5ad11d72b830411d72b836c20";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A group or one-to-one chat, by chat id.
    Chat(String),
    /// A user, by the user's open id for this app.
    User(String),
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let malformed = || malformed(text, EXPECTED, EXAMPLE);
        let (scheme, id) = text.split_once(':').ok_or_else(malformed)?;
        if !valid_id(id) {
            return Err(malformed());
        }
        Ok(match scheme {
            "chat" => Target::Chat(id.to_owned()),
            "user" => Target::User(id.to_owned()),
            _ => return Err(malformed()),
        })
    }
}

impl Target {
    pub fn id(&self) -> &str {
        match self {
            Target::Chat(id) | Target::User(id) => id,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Chat(id) => write!(f, "chat:{id}"),
            Target::User(id) => write!(f, "user:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feishu_targets_are_chats_and_users() {
        for (text, want) in [
            (
                "chat:oc_a0553eda9014c201e6969b478895c230",
                Target::Chat("oc_a0553eda9014c201e6969b478895c230".into()),
            ),
            (
                "user:ou_7d8a6e6df7621556ce0d21922b676706",
                Target::User("ou_7d8a6e6df7621556ce0d21922b676706".into()),
            ),
        ] {
            assert_eq!(Target::from_str(text), Ok(want.clone()), "{text}");
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
            let e = Target::from_str(bad).unwrap_err();
            assert!(
                matches!(&e, TargetError::Malformed { expected, .. } if expected.contains("chat:CHAT_ID")),
                "{bad:?}: {e:?}"
            );
        }
    }
}
