//! Telegram's Bot API: updates by `getUpdates` long polling, messages by `sendMessage`.

mod config;
mod fetch;
mod hermes;
mod normalise;
mod receive;
mod send;
mod target;
mod webhook;
mod hermes_ids;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{first, BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::long_poll;
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Telegram;

impl Platform for Telegram {
    const KIND: &'static str = "telegram";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["TELEGRAM_BOT_TOKEN"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "telegram",
            source: hermes_ids::source,
        });
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

    fn from_hermes(
        home: &crate::hermes_home::HermesHome,
    ) -> Option<Result<crate::hermes_home::wing::Wing, String>> {
        hermes::from_hermes(home)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.token_env]
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("telegram:{}", first(secrets))
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// A `mention`, `text_mention` or `/command@bot` entity naming the bot, or a reply to one
    /// of its messages (`normalise.rs`).
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    /// Hermes's default for Telegram: a group message needs no mention, since Telegram's own
    /// privacy mode (on unless turned off in @BotFather) already limits which group messages
    /// reach a bot at all.
    const REQUIRE_MENTION: bool = false;

    const SENDER_ID: &'static str =
        "the Telegram user id (`from.id`, a number; a chat's id when sent on behalf of a chat)";

    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let c = &spec.protocol;
        let poller = receive::Telegram::new(
            receive::TelegramConfig {
                adapter: &spec.name,
                api_base: &c.api_base,
                token: Secret::new(first(&secrets).to_owned()),
                token_env: &c.token_env,
                poll: c.poll,
                allowed_updates: &c.allowed_updates,
                delete_webhook: c.delete_webhook,
                whoami: deps.shared.whoami.clone(),
            },
            deps.shared.http.clone(),
        );
        long_poll::run(&spec.name, &spec.timing, poller, deps).await
    }

    fn question(
        adapter: &str,
        config: &Config,
        secrets: &[Secret],
        config_path: &std::path::Path,
    ) -> Option<crate::platform::standing::Question> {
        let token = secrets.first()?.clone();
        webhook::question(adapter, config, token, config_path)
    }

    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let token = Secret::new(first(secrets).to_owned());
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
        let token = Secret::new(first(secrets).to_owned());
        Some(Sender::new(shared.http.clone(), &config.api_base, token))
    }
}
