//! Discord: events over the op-code WebSocket gateway (the dialect QQ Bot copied), messages
//! through the REST API with the bot token.

mod config;
mod intents;

pub use config::Config;

use super::{first, Platform};
use crate::config::{AdapterKeys, ConfigError, Secret};

pub struct Discord;

impl Platform for Discord {
    const KIND: &'static str = "discord";
    const KEYS: &'static [&'static str] =
        &["token-env", "api-base", "gateway-url", "intents", "ws-ping"];
    type Config = Config;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.token_env]
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("discord:{}", first(secrets))
    }
}
