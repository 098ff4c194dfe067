//! The gateway intents Discord knows by name, with their source: what the adapter's
//! `intents` are looked up in.

use crate::config::Intent;

/// Discord: discord-api-docs, `docs/events/Gateway.md` ("List of Intents"; privileged intents
/// must be enabled in the developer portal).
pub(super) const INTENTS: &[Intent] = &[
    ("guilds", 1 << 0, None),
    (
        "guild-members",
        1 << 1,
        Some("the privileged intent enabled in the developer portal"),
    ),
    ("guild-moderation", 1 << 2, None),
    ("guild-messages", 1 << 9, None),
    ("guild-message-reactions", 1 << 10, None),
    ("direct-messages", 1 << 12, None),
    ("direct-message-reactions", 1 << 13, None),
    (
        "message-content",
        1 << 15,
        Some("the privileged intent enabled in the developer portal"),
    ),
];
