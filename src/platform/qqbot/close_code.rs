//! What a close code of QQ's gateway means.

use std::time::Duration;

use crate::gateway::adapter::close_code::{row, CloseAction, Entry};
use CloseAction::{Fatal, PushBack, RefreshToken, Reidentify, Resume};

/// QQ Bot: tencent-connect/bot-docs, `docs/develop/api-v2/dev-prepare/error-trace/websocket.md`
/// (the WebSocket error codes, with whether RESUME and IDENTIFY may follow). 4004 is not in
/// that table; botgo's `errs/err.go` names it "authentication failed", and botpy
/// (`botpy/gateway.py`) and Tencent's qqbot-nodejs (`src/protocol/gateway/reconnect.ts`)
/// answer it by dropping the access token and connecting with a new one.
pub(super) const TABLE: &[Entry] = &[
    // "No" to both resume and identify in the table: the same frame would fail again, and a
    // new session is the only way to send a different one.
    row(4001, 4001, Reidentify, "invalid opcode"),
    row(4002, 4002, Reidentify, "invalid payload"),
    row(
        4004,
        4004,
        RefreshToken,
        "authentication failed (the access token expired or was replaced)",
    ),
    row(
        4006,
        4006,
        Reidentify,
        "invalid session id; resume is impossible, identify",
    ),
    row(4007, 4007, Reidentify, "invalid seq on resume"),
    row(
        4008,
        4008,
        PushBack(Duration::from_secs(60)),
        "payloads sent too fast",
    ),
    row(
        4009,
        4009,
        Resume,
        "connection expired; reconnect and resume",
    ),
    row(4010, 4010, Fatal, "invalid shard"),
    row(
        4011,
        4011,
        Fatal,
        "too many guilds for one connection; shard the bot",
    ),
    row(4012, 4012, Fatal, "invalid version"),
    row(4013, 4013, Fatal, "invalid intent"),
    row(4014, 4014, Fatal, "intent not permitted for this bot"),
    row(
        4900,
        4913,
        Reidentify,
        "platform internal error; identify again",
    ),
    row(
        4914,
        4914,
        Fatal,
        "the bot is offline and may only connect to the sandbox",
    ),
    row(4915, 4915, Fatal, "the bot is banned"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::adapter::close_code::{assert_ordered, classify};

    #[test]
    fn qq_refreshes_on_4004_and_reidentifies_on_internal_errors() {
        let qq = |code| classify(TABLE, code);
        assert_eq!(qq(Some(4004)).0, RefreshToken);
        for code in [4001, 4002, 4006, 4007, 4900, 4903, 4913] {
            assert_eq!(qq(Some(code)).0, Reidentify, "{code}");
        }
        for code in [4009, 1000, 1001, 1006, 4999] {
            assert_eq!(qq(Some(code)).0, Resume, "{code}");
        }
        assert_eq!(qq(None).0, Resume);
        for code in [4010, 4011, 4012, 4013, 4014, 4914, 4915] {
            assert_eq!(qq(Some(code)).0, Fatal, "{code}");
        }
        assert!(matches!(qq(Some(4008)).0, PushBack(_)));
    }

    #[test]
    fn the_table_has_no_overlapping_rows() {
        assert_ordered(TABLE);
    }
}
