//! Where a DingTalk message goes: a person, by staff id (`user:ID`, through
//! `oToMessages/batchSend`), or a group conversation, by its open conversation id
//! (`group:CID`, through `groupMessages/send`). Both ids travel in the JSON body, never in a
//! URL path, so a conversation id's base64 (`+`, `/`, `=`) is taken as it is.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, MAX_ID};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "user:STAFF_ID or group:OPEN_CONVERSATION_ID";
const EXAMPLE: &str = "group:cidAbC123+xyz==";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A 1:1 chat with the robot, by the person's staff id (`senderStaffId`).
    User(String),
    /// A group the robot is in, by its `openConversationId` (`conversationId` of its
    /// messages).
    Group(String),
}

impl Target {
    pub(super) fn id(&self) -> &str {
        match self {
            Target::User(id) | Target::Group(id) => id,
        }
    }
}

fn valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && !id.bytes().all(|b| b == b'.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=_-$.:@".contains(&b))
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let target = match text.split_once(':') {
            Some(("user", id)) if valid(id) => Target::User(id.to_owned()),
            Some(("group", id)) if valid(id) => Target::Group(id.to_owned()),
            _ => return Err(malformed(text, EXPECTED, EXAMPLE)),
        };
        Ok(target)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::User(id) => write!(f, "user:{id}"),
            Target::Group(id) => write!(f, "group:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_groups_read_back_as_written() {
        for text in ["user:manager4220", "group:cidAbC123+xy/z=="] {
            assert_eq!(Target::from_str(text).unwrap().to_string(), text);
        }
        for bad in ["", "user:", "cid123", "group:a b", "group:..", "chan:x", "user:a\nb", "group:%2f"] {
            assert!(
                matches!(Target::from_str(bad), Err(TargetError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
