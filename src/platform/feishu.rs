//! Feishu and Lark: events over the long connection (`/callback/ws/endpoint`, pbbp2 frames),
//! messages through the Open API with a `tenant_access_token`.

mod bot_info;
mod config;
mod fetch;
mod hermes;
mod normalise;
pub mod pbbp2;
mod receive;
mod send;
mod target;
mod token;
mod hermes_ids;

pub use config::{Config, FeishuDomain};
pub use send::Sender;
pub use target::Target;

use super::{first, BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Feishu;

impl Platform for Feishu {
    const KIND: &'static str = "feishu";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["FEISHU_APP_ID", "FEISHU_APP_SECRET"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "feishu",
            source: hermes_ids::source,
        });
    const KEYS: &'static [&'static str] = &["domain", "app-id", "secret-env", "api-base"];
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

    /// A Feishu app's events go to whichever connection the platform picks, so its identity
    /// is the app id alone: two profiles with one app, whatever secret each holds, would each
    /// lose the events the other took.
    fn identity(config: &Config, _secrets: &[Secret]) -> String {
        format!("feishu:{}", config.app_id)
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// The bot's `open_id` (from `bot/v3/info`) among the message's `mentions`
    /// (`normalise.rs`).
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    const SENDER_ID: &'static str = "the Feishu open_id (`sender.sender_id.open_id`, `ou_…`)";

    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        receive::run(spec, secrets.into_iter().next(), deps).await
    }

    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let secret = Secret::new(first(secrets).to_owned());
        let token = token::FeishuToken::new(&config.api_base, &config.app_id, secret);
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
        let secret = Secret::new(first(secrets).to_owned());
        let token = token::FeishuToken::new(&config.api_base, &config.app_id, secret);
        Some(Sender::new(shared.clone(), &config.api_base, token))
    }
}
