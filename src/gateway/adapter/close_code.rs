//! What a WebSocket close code means for the session: one table, so that every code is
//! handled the same way everywhere.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseAction {
    /// Reconnect at once and resume with the last seq.
    Resume,
    /// Reconnect and identify afresh: the session is gone.
    Reidentify,
    /// The server asked us to slow down: wait at least this long, then resume.
    PushBack(Duration),
    /// Retrying cannot help (bad credentials, bad intents, banned): exit 78.
    Fatal(&'static str),
}

/// Classify a close code from the QQ Bot or Discord gateway. `None` is a connection that
/// ended without a close frame.
pub fn classify(code: Option<u16>) -> CloseAction {
    match code {
        None | Some(1000 | 1001 | 1006) => CloseAction::Resume,
        Some(4003 | 4006 | 4007) => CloseAction::Reidentify,
        Some(4004) => CloseAction::Fatal("authentication failed: check the bot's credentials"),
        Some(4008) => CloseAction::PushBack(Duration::from_secs(60)),
        Some(4010) => CloseAction::Fatal("invalid shard"),
        Some(4011) => CloseAction::Fatal("sharding required"),
        Some(4012) => CloseAction::Fatal("invalid API version"),
        Some(4013) => CloseAction::Fatal("invalid intents"),
        Some(4014) => CloseAction::Fatal("intents not permitted for this bot"),
        Some(4914) => CloseAction::Fatal("bot is offline or limited to the sandbox"),
        Some(4915) => CloseAction::Fatal("bot is banned"),
        // 4000 unknown error, 4009 session timed out, 4900-4913 platform internal errors, and
        // anything new: resume, and let the server say if it cannot.
        Some(_) => CloseAction::Resume,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        for code in [4000, 4009, 1000, 1001, 1006, 4900, 4913] {
            assert_eq!(classify(Some(code)), CloseAction::Resume, "{code}");
        }
        assert_eq!(classify(None), CloseAction::Resume);
        for code in [4004, 4010, 4011, 4012, 4013, 4014, 4914, 4915] {
            assert!(
                matches!(classify(Some(code)), CloseAction::Fatal(_)),
                "{code}"
            );
        }
        assert_eq!(classify(Some(4007)), CloseAction::Reidentify);
        assert!(
            matches!(classify(Some(4008)), CloseAction::PushBack(d) if d >= Duration::from_secs(60))
        );
    }
}
