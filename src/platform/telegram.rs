//! Telegram's Bot API: updates by `getUpdates` long polling, messages by `sendMessage`.

mod config;

pub use config::Config;

use super::{first, Platform};
use crate::config::{AdapterKeys, ConfigError, Secret};

pub struct Telegram;

impl Platform for Telegram {
    const KIND: &'static str = "telegram";
    const KEYS: &'static [&'static str] = &[
        "token-env",
        "api-base",
        "poll-timeout",
        "poll-grace",
        "allowed-updates",
        "delete-webhook",
    ];
    type Config = Config;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.token_env]
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("telegram:{}", first(secrets))
    }
}
