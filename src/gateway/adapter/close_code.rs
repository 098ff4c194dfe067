//! What a WebSocket close code means for the session, one table per platform.
//!
//! QQ Bot and Discord share opcodes but not close codes: 4004 is a rejected bot token on
//! Discord (fatal) and a stale access token on QQ (fetch a new one and go on), and QQ's
//! 4900-4913 allow a new Identify but not a Resume. Each table is transcribed from the
//! platform's own page, named above it, so a code is never read through the wrong platform.

use std::time::Duration;

/// Which platform's gateway closed the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GatewayPlatform {
    QqBot,
    Discord,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseAction {
    /// Reconnect and resume with the last seq.
    Resume,
    /// Reconnect and identify afresh: the session is gone, or was never valid.
    Reidentify,
    /// The access token is stale (QQ 4004): drop it, fetch a new one, and resume.
    RefreshToken,
    /// The server asked us to slow down: wait at least this long, then resume.
    PushBack(Duration),
    /// Retrying cannot help (bad credentials, bad intents, banned): exit 78.
    Fatal,
}

/// One row of a platform's table: a range of codes, what to do, and what the platform says
/// the code means (shown in the adapter's last error and, when fatal, in the exit message).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) first: u16,
    pub(crate) last: u16,
    pub(crate) action: CloseAction,
    pub(crate) meaning: &'static str,
}

const fn row(first: u16, last: u16, action: CloseAction, meaning: &'static str) -> Entry {
    Entry {
        first,
        last,
        action,
        meaning,
    }
}

use CloseAction::{Fatal, PushBack, RefreshToken, Reidentify, Resume};

/// QQ Bot: tencent-connect/bot-docs, `docs/develop/api-v2/dev-prepare/error-trace/websocket.md`
/// (the WebSocket error codes, with whether RESUME and IDENTIFY may follow). 4004 is not in
/// that table; botgo's `errs/err.go` names it "authentication failed", and botpy
/// (`botpy/gateway.py`) and Tencent's qqbot-nodejs (`src/protocol/gateway/reconnect.ts`)
/// answer it by dropping the access token and connecting with a new one.
pub(crate) const QQ_BOT: &[Entry] = &[
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

/// Discord: discord/discord-api-docs, `docs/topics/opcodes-and-status-codes.md` ("Gateway
/// Close Event Codes": `Reconnect` false is fatal here, `Resume` false identifies afresh),
/// which agrees with twilight-model's `CloseCode::can_reconnect`.
pub(crate) const DISCORD: &[Entry] = &[
    row(4000, 4000, Resume, "unknown error"),
    row(4001, 4001, Reidentify, "unknown opcode"),
    row(4002, 4002, Resume, "decode error"),
    row(4003, 4003, Reidentify, "not authenticated"),
    row(
        4004,
        4004,
        Fatal,
        "authentication failed: check the bot token",
    ),
    row(4005, 4005, Reidentify, "already authenticated"),
    row(4007, 4007, Reidentify, "invalid seq on resume"),
    row(
        4008,
        4008,
        PushBack(Duration::from_secs(60)),
        "rate limited",
    ),
    row(4009, 4009, Reidentify, "session timed out"),
    row(4010, 4010, Fatal, "invalid shard"),
    row(4011, 4011, Fatal, "sharding required"),
    row(4012, 4012, Fatal, "invalid API version"),
    row(4013, 4013, Fatal, "invalid intents"),
    row(
        4014,
        4014,
        Fatal,
        "disallowed intents: enable them in the developer portal",
    ),
];

impl GatewayPlatform {
    pub(crate) fn table(self) -> &'static [Entry] {
        match self {
            GatewayPlatform::QqBot => QQ_BOT,
            GatewayPlatform::Discord => DISCORD,
        }
    }

    /// What to do after the server closed with `code`. `None` is a connection that ended
    /// without a close frame (or with a transport-level code such as 1000, 1001 or 1006):
    /// resume, and let the server say if it cannot. A code the table does not know is
    /// resumed too, because a new code is far more often transient than fatal.
    pub(crate) fn classify(self, code: Option<u16>) -> (CloseAction, &'static str) {
        let Some(code) = code else {
            return (Resume, "no close frame");
        };
        self.table()
            .iter()
            .find(|e| (e.first..=e.last).contains(&code))
            .map_or((Resume, "not in the platform's table"), |e| {
                (e.action, e.meaning)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qq_refreshes_on_4004_and_reidentifies_on_internal_errors() {
        let qq = GatewayPlatform::QqBot;
        assert_eq!(qq.classify(Some(4004)).0, RefreshToken);
        for code in [4001, 4002, 4006, 4007, 4900, 4903, 4913] {
            assert_eq!(qq.classify(Some(code)).0, Reidentify, "{code}");
        }
        for code in [4009, 1000, 1001, 1006, 4999] {
            assert_eq!(qq.classify(Some(code)).0, Resume, "{code}");
        }
        assert_eq!(qq.classify(None).0, Resume);
        for code in [4010, 4011, 4012, 4013, 4014, 4914, 4915] {
            assert_eq!(qq.classify(Some(code)).0, Fatal, "{code}");
        }
    }

    #[test]
    fn discord_4004_is_fatal_and_internal_range_means_nothing() {
        let dc = GatewayPlatform::Discord;
        assert_eq!(dc.classify(Some(4004)).0, Fatal);
        assert_eq!(dc.classify(Some(4903)).0, Resume);
        assert_eq!(dc.classify(Some(4009)).0, Reidentify);
        assert!(matches!(dc.classify(Some(4008)).0, PushBack(d) if d >= Duration::from_secs(60)));
    }

    #[test]
    fn tables_have_no_overlapping_rows() {
        for table in [QQ_BOT, DISCORD] {
            for (i, a) in table.iter().enumerate() {
                assert!(a.first <= a.last);
                for b in &table[i + 1..] {
                    assert!(a.last < b.first, "{} overlaps {}", a.first, b.first);
                }
            }
        }
    }
}
