//! Matrix: events by the client-server API's `/sync` long poll, messages by
//! `PUT /rooms/{roomId}/send/m.room.message/{txnId}` (docs/research/matrix-client-server.md).

mod api;
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

use super::{first, BotId, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::long_poll;
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Matrix;

impl Platform for Matrix {
    const KIND: &'static str = "matrix";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["MATRIX_ACCESS_TOKEN", "MATRIX_PASSWORD"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "matrix",
            source: hermes_ids::source,
        });
    const KEYS: &'static [&'static str] = &[
        "homeserver",
        "user-id",
        "token-env",
        "rooms",
        "poll-timeout",
        "poll-grace",
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

    /// The account, not the token: two gateways syncing as one user (with one token or two)
    /// would each receive every message and both answer.
    fn identity(config: &Config, _secrets: &[Secret]) -> String {
        format!("matrix:{}:{}", config.homeserver, config.user_id)
    }

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    /// The bot's user id in `m.mentions` (which a rich reply to it carries too), or a pill
    /// from a client that predates it (`normalise.rs`).
    fn addressed(kind: &str, data: &serde_json::Value, bot: &BotId) -> bool {
        normalise::addressed(kind, data, bot)
    }

    const SENDER_ID: &'static str = "the Matrix user id (`sender`, like `@alice:example.org`)";

    /// The bot is the configured `user-id`: known before anything is asked of the homeserver.
    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let c = &spec.protocol;
        let bot = BotId {
            id: Some(c.user_id.clone()),
            handle: None,
        };
        deps.shared.whoami.set(&spec.name, bot);
        let token = Secret::new(first(&secrets).to_owned());
        let poller = receive::Matrix::new(receive::MatrixConfig {
            adapter: &spec.name,
            api: api::Api::new(deps.shared.http.clone(), &c.homeserver, &token),
            user_id: &c.user_id,
            token_env: &c.token_env,
            rooms: &c.rooms,
            poll: c.poll,
            cursor_file: deps.spool.dir().join("cursors").join(&spec.name),
            heartbeat: deps.heartbeat.clone(),
        });
        long_poll::run(&spec.name, &spec.timing, poller, deps).await
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

    fn fetcher(
        config: &Config,
        secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        let token = Secret::new(first(secrets).to_owned());
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            &config.homeserver,
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
        Some(Sender::new(api::Api::new(
            shared.http.clone(),
            &config.homeserver,
            &token,
        )))
    }
}
