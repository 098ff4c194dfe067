//! Where a Discord message goes: a channel (a DM channel too), by id, `channel:ID` or just
//! the id. The id ends up as a segment of the request's path.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, valid_id};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "channel:ID or a channel ID (a snowflake: digits)";
const EXAMPLE: &str = "channel:1234567890123456789";

/// A channel, by its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let id = text.strip_prefix("channel:").unwrap_or(text);
        // A snowflake is a 64-bit integer written in decimal.
        if valid_id(id) && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) {
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
    fn discord_targets_with_or_without_the_scheme() {
        let want = Target("1234567890123456789".into());
        assert_eq!(Target::from_str("1234567890123456789"), Ok(want.clone()));
        assert_eq!(
            Target::from_str("channel:1234567890123456789"),
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
                matches!(Target::from_str(bad), Err(TargetError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
