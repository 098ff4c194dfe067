//! Weixin through Tencent's iLink bot API: `ilink/bot/getupdates` long polling and
//! `sendmessage`, with a token from a QR login (`hermes-svc login weixin`) kept in a login
//! file rather than `.env`.

mod config;
mod login;
mod send;
mod target;

pub use config::{login_file, Config};
pub use login::{LoginFileError, WeixinLogin};
pub use send::Sender;
pub use target::Target;

use super::{first, Platform};
use crate::config::{AdapterKeys, ConfigError, Secret};
use crate::gateway::adapter::Shared;

pub struct Weixin;

impl Platform for Weixin {
    const KIND: &'static str = "weixin";
    const KEYS: &'static [&'static str] = &["api-base", "poll-timeout", "poll-grace"];
    type Config = Config;
    type Sender = Sender;

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn credential_envs(_config: &Config) -> Vec<&str> {
        vec![]
    }

    fn stored_credential(config: &Config) -> Option<Result<Secret, String>> {
        Some(
            WeixinLogin::read(&config.login_file)
                .map(|login| login.token())
                .map_err(|e| crate::error_chain::one_line(&e)),
        )
    }

    fn identity(_config: &Config, secrets: &[Secret]) -> String {
        format!("weixin:{}", first(secrets))
    }

    /// It shares the adapter's account: its login and the peers' context tokens.
    fn sender(
        config: &Config,
        adapter: &str,
        _secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        Some(Sender {
            http: shared.http.clone(),
            account: shared
                .weixin
                .get(adapter, &config.login_file, &config.api_base),
        })
    }
}
