//! Where a Matrix message goes: a room, by its id, `room:!opaque:server` or just the id. A
//! reply is the message's `reply_to`, the event id it answers.

use std::fmt;
use std::str::FromStr;

use super::config::is_id;
use crate::gateway::send::target::malformed;
use crate::gateway::send::TargetError;

const EXPECTED: &str = "room:!ID:SERVER or a room id (!ID:SERVER)";
const EXAMPLE: &str = "room:!abcdefgh:example.org";

/// A room, by its id. Aliases (`#name:server`) are not taken: they can be moved to another
/// room, and a queued message must go where it was meant to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let id = text.strip_prefix("room:").unwrap_or(text);
        if is_id(id, '!') && !id.contains(['/', '?', '#']) {
            Ok(Target(id.to_owned()))
        } else {
            Err(malformed(text, EXPECTED, EXAMPLE))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "room:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_targets_with_or_without_the_scheme() {
        let want = Target("!abc:example.org".into());
        assert_eq!(Target::from_str("!abc:example.org"), Ok(want.clone()));
        assert_eq!(Target::from_str("room:!abc:example.org"), Ok(want.clone()));
        assert_eq!(want.to_string(), "room:!abc:example.org");
        for bad in ["", "room:", "#alias:example.org", "!abc", "!:x", "!a b:x", "!a/b:x"] {
            assert!(
                matches!(Target::from_str(bad), Err(TargetError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
