//! Where a Weixin message goes: a peer, by iLink user id (`user:…@im.wechat`, the
//! `from_user_id` of the peer's messages). The id only lands in a JSON body, but it is also
//! the key the outbox orders a peer's messages by, so the usual id rule holds.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::{malformed, valid_id};
use crate::gateway::send::TargetError;

const EXPECTED: &str = "user:USER_ID (the from_user_id of the peer's messages)";
const EXAMPLE: &str = "user:o9cq80zL8rVhWxG4zz2ZeZ1M@im.wechat";

/// A peer, by iLink user id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        match text.strip_prefix("user:") {
            Some(id) if valid_id(id) => Ok(Target(id.to_owned())),
            _ => Err(malformed(text, EXPECTED, EXAMPLE)),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "user:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weixin_targets() {
        let w = Target::from_str("user:abc@im.wechat").unwrap();
        assert_eq!(w, Target("abc@im.wechat".into()));
        assert_eq!(w.to_string(), "user:abc@im.wechat");
        for bad in ["abc@im.wechat", "user:", "user:a b", "chat:x"] {
            assert!(Target::from_str(bad).is_err(), "{bad:?}");
        }
    }
}
