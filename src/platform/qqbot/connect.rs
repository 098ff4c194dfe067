//! What a QQ adapter does before each connection: an access token from the token endpoint
//! (shared with the sender, `token`), then the gateway's URL from `GET /gateway/bot`
//! authorised by it, unless the config gives one.

use std::sync::Arc;

use super::close_code::TABLE;
use super::token::{QqToken, QqTokens};
use super::Config;
use crate::config::Secret;
use crate::gateway::adapter::close_code::{classify, CloseAction};
use crate::gateway::adapter::dialect::{self, Dialect, Gateway};
use crate::gateway::adapter::identify_queue::{self, SessionStartLimit};
use crate::gateway::adapter::setup::{discover, Connector, Discovery, PlatformError, Prepared};
use crate::gateway::adapter::Shared;

pub(super) struct Qq {
    adapter: String,
    config: Config,
    shared: Shared,
    /// This credential's token, shared with the sender.
    token: Arc<QqToken>,
    /// The token the last Identify carried, the one a 4004 close says is stale.
    token_used: Option<String>,
    gateway_url: Option<String>,
}

impl Qq {
    pub(super) fn new(
        adapter: &str,
        config: Config,
        secret: Option<&Secret>,
        shared: Shared,
    ) -> Self {
        let token = shared
            .keep::<QqTokens>()
            .get(&config.app_id, &config.token_url, secret);
        Self {
            adapter: adapter.to_owned(),
            config,
            shared,
            token,
            token_used: None,
            gateway_url: None,
        }
    }

    async fn access_token(&mut self) -> Result<String, PlatformError> {
        let token = self.token.get(&self.shared).await?;
        self.token_used = Some(token.clone());
        Ok(token)
    }

    /// QQ's `GET /gateway/bot`, authorised by an access token. A refusal means the platform
    /// no longer honours that token (it restarted, or ended the token early), never that the
    /// AppSecret is wrong: only the token endpoint can say that. So the token is dropped, a
    /// new one fetched (into `auth`, for the Identify too) and the call made again; a second
    /// refusal is retried with backoff, never fatal.
    async fn discover(
        &mut self,
        auth: &mut String,
    ) -> Result<(String, Option<SessionStartLimit>), PlatformError> {
        let endpoint = format!("{}/gateway/bot", self.config.api_base);
        if let Discovery::Found(url, limit) = discover(&self.shared, &endpoint, auth).await? {
            self.gateway_url = Some(url.clone());
            return Ok((url, limit));
        }
        tracing::info!(adapter = %self.adapter, "the gateway endpoint refused the access token; fetching a new one");
        self.drop_token();
        *auth = format!("QQBot {}", self.access_token().await?);
        match discover(&self.shared, &endpoint, auth).await? {
            Discovery::Found(url, limit) => {
                self.gateway_url = Some(url.clone());
                Ok((url, limit))
            }
            Discovery::Refused(said) => Err(PlatformError::Retry(format!(
                "{said}, with a newly fetched access token too; retrying (only the token \
                 endpoint can reject the AppSecret)"
            ))),
        }
    }
}

impl Connector for Qq {
    async fn prepare(&mut self, _resume_url: Option<&str>) -> Result<Prepared, PlatformError> {
        let mut auth = format!("QQBot {}", self.access_token().await?);
        let (url, limit) = match self
            .config
            .gateway_url
            .clone()
            .or_else(|| self.gateway_url.clone())
        {
            Some(u) => (u, None),
            None => self.discover(&mut auth).await?,
        };
        Ok(Prepared {
            url,
            authorization: None,
            dialect: Dialect::Gateway(Gateway {
                token: auth,
                intents: self.config.intents,
                shard: Some(self.config.shard),
                properties: dialect::properties(),
                ws_ping: self.config.ws_ping,
            }),
            limit,
        })
    }

    fn invalidate(&mut self) {
        self.gateway_url = None;
    }

    /// Forget the access token: the platform said it is no longer valid (close 4004).
    fn drop_token(&mut self) {
        if let Some(stale) = self.token_used.take() {
            self.token.invalidate(&stale);
        }
    }

    fn identify_key(&self) -> String {
        identify_queue::key("QqBot", &self.config.app_id)
    }

    fn close(&self, code: Option<u16>) -> (CloseAction, &'static str) {
        classify(TABLE, code)
    }

    fn fatal_hint(&self, code: Option<u16>) -> String {
        if code != Some(4014) {
            return String::new();
        }
        let gated = super::gated_intents(self.config.intents);
        if gated.is_empty() {
            "; the platform has not granted one of the configured intents".into()
        } else {
            format!(
                "; remove {} from intents in gateway.toml, or apply for it on the QQ open \
                 platform",
                gated.join(", ")
            )
        }
    }
}
