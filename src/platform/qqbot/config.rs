//! A QQ Bot adapter's keys: the app's id and the variable holding its secret, the API and
//! token endpoints (for tests), the intents and the shard.

use serde::Deserialize;
use toml::Spanned;

use super::intents::{DEFAULT_INTENTS, INTENTS};
use crate::config::{AdapterKeys, ConfigError};

const API_BASE: &str = "https://api.sgroup.qq.com";
const TOKEN_URL: &str = "https://bots.qq.com/app/getAppAccessToken";

/// A QQ Bot adapter's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub app_id: String,
    pub secret_env: String,
    pub api_base: String,
    pub token_url: String,
    /// Skip `GET {api_base}/gateway` and connect here.
    pub gateway_url: Option<String>,
    pub intents: u64,
    pub shard: [u32; 2],
    /// Probe the socket with WebSocket pings too. Off by default: QQ's own clients never
    /// send them, and nothing public says the platform answers them.
    pub ws_ping: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    app_id: Option<String>,
    secret_env: Option<String>,
    api_base: Option<Spanned<String>>,
    token_url: Option<Spanned<String>>,
    gateway_url: Option<Spanned<String>>,
    intents: Option<Spanned<Vec<String>>>,
    shard: Option<[u32; 2]>,
    ws_ping: Option<bool>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("secret-env", &raw.secret_env)?;
    Ok(Config {
        app_id: app_id(
            keys,
            keys.required(&raw.app_id, "app-id", "\"<your bot's AppID>\"")?,
        )?,
        secret_env: keys.required(
            &raw.secret_env,
            "secret-env",
            "\"QQ_BOT_SECRET\" (a variable in the profile's .env)",
        )?,
        api_base: keys
            .url("api-base", &raw.api_base, "https://", "http://")?
            .unwrap_or_else(|| API_BASE.into()),
        token_url: keys
            .url("token-url", &raw.token_url, "https://", "http://")?
            .unwrap_or_else(|| TOKEN_URL.into()),
        gateway_url: keys.url("gateway-url", &raw.gateway_url, "wss://", "ws://")?,
        intents: keys.intents(&raw.intents, INTENTS, DEFAULT_INTENTS)?,
        shard: raw.shard.unwrap_or([0, 1]),
        ws_ping: raw.ws_ping.unwrap_or(false),
    })
}

/// A QQ bot's AppID is a number (102000000): one that holds anything else, a newline above
/// all, would go into every token request and identity hash as it is.
fn app_id(keys: &AdapterKeys, id: String) -> Result<String, ConfigError> {
    if (1..=32).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(id);
    }
    keys.err(
        keys.span(),
        format!(
            "adapter {:?}: app-id ({} characters, not shown) is not a QQ AppID, which is a \
             number; copy the AppID from the bot's page on q.qq.com",
            keys.name(),
            id.chars().count()
        ),
    )
}
