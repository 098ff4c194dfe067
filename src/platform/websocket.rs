//! A plain WebSocket: any server that pushes events as frames, probed with WebSocket pings
//! (or an application-level ping), sending through a frame template when it has one.

mod config;
mod connect;
mod send;
mod send_frame;
mod target;

pub use config::Config;
pub use send::Sender;
pub use send_frame::{Fields, SendFrame, SendFrameError};
pub use target::Target;

use super::{first, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct WebSocket;

impl Platform for WebSocket {
    const KIND: &'static str = "websocket";
    const KEYS: &'static [&'static str] = &[
        "url",
        "token-env",
        "ping-interval",
        "app-ping",
        "send-frame",
    ];
    type Config = Config;
    type Sender = Sender;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn credential_envs(config: &Config) -> Vec<&str> {
        config.token_env.as_deref().into_iter().collect()
    }

    fn identity(config: &Config, secrets: &[Secret]) -> String {
        format!("websocket:{}:{}", config.url, first(secrets))
    }

    /// A plain socket's frames have no shape of their own to read a message from.
    fn normalise(_kind: &str, _data: &serde_json::Value) -> Option<super::message::Said> {
        None
    }

    /// Only with a `send-frame`, through the adapter's live connection.
    async fn receive(spec: AdapterSpec<Config>, secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let outlet = spec
            .protocol
            .send_frame
            .is_some()
            .then(|| deps.shared.outlets.get(&spec.name));
        let plain = connect::Plain {
            config: spec.protocol.clone(),
            token: secrets.into_iter().next(),
            outlet,
        };
        crate::gateway::adapter::run(&spec.name, &spec.timing, plain, deps).await
    }

    fn sender(
        config: &Config,
        adapter: &str,
        _secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        Some(Sender {
            frame: config.send_frame.clone()?,
            outlet: shared.outlets.get(adapter),
        })
    }
}
