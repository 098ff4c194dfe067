//! Telegram's Bot API: updates by `getUpdates` long polling, messages by `sendMessage`.

mod config;
mod send;
mod target;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{first, Platform};
use crate::config::{AdapterKeys, ConfigError, Secret};
use crate::gateway::adapter::Shared;

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
    type Sender = Sender;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.token_env]
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("telegram:{}", first(secrets))
    }

    fn sender(
        config: &Config,
        _adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        let token = Secret::new(first(secrets).to_owned());
        Some(Sender::new(shared.http.clone(), &config.api_base, token))
    }
}
