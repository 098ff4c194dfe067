//! Where a Slack message goes: a conversation (a channel, a private channel or a DM), by id,
//! `channel:ID` or just the id (`C…`, `G…`, `D…`: capital letters and digits). A reply in a
//! thread is the message's `reply_to`, the parent's `ts`.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, valid_id};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "channel:ID or a conversation ID (C…, G… or D…)";
const EXAMPLE: &str = "channel:C0123456789";

/// A conversation, by its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let id = text.strip_prefix("channel:").unwrap_or(text);
        let shaped = id.len() <= 24
            && id.starts_with(['C', 'G', 'D'])
            && id
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if valid_id(id) && shaped {
            Ok(Target(id.to_owned()))
        } else {
            Err(malformed(text, EXPECTED, EXAMPLE))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "channel:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_targets_with_or_without_the_scheme() {
        let want = Target("C0123456789".into());
        assert_eq!(Target::from_str("C0123456789"), Ok(want.clone()));
        assert_eq!(Target::from_str("channel:C0123456789"), Ok(want.clone()));
        assert_eq!(want.to_string(), "channel:C0123456789");
        for bad in ["", "channel:", "c0123", "X0123", "C01 23", "C0123/x", "U0123456"] {
            assert!(
                matches!(Target::from_str(bad), Err(TargetError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
