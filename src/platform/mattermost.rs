//! Mattermost: events over the WebSocket `/api/v4/websocket`, what was missed read back by
//! REST v4, posts through `POST /api/v4/posts` with the bot's token (api.mattermost.com;
//! the server's `api4/`, `app/post.go` and `app/platform/web_conn.go`).

mod api;
mod config;
mod doctor;
mod fetch;
mod hermes;
mod hermes_ids;
mod normalise;
mod receive;
mod send;
mod target;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Mattermost;

impl Platform for Mattermost {
    const KIND: &'static str = "mattermost";
    /// hermes-agent 0.19.0 `gateway/config.py`: `MATTERMOST_TOKEN` (beside `MATTERMOST_URL`,
    /// which is no secret).
    const HERMES_CREDENTIALS: &'static [&'static str] = &["MATTERMOST_TOKEN"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "mattermost",
            source: hermes_ids::source,
        });
    const KEYS: &'static [&'static str] = &["server-url", "token-env", "ping-interval"];
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

    /// The server and the token: one bot account's events reach every connection it holds,
    /// so two gateways with one token would both answer each message.
    fn identity(config: &Config, secrets: &[Secret]) -> String {
        format!("mattermost:{}:{}", config.server_url, super::first(secrets))
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// The `posted` event's `mentions`, the server's own list of who a post mentions.
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    const SENDER_ID: &'static str =
        "the Mattermost user id (`user_id`, 26 lowercase letters and digits)";

    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let token = secrets
            .into_iter()
            .next()
            .unwrap_or_else(|| Secret::new(String::new()));
        receive::run(spec, token, deps).await
    }

    fn question(
        adapter: &str,
        config: &Config,
        secrets: &[Secret],
        config_path: &std::path::Path,
    ) -> Option<crate::platform::standing::Question> {
        let token = secrets.first()?.clone();
        Some(doctor::question(adapter, config, token, config_path))
    }

    /// The bot's token fetches a post's files from its own server (`fetch.rs`).
    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let token = Secret::new(secrets.first()?.expose().to_owned());
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            &config.server_url,
            token,
        )))
    }

    fn sender(
        config: &Config,
        _adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        let token = Secret::new(secrets.first()?.expose().to_owned());
        Some(Sender::new(shared.http.clone(), &config.server_url, token))
    }
}
