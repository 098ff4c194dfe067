//! What a close code of Discord's gateway means.

use std::time::Duration;

use crate::gateway::adapter::close_code::{row, CloseAction, Entry};
use CloseAction::{Fatal, PushBack, Reidentify, Resume};

/// Discord: discord/discord-api-docs, `docs/topics/opcodes-and-status-codes.md` ("Gateway
/// Close Event Codes": `Reconnect` false is fatal here, `Resume` false identifies afresh),
/// which agrees with twilight-model's `CloseCode::can_reconnect`.
pub(super) const TABLE: &[Entry] = &[
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::adapter::close_code::{assert_ordered, classify};

    #[test]
    fn discord_4004_is_fatal_and_internal_range_means_nothing() {
        let dc = |code| classify(TABLE, code);
        assert_eq!(dc(Some(4004)).0, Fatal);
        assert_eq!(dc(Some(4903)).0, Resume);
        assert_eq!(dc(Some(4009)).0, Reidentify);
        assert!(matches!(dc(Some(4008)).0, PushBack(d) if d >= Duration::from_secs(60)));
    }

    #[test]
    fn the_table_has_no_overlapping_rows() {
        assert_ordered(TABLE);
    }
}
