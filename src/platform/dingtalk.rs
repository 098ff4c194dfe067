//! DingTalk (钉钉) in Stream mode: robot messages over a WebSocket opened with
//! `POST /v1.0/gateway/connections/open` (an endpoint and a one-use ticket), answers through
//! the robot API (`/v1.0/robot/oToMessages/batchSend`, `/v1.0/robot/groupMessages/send`) with
//! an access token from `/v1.0/oauth2/accessToken`.
//!
//! Sources: open.dingtalk.com "Stream 模式" and the robot API pages, the official SDKs
//! (open-dingtalk/dingtalk-stream-sdk-python `stream.py`, `frames.py`, `handlers.py`; -go,
//! -java), and Hermes 0.19.0's `plugins/platforms/dingtalk/adapter.py` for the ids Hermes uses.

mod config;
mod doctor;
mod fetch;
mod hermes;
mod hermes_ids;
mod normalise;
mod receive;
mod send;
mod target;
mod token;

pub use config::Config;
pub use send::Sender;
pub use target::Target;

use super::{first, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct DingTalk;

impl Platform for DingTalk {
    const KIND: &'static str = "dingtalk";
    /// Hermes 0.19.0 `gateway/config.py`: both are read from the environment.
    const HERMES_CREDENTIALS: &'static [&'static str] =
        &["DINGTALK_CLIENT_ID", "DINGTALK_CLIENT_SECRET"];
    const KEYS: &'static [&'static str] = &[
        "client-id",
        "secret-env",
        "robot-code",
        "api-base",
        "ping-interval",
    ];
    const HERMES: Option<super::message::HermesPlatform> = Some(super::message::HermesPlatform {
        name: "dingtalk",
        source: hermes_ids::source,
    });
    /// Hermes's own default (`DINGTALK_REQUIRE_MENTION`, false): a group message reaches a
    /// Stream robot only when it is @-mentioned anyway.
    const REQUIRE_MENTION: bool = false;
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

    fn question(
        adapter: &str,
        config: &Config,
        secrets: &[Secret],
        config_path: &std::path::Path,
    ) -> Option<super::standing::Question> {
        let secret = secrets.first()?.clone();
        Some(doctor::question(adapter, config, secret, config_path))
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.secret_env]
    }

    /// DingTalk hands each robot message to one of the app's Stream connections, so two
    /// profiles with one app would each lose what the other took: the identity is the client
    /// id (AppKey) alone.
    fn identity(config: &Config, _secrets: &[Secret]) -> String {
        format!("dingtalk:{}", config.client_id)
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// DingTalk's own flag that the robot was @-mentioned (`isInAtList`); a group message
    /// reaches a Stream robot only when it is, so the flag is the platform's word.
    fn addressed(kind: &str, data: &serde_json::Value, _bot: &super::BotId) -> bool {
        normalise::addressed(kind, data)
    }

    const SENDER_ID: &'static str =
        "the DingTalk staff id (`senderStaffId`; `senderId` when the sender has none)";

    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        receive::run(spec, secrets.into_iter().next(), deps).await
    }

    /// A message's files, by their download codes (`fetch.rs`), with a token cache of the
    /// fetcher's own.
    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let secret = Secret::new(first(secrets).to_owned());
        let token = token::DingTalkToken::new(&config.api_base, &config.client_id, secret);
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            token,
            shared.clone(),
            &config.api_base,
            &config.robot_code,
        )))
    }

    fn sender(
        config: &Config,
        _adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        let secret = Secret::new(first(secrets).to_owned());
        let token = token::DingTalkToken::new(&config.api_base, &config.client_id, secret);
        Some(Sender::new(
            shared.clone(),
            &config.api_base,
            &config.robot_code,
            token,
        ))
    }
}
