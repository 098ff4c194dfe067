//! Where a Mattermost post goes: a channel (open, private, a DM or a group DM: each is a
//! channel), by its id, `channel:ID` or the bare id (26 characters of lowercase base32). A
//! reply in a thread is the message's `reply_to`, the thread's root post id.

use std::fmt;
use std::str::FromStr;

use super::api::is_id;
use crate::gateway::send::target::malformed;
use crate::gateway::send::TargetError;

const EXPECTED: &str = "channel:ID or a channel ID (26 lowercase letters and digits)";
const EXAMPLE: &str = "channel:4xp9fdt77pncbef59f4k1qe83o";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let id = text.strip_prefix("channel:").unwrap_or(text);
        if is_id(id) {
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
    fn mattermost_targets_with_or_without_the_scheme() {
        let want = Target("4xp9fdt77pncbef59f4k1qe83o".into());
        assert_eq!(Target::from_str("4xp9fdt77pncbef59f4k1qe83o"), Ok(want.clone()));
        assert_eq!(Target::from_str("channel:4xp9fdt77pncbef59f4k1qe83o"), Ok(want.clone()));
        assert_eq!(want.to_string(), "channel:4xp9fdt77pncbef59f4k1qe83o");
        for bad in ["", "channel:", "4XP9FDT77PNCBEF59F4K1QE83O", "short", "4xp9fdt77pncbef59f4k1qe8/o"] {
            assert!(matches!(Target::from_str(bad), Err(TargetError::Malformed { .. })), "{bad:?}");
        }
    }
}
