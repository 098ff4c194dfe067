//! Where a plain WebSocket's message goes: whatever its peer reads as an address, the
//! frame's `{target}`. It only ever lands inside a JSON string (`SendFrame`), so any one-line
//! text will do.

use std::fmt;
use std::str::FromStr;

use crate::gateway::send::target::malformed;
use crate::gateway::send::TargetError;

/// In characters: room for a URL or a composite key, not for a pasted paragraph.
const MAX_TARGET: usize = 256;

const EXPECTED: &str = "1-256 characters without control characters";
const EXAMPLE: &str = "room-42";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let len = text.chars().count();
        if (1..=MAX_TARGET).contains(&len) && !text.chars().any(char::is_control) {
            Ok(Target(text.to_owned()))
        } else {
            Err(malformed(text, EXPECTED, EXAMPLE))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_targets_are_any_one_line_text() {
        for text in [
            "room-42",
            "a/b?c#d%2F ..",
            "..",
            "用户 🦀",
            "{text}",
            "\"quoted\"",
            &"x".repeat(MAX_TARGET),
            &"字".repeat(MAX_TARGET),
        ] {
            let t = Target::from_str(text).unwrap();
            assert_eq!(t, Target(text.into()));
            assert_eq!((t.0.as_str(), t.to_string().as_str()), (text, text));
        }
        for bad in ["", "a\nb", "a\tb", "a\u{0}", "a\u{7f}", "a\u{85}b"] {
            let e = Target::from_str(bad).unwrap_err();
            assert!(matches!(e, TargetError::Malformed { .. }), "{bad:?}: {e:?}");
        }
        let long = "x".repeat(MAX_TARGET + 1);
        let msg = Target::from_str(&long).unwrap_err().to_string();
        assert!(msg.contains("1-256 characters"), "{msg}");
    }
}
