//! The gateway intents each platform knows by name, with their sources: data the adapter
//! section looks names up in, and that explains a 4014 ("intent not permitted").

use toml::Spanned;

use super::value::Ctx;
use super::ConfigError;

/// An intent by name (kebab-case of the platform's constant), its bit, and what a bot needs
/// before the platform grants it (`None`: every bot has it).
pub(super) type Intent = (&'static str, u64, Option<&'static str>);

/// QQ Bot: tencent-connect/bot-docs, `docs/develop/api-v2/dev-prepare/interface-framework/event-emit.md`
/// ("事件订阅 Intents"): a new bot has guilds, guild-members and public-guild-messages; two
/// intents are for private-domain bots only; the rest are granted on application.
/// group-and-c2c-event is not in the documented defaults, but new bots are seen to reach
/// READY with it, and a group or C2C bot cannot work without it.
pub(super) const QQ_INTENTS: &[Intent] = &[
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
pub(super) const QQ_DEFAULT_INTENTS: &[&str] = &["public-guild-messages", "group-and-c2c-event"];

/// Discord: discord-api-docs, `docs/events/Gateway.md` ("List of Intents"; privileged intents
/// must be enabled in the developer portal).
pub(super) const DISCORD_INTENTS: &[Intent] = &[
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

/// The configured QQ intents that the platform grants only on request, with what each needs:
/// what a 4014 ("intent not permitted") most likely refers to.
pub fn qq_gated_intents(bits: u64) -> Vec<String> {
    QQ_INTENTS
        .iter()
        .filter(|(_, bit, _)| bits & bit != 0)
        .filter_map(|(name, _, needs)| needs.map(|n| format!("{name} (needs {n})")))
        .collect()
}

impl Ctx<'_> {
    pub(super) fn intents(
        &self,
        raw: &Option<Spanned<Vec<String>>>,
        table: &[Intent],
        default: &[&str],
    ) -> Result<u64, ConfigError> {
        let names: Vec<String> = match raw {
            Some(r) => r.get_ref().clone(),
            None => default.iter().map(|s| s.to_string()).collect(),
        };
        let mut bits = 0;
        for name in &names {
            match table.iter().find(|(n, _, _)| n == name) {
                Some((_, b, _)) => bits |= b,
                None => {
                    let known: Vec<_> = table.iter().map(|(n, _, _)| *n).collect();
                    return self.err(
                        raw.as_ref().map_or(0..0, |r| r.span()),
                        format!("unknown intent {name:?}; known: {}", known.join(", ")),
                    );
                }
            }
        }
        Ok(bits)
    }
}
