//! Weixin through Tencent's iLink bot API: `ilink/bot/getupdates` long polling and
//! `sendmessage`, with a token from a QR login (`hermes-svc login weixin`) kept in a login
//! file rather than `.env`.

mod account;
mod cdn_cipher;
mod config;
mod context_tokens;
mod fetch;
mod hermes;
mod login;
mod normalise;
pub mod qr;
mod receive;
mod send;
mod target;
mod terminal;

pub use config::{login_file, Config};
pub use login::{LoginFileError, WeixinLogin};
pub use send::Sender;
pub use target::Target;

use super::{first, Platform};
use crate::config::{AdapterKeys, AdapterSpec, ConfigError, Secret};
use crate::gateway::adapter::long_poll;
use crate::gateway::adapter::{AdapterExit, Deps, Shared};

pub struct Weixin;

impl Platform for Weixin {
    const KIND: &'static str = "weixin";
    const HERMES_CREDENTIALS: &'static [&'static str] = &["WEIXIN_TOKEN", "WEIXIN_ACCOUNT_ID"];
    const HERMES: Option<crate::platform::message::HermesPlatform> =
        Some(crate::platform::message::HermesPlatform {
            name: "weixin",
            source: crate::platform::message::HermesSource::same,
        });
    const KEYS: &'static [&'static str] = &["api-base", "cdn-base", "poll-timeout", "poll-grace"];
    type Config = Config;
    type Sender = Sender;
    const LOGIN: Option<&'static str> =
        Some("a person to scan a QR code with the bot's WeChat account");
    const LOG_IN: Option<&'static str> = Some(
        "Draw the iLink QR code in the terminal, wait for the scan and the confirmation in \
         WeChat, and store the bot's token (mode 0600) where the profile's Weixin adapter reads \
         it. A running gateway waiting for a new login picks it up by itself.",
    );

    fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
        config::parse(keys)
    }

    fn from_hermes(
        home: &crate::hermes_home::HermesHome,
    ) -> Option<Result<crate::hermes_home::wing::Wing, String>> {
        hermes::from_hermes(home)
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

    fn normalise(kind: &str, data: &serde_json::Value) -> Option<super::message::Said> {
        normalise::normalise(kind, data)
    }

    // `addressed` stays the default, false: the iLink messages we know (`item_list` of text,
    // image, voice, file and video items, `from_user_id`, `room_id`) carry no mention entity
    // and no reference to a replied-to message, so nothing but the text could say the bot was
    // meant, and a name in the text is never taken for a mention. A room then reaches the
    // agent only where its access rules let a group message in without one.

    const SENDER_ID: &'static str = "the Weixin iLink user id (`from_user_id`)";

    /// It shares the adapter's account: its login and the peers' context tokens.
    async fn receive(spec: AdapterSpec<Config>, _secrets: Vec<Secret>, deps: Deps) -> AdapterExit {
        let c = &spec.protocol;
        let account = deps.shared.keep::<account::WeixinAccounts>().get(
            &spec.name,
            &c.login_file,
            &c.api_base,
        );
        let cursor = deps.spool.dir().join("cursors").join(&spec.name);
        let http = deps.shared.http.clone();
        let poller = receive::Weixin::new(&spec.name, http, account, c.poll, cursor);
        long_poll::run(&spec.name, &spec.timing, poller, deps).await
    }

    async fn log_in(
        spec: &AdapterSpec<Config>,
        timeout: std::time::Duration,
    ) -> Result<crate::platform::LoggedIn, crate::platform::LoginError> {
        terminal::log_in(spec, timeout).await
    }

    /// Files come from the CDN, encrypted, with no credential at all.
    fn fetcher(
        config: &Config,
        _secrets: &[Secret],
        _shared: &Shared,
        http: &reqwest::Client,
    ) -> Option<std::sync::Arc<dyn crate::media::fetch::Fetch>> {
        Some(std::sync::Arc::new(fetch::Fetcher::new(
            http.clone(),
            &config.cdn_base,
        )))
    }

    fn sender(
        config: &Config,
        adapter: &str,
        _secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Sender> {
        let account = shared.keep::<account::WeixinAccounts>().get(
            adapter,
            &config.login_file,
            &config.api_base,
        );
        Some(Sender::new(shared.http.clone(), account, &config.cdn_base))
    }
}
