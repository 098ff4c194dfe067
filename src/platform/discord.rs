//! Discord: events over the op-code WebSocket gateway (the dialect QQ Bot copied), messages
//! through the REST API with the bot token.

mod close_code;
mod config;
mod connect;
mod fetch;
mod hermes;
mod intents;
mod normalise;
mod send;
mod target;
mod hermes_ids;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{first, BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Discord;

impl Platform for Discord {
    const KIND: &'static str = "discord";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["DISCORD_BOT_TOKEN"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "discord",
            source: hermes_ids::source,
        });
    const KEYS: &'static [&'static str] =
        &["token-env", "api-base", "gateway-url", "intents", "ws-ping"];
    type Config = Config;
    type Sender = Sender;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn from_hermes(
        home: &crate::hermes_home::HermesHome,
    ) -> Option<Result<crate::hermes_home::wing::Wing, String>> {
        hermes::from_hermes(home)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.token_env]
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("discord:{}", first(secrets))
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// The bot among `mentions`, or a reply to its message (`normalise.rs`); the bot is READY's
    /// `user`.
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    const SENDER_ID: &'static str = "the Discord user id (`author.id`, a snowflake)";

    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let discord = connect::Discord {
            config: spec.protocol.clone(),
            token: Secret::new(first(&secrets).to_owned()),
            shared: deps.shared.clone(),
            gateway_url: None,
        };
        crate::gateway::adapter::run(&spec.name, &spec.timing, discord, deps).await
    }

    fn fetcher(
        config: &Config,
        _secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            &config.api_base,
        )))
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
