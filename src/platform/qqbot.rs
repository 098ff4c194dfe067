//! QQ Bot (q.qq.com, API v2): events over the op-code WebSocket gateway, messages through
//! the OpenAPI with an access token from the app id and secret.

mod close_code;
mod config;
mod connect;
mod fetch;
mod hermes;
mod intents;
mod normalise;
mod send;
mod target;
mod token;
mod hermes_ids;

pub use config::Config;
pub use intents::gated_intents;
pub use send::Sender;
pub use target::Target;

use super::{first, BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct QqBot;

impl Platform for QqBot {
    const KIND: &'static str = "qqbot";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["QQ_APP_ID", "QQ_CLIENT_SECRET"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "qqbot",
            source: hermes_ids::source,
        });
    const KEYS: &'static [&'static str] = &[
        "app-id",
        "secret-env",
        "api-base",
        "token-url",
        "gateway-url",
        "intents",
        "shard",
        "ws-ping",
    ];
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
        vec![&config.secret_env]
    }

    fn identity(config: &Config, secrets: &[Secret]) -> String {
        format!("qqbot:{}:{}", config.app_id, first(secrets))
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// An @-message by its event type, or a private-domain guild message whose `mentions` hold
    /// the bot, READY's `user` (`normalise.rs`).
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    const SENDER_ID: &'static str = "the QQ openid the event names its author by \
        (`author.member_openid` in a group, `author.user_openid` in a direct message, \
        `author.id` in a guild)";

    /// It shares the adapter's access token, one per credential.
    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let qq = connect::Qq::new(
            &spec.name,
            spec.protocol.clone(),
            secrets.first(),
            deps.shared.clone(),
        );
        crate::gateway::adapter::run(&spec.name, &spec.timing, qq, deps).await
    }

    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let token =
            shared
                .keep::<token::QqTokens>()
                .get(&config.app_id, &config.token_url, secrets.first());
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            token,
            shared.clone(),
            &config.api_base,
        )))
    }

    fn sender(
        config: &Config,
        _adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        let token =
            shared
                .keep::<token::QqTokens>()
                .get(&config.app_id, &config.token_url, secrets.first());
        Some(Sender::new(shared.clone(), config.api_base.clone(), token))
    }
}
