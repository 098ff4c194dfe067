//! WeCom (企业微信) AI bot (智能机器人): the bot's long connection
//! (`wss://openws.work.weixin.qq.com`, subscribed with the bot's id and secret), callbacks in,
//! replies and the bot's own messages out over the same socket; the files people send fetched
//! from their encrypted links and decrypted (`fetch.rs`). Written from the docs
//! ("智能机器人长连接", developer.work.weixin.qq.com/document/path/101463) and the official
//! SDK's source (`@wecom/aibot-node-sdk` 1.0.7).

mod config;
mod fetch;
mod file_cipher;
mod frame;
mod hermes;
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

pub struct WeCom;

impl Platform for WeCom {
    const KIND: &'static str = "wecom";
    const KEYS: &'static [&'static str] = &["bot-id-env", "secret-env", "url", "ping-interval"];
    /// hermes-agent 0.19.0 `gateway/config.py`: both must be set for Hermes to run WeCom.
    const HERMES_CREDENTIALS: &'static [&'static str] = &["WECOM_BOT_ID", "WECOM_SECRET"];
    /// Hermes's own adapter (`plugins/platforms/wecom/adapter.py`, `_on_message`) names the
    /// chat by `chatid`, else the sender's `userid`, `group` or `dm`, as the wing does.
    const HERMES: Option<super::message::HermesPlatform> = Some(super::message::HermesPlatform {
        name: "wecom",
        source: super::message::HermesSource::same,
    });
    const SENDER_ID: &'static str = "the WeCom user id (`from.userid`, like `zhangsan`)";
    type Config = Config;
    type Sender = Sender;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    /// The bot id first, then its secret.
    fn credential_envs(config: &Config) -> Vec<&str> {
        vec![&config.bot_id_env, &config.secret_env]
    }

    /// WeCom keeps one long connection per bot and closes the older when another subscribes:
    /// two gateways with one bot would each close the other's.
    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("wecom:{}", super::first(secrets))
    }

    fn from_hermes(
        home: &crate::hermes_home::HermesHome,
    ) -> Option<Result<crate::hermes_home::wing::Wing, String>> {
        hermes::from_hermes(home)
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// A group message reaches the bot only when it mentions it.
    fn addressed(kind: &str, _data: &serde_json::Value, _bot: &BotId) -> bool {
        kind == "message"
    }

    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let mut secrets = secrets.into_iter();
        let mut next = || secrets.next().unwrap_or_else(|| Secret::new(String::new()));
        let (bot_id, secret) = (next(), next());
        receive::run(spec, bot_id, secret, deps).await
    }

    /// A message's images, files and videos, each from its encrypted link and decrypted with
    /// its own key (`fetch.rs`); no credential is needed.
    fn fetcher(
        config: &Config,
        _secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            &config.url,
        )))
    }

    /// Through the adapter's live connection: WeCom takes replies on the socket only.
    fn sender(
        _config: &Config,
        adapter: &str,
        _secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        Some(Sender {
            outlet: shared.outlets.get(adapter),
        })
    }
}
