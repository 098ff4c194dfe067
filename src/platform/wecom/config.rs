//! The keys only a WeCom AI-bot adapter has: the variables holding the bot's id and secret
//! (Hermes's own names by default), the long connection's address, and how often it pings.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError};

/// The long connection's address, as the official SDK has it built in
/// (`@wecom/aibot-node-sdk`, `DEFAULT_WS_URL`; a privately deployed WeCom shows its own in the
/// admin console).
pub(super) const DEFAULT_URL: &str = "wss://openws.work.weixin.qq.com";

/// The application-level ping's period: the official SDK's `heartbeatInterval` (30000 ms) and
/// the docs' "保持心跳" section.
const PING_INTERVAL: Duration = Duration::from_secs(30);

/// A WeCom AI-bot adapter's settings: one long connection per bot, subscribed with its id and
/// secret, events in and replies out over the same socket.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The variable holding the bot id (`WECOM_BOT_ID`, as Hermes reads it).
    pub bot_id_env: String,
    /// The variable holding the bot's secret (`WECOM_SECRET`, as Hermes reads it).
    pub secret_env: String,
    /// `wss://openws.work.weixin.qq.com`, or `url`.
    pub url: String,
    /// How often a `ping` command goes out; its answer missing past `ack-timeout` ends the
    /// connection.
    pub ping_interval: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    bot_id_env: Option<String>,
    secret_env: Option<String>,
    url: Option<Spanned<String>>,
    ping_interval: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("bot-id-env", &raw.bot_id_env)?;
    keys.env_name("secret-env", &raw.secret_env)?;
    let url = keys.url("url", &raw.url, "wss://", "ws://")?;
    Ok(Config {
        bot_id_env: raw.bot_id_env.unwrap_or_else(|| "WECOM_BOT_ID".to_owned()),
        secret_env: raw.secret_env.unwrap_or_else(|| "WECOM_SECRET".to_owned()),
        url: url.unwrap_or_else(|| DEFAULT_URL.to_owned()),
        ping_interval: keys.opt_duration("ping-interval", &raw.ping_interval, PING_INTERVAL)?,
    })
}
