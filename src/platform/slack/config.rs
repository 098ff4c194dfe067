//! The keys only a Slack adapter has: the variables holding its two tokens (the app-level
//! token for Socket Mode, the bot token for the Web API), and how often it pings.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError};

/// What the official SDKs ping at (python-slack-sdk `ping_interval=5`, java-slack-sdk's 5 s
/// session monitor).
const PING_INTERVAL: Duration = Duration::from_secs(5);

/// A Slack adapter's settings: events over Socket Mode, messages through `chat.postMessage`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The variable holding the app-level token (`xapp-…`, scope `connections:write`).
    pub app_token_env: String,
    /// The variable holding the bot token (`xoxb-…`, scope `chat:write`; `files:write` to send
    /// files, `files:read` to fetch the files people send).
    pub bot_token_env: String,
    /// `https://slack.com`, or `api-base`, without a trailing slash; the Web API is under
    /// `/api/`.
    pub api_base: String,
    /// How often a WebSocket ping goes out; a pong missing past its deadline (`ack-timeout`)
    /// ends the connection.
    pub ping_interval: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    app_token_env: Option<String>,
    bot_token_env: Option<String>,
    api_base: Option<Spanned<String>>,
    ping_interval: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("app-token-env", &raw.app_token_env)?;
    keys.env_name("bot-token-env", &raw.bot_token_env)?;
    Ok(Config {
        app_token_env: keys.required(
            &raw.app_token_env,
            "app-token-env",
            "\"SLACK_APP_TOKEN\" (a variable in the profile's .env holding the app-level \
             token, xapp-…)",
        )?,
        bot_token_env: keys.required(
            &raw.bot_token_env,
            "bot-token-env",
            "\"SLACK_BOT_TOKEN\" (a variable in the profile's .env holding the bot token, \
             xoxb-…)",
        )?,
        api_base: keys.api_base(&raw.api_base, "https://slack.com")?,
        ping_interval: keys.opt_duration("ping-interval", &raw.ping_interval, PING_INTERVAL)?,
    })
}
