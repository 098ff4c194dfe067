//! Discord: events over the op-code WebSocket gateway (the dialect QQ Bot copied), messages
//! through the REST API with the bot token.

mod config;
mod intents;
mod send;
mod target;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{first, Platform};
use crate::config::{AdapterKeys, ConfigError, Secret};
use crate::gateway::adapter::Shared;

pub struct Discord;

impl Platform for Discord {
    const KIND: &'static str = "discord";
    const KEYS: &'static [&'static str] =
        &["token-env", "api-base", "gateway-url", "intents", "ws-ping"];
    type Config = Config;
    type Sender = Sender;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.token_env]
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("discord:{}", first(secrets))
    }

    fn sender(
        config: &Config,
        _adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        Some(Sender {
            http: shared.http.clone(),
            api_base: config.api_base.clone(),
            token: Secret::new(first(secrets).to_owned()),
        })
    }
}
