//! A Telegram adapter's keys: the variable holding the bot token, the API base (for
//! tests), the long poll's timing, which updates to ask for, and whether the adapter may
//! delete a webhook that blocks polling.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError, PollTiming};

const API_BASE: &str = "https://api.telegram.org";

/// Telegram's own long-poll ceiling is 50 s in practice; its docs ask for a positive
/// timeout and leave the rest to the client. 30 s is what the SDKs use.
const POLL_TIMEOUT: Duration = Duration::from_secs(30);

/// The update types a Telegram adapter asks for when `allowed-updates` is not given: the
/// messages and button presses a bot answers. Telegram remembers the list between calls, so
/// it is always sent, never left to whatever a previous client set.
const DEFAULT_UPDATES: &[&str] = &[
    "message",
    "edited_message",
    "channel_post",
    "callback_query",
];

/// Every update type the Bot API documents (the `Update` object's optional fields).
const UPDATES: &[&str] = &[
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "business_connection",
    "business_message",
    "edited_business_message",
    "deleted_business_messages",
    "message_reaction",
    "message_reaction_count",
    "inline_query",
    "chosen_inline_result",
    "callback_query",
    "shipping_query",
    "pre_checkout_query",
    "purchased_paid_media",
    "poll",
    "poll_answer",
    "my_chat_member",
    "chat_member",
    "chat_join_request",
    "chat_boost",
    "removed_chat_boost",
];

/// A Telegram adapter's settings: updates by `getUpdates` long polling, messages by
/// `sendMessage`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub token_env: String,
    pub api_base: String,
    pub poll: PollTiming,
    pub allowed_updates: Vec<String>,
    /// Delete a webhook that blocks `getUpdates` (409), rather than exit 78 naming it.
    pub delete_webhook: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    token_env: Option<String>,
    api_base: Option<Spanned<String>>,
    poll_timeout: Option<Spanned<String>>,
    poll_grace: Option<Spanned<String>>,
    allowed_updates: Option<Spanned<Vec<String>>>,
    delete_webhook: Option<bool>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("token-env", &raw.token_env)?;
    Ok(Config {
        token_env: keys.required(
            &raw.token_env,
            "token-env",
            "\"TELEGRAM_BOT_TOKEN\" (a variable in the profile's .env holding the token \
             @BotFather gave)",
        )?,
        api_base: keys.api_base(&raw.api_base, API_BASE)?,
        poll: keys.poll_timing(&raw.poll_timeout, &raw.poll_grace, POLL_TIMEOUT)?,
        allowed_updates: allowed_updates(keys, &raw.allowed_updates)?,
        delete_webhook: raw.delete_webhook.unwrap_or(false),
    })
}

/// `allowed-updates`, checked against the Bot API's list so a typo is not a bot that never
/// hears of a message.
fn allowed_updates(
    keys: &AdapterKeys,
    raw: &Option<Spanned<Vec<String>>>,
) -> Result<Vec<String>, ConfigError> {
    let name = keys.name();
    let Some(raw) = raw else {
        return Ok(DEFAULT_UPDATES.iter().map(|s| s.to_string()).collect());
    };
    for kind in raw.get_ref() {
        if !UPDATES.contains(&kind.as_str()) {
            return keys.err(
                raw.span(),
                format!(
                    "adapter {name:?}: allowed-updates has {kind:?}, which is not a Telegram \
                     update type; use some of: {}",
                    UPDATES.join(", ")
                ),
            );
        }
    }
    Ok(raw.get_ref().clone())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::Config;
    use crate::config::parse;
    use crate::platform::{GatewayConfig, Protocol};

    fn parse_str(text: &str) -> Result<GatewayConfig, crate::config::ConfigError> {
        parse(Path::new("/p/gateway.toml"), text)
    }

    const TG: &str = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"TG_TOKEN\"\n";
    const WX: &str = "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\n";

    #[test]
    fn telegram_defaults() {
        let spec = parse_str(TG).unwrap().adapters[0].clone();
        let Protocol::Telegram(Config {
            api_base,
            poll,
            allowed_updates,
            delete_webhook,
            ..
        }) = &spec.protocol
        else {
            panic!("{:?}", spec.protocol)
        };
        assert_eq!(api_base, "https://api.telegram.org");
        assert_eq!(poll.timeout, Duration::from_secs(30));
        assert_eq!(poll.deadline(poll.timeout), Duration::from_secs(40));
        assert_eq!(allowed_updates[0], "message");
        assert!(!delete_webhook);
        assert_eq!(spec.credential_envs(), ["TG_TOKEN"]);
    }

    #[test]
    fn mistakes_name_the_line_and_the_fix() {
        let cases = [
            (
                format!("{TG}allowed-updates = [\"mesage\"]\n"),
                "gateway.toml:5",
                "not a Telegram update type",
            ),
            (
                format!("{TG}poll-timeout = \"5m\"\n"),
                "gateway.toml:5",
                "longer than 120s",
            ),
            (
                format!("{TG}poll-timeout = \"500ms\"\n"),
                "gateway.toml:5",
                "a whole number of seconds, at least 1s",
            ),
            (
                format!("{WX}poll-timeout = \"1500ms\"\n"),
                "gateway.toml:4",
                "a whole number of seconds, at least 1s",
            ),
            (
                "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\n".to_owned(),
                "gateway.toml:1",
                "add token-env",
            ),
            (
                format!("{WX}token-env = \"T\"\n"),
                "gateway.toml:1",
                "token-env does not apply to kind weixin",
            ),
            (
                format!("{WX}delete-webhook = true\n"),
                "gateway.toml:1",
                "delete-webhook does not apply to kind weixin",
            ),
            (
                format!("{TG}api-base = \"http://api.telegram.org\"\n"),
                "gateway.toml:5",
                "only to loopback",
            ),
        ];
        for (text, at, what) in cases {
            let e = parse_str(&text).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(what), "{text:?} gave: {e}");
        }
    }
}
