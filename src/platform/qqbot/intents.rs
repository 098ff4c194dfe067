//! The gateway intents QQ Bot knows by name, with their sources: what the adapter's
//! `intents` are looked up in, and what explains a 4014 ("intent not permitted").

use crate::config::Intent;

/// QQ Bot: tencent-connect/bot-docs, `docs/develop/api-v2/dev-prepare/interface-framework/event-emit.md`
/// ("事件订阅 Intents"): a new bot has guilds, guild-members and public-guild-messages; two
/// intents are for private-domain bots only; the rest are granted on application.
/// group-and-c2c-event is not in the documented defaults, but new bots are seen to reach
/// READY with it, and a group or C2C bot cannot work without it.
pub(super) const INTENTS: &[Intent] = &[
    ("guilds", 1 << 0, None),
    ("guild-members", 1 << 1, None),
    ("guild-messages", 1 << 9, Some(PRIVATE)),
    ("guild-message-reactions", 1 << 10, Some(APPLY)),
    ("direct-message", 1 << 12, Some(APPLY)),
    ("group-and-c2c-event", 1 << 25, None),
    ("interaction", 1 << 26, Some(APPLY)),
    ("message-audit", 1 << 27, Some(APPLY)),
    ("forums-event", 1 << 28, Some(PRIVATE)),
    ("audio-action", 1 << 29, Some(APPLY)),
    ("public-guild-messages", 1 << 30, None),
];
const PRIVATE: &str = "a private-domain bot";
const APPLY: &str = "an application on the QQ open platform";

/// What a new QQ bot can subscribe to without asking: @-messages in guilds, and group and
/// C2C messages.
pub(super) const DEFAULT_INTENTS: &[&str] = &["public-guild-messages", "group-and-c2c-event"];

/// The configured QQ intents that the platform grants only on request, with what each needs:
/// what a 4014 ("intent not permitted") most likely refers to.
pub fn gated_intents(bits: u64) -> Vec<String> {
    INTENTS
        .iter()
        .filter(|(_, bit, _)| bits & bit != 0)
        .filter_map(|(name, _, needs)| needs.map(|n| format!("{name} (needs {n})")))
        .collect()
}
