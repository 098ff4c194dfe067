//! Where a WeCom message goes: a conversation, by the id WeCom's `chatid` takes (a group's
//! chat id, or the user id of a one-to-one chat), `chat:ID` or just the id. An answer to a
//! message carries the callback's `req_id` as its `reply_to`: WeCom binds a reply to the
//! callback that asked for it, not to a message id.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, valid_id};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "chat:ID or a chat id (a group's chatid, or a user's userid)";
const EXAMPLE: &str = "chat:wrkSFfCgAALFgnrSsWU38puSEdsAXTuQ";

/// A conversation, by its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let id = text.strip_prefix("chat:").unwrap_or(text);
        if valid_id(id) && !id.contains(':') {
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
    fn wecom_targets_with_or_without_the_scheme() {
        let want = Target("zhangsan".into());
        assert_eq!(Target::from_str("zhangsan"), Ok(want.clone()));
        assert_eq!(Target::from_str("chat:zhangsan"), Ok(want.clone()));
        assert_eq!(want.to_string(), "chat:zhangsan");
        for bad in ["", "chat:", "a b", "a/b", "chat:x:y", "a?b"] {
            assert!(
                matches!(Target::from_str(bad), Err(TargetError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
