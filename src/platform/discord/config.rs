//! A Discord adapter's keys: the variable holding the bot token, the API and gateway URLs
//! (for tests), and the intents.

use serde::Deserialize;
use toml::Spanned;

use super::intents::INTENTS;
use crate::config::{AdapterKeys, ConfigError};

const API_BASE: &str = "https://discord.com/api/v10";

/// A Discord adapter's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub token_env: String,
    pub api_base: String,
    pub gateway_url: Option<String>,
    pub intents: u64,
    pub ws_ping: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    token_env: Option<String>,
    api_base: Option<Spanned<String>>,
    gateway_url: Option<Spanned<String>>,
    intents: Option<Spanned<Vec<String>>>,
    ws_ping: Option<bool>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("token-env", &raw.token_env)?;
    Ok(Config {
        token_env: keys.required(
            &raw.token_env,
            "token-env",
            "\"DISCORD_BOT_TOKEN\" (a variable in the profile's .env)",
        )?,
        api_base: keys
            .url("api-base", &raw.api_base, "https://", "http://")?
            .unwrap_or_else(|| API_BASE.into()),
        gateway_url: keys.url("gateway-url", &raw.gateway_url, "wss://", "ws://")?,
        intents: keys.intents(
            &raw.intents,
            INTENTS,
            &["guild-messages", "direct-messages"],
        )?,
        ws_ping: raw.ws_ping.unwrap_or(true),
    })
}
