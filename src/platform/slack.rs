//! Slack: events over Socket Mode (`apps.connections.open`, then a WebSocket of envelopes),
//! messages through `chat.postMessage` with the bot token (docs/research/slack-socket-mode.md).

mod config;
mod doctor;
mod fetch;
mod hermes;
mod normalise;
mod receive;
mod send;
mod target;
mod hermes_ids;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Slack;

impl Platform for Slack {
    const KIND: &'static str = "slack";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "slack",
            source: hermes_ids::source,
        });
    const KEYS: &'static [&'static str] =
        &["app-token-env", "bot-token-env", "api-base", "ping-interval"];
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

    /// The app-level token first (Socket Mode), then the bot token (the Web API).
    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.app_token_env, &config.bot_token_env]
    }

    /// Slack spreads an app's events over all its open connections, so its identity is the
    /// app-level token: two profiles with one app would each lose the events the other took.
    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("slack:{}", super::first(secrets))
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// Slack's `<@U…>` markup for the bot's user id (from `auth.test`), or a reply in a
    /// thread the bot started (`normalise.rs`).
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    const SENDER_ID: &'static str = "the Slack user id (`user`, like `U012AB3CD`)";

    /// The app-level token receives; the bot token only asks `auth.test` who the bot is.
    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let mut secrets = secrets.into_iter();
        let mut next = || secrets.next().unwrap_or_else(|| Secret::new(String::new()));
        let (app_token, bot_token) = (next(), next());
        receive::run(spec, app_token, bot_token, deps).await
    }

    fn question(
        adapter: &str,
        config: &Config,
        secrets: &[Secret],
        config_path: &std::path::Path,
    ) -> Option<crate::platform::standing::Question> {
        let (app, bot) = (secrets.first()?.clone(), secrets.get(1)?.clone());
        Some(doctor::question(adapter, config, app, bot, config_path))
    }

    /// The bot token fetches a message's files (`fetch.rs`; scope `files:read`).
    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let token = Secret::new(secrets.get(1)?.expose().to_owned());
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            &config.api_base,
            token,
        )))
    }

    fn sender(
        config: &Config,
        _adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        let token = Secret::new(secrets.get(1)?.expose().to_owned());
        Some(Sender::new(shared.http.clone(), &config.api_base, token))
    }
}
