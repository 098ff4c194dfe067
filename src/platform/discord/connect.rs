//! What a Discord adapter does before each connection: the gateway's URL and the session
//! start limit from `GET /gateway/bot`, authorised by the bot token itself, unless the config
//! or the last session (its resume URL) gives one.

use super::close_code::TABLE;
use super::Config;
use crate::config::Secret;
use crate::gateway::adapter::close_code::{classify, CloseAction};
use crate::gateway::adapter::dialect::{self, Dialect, Gateway};
use crate::gateway::adapter::identify_queue;
use crate::gateway::adapter::setup::{discover, Connector, Discovery, PlatformError, Prepared};
use crate::gateway::adapter::Shared;

pub(super) struct Discord {
    pub(super) config: Config,
    pub(super) token: Secret,
    pub(super) shared: Shared,
    pub(super) gateway_url: Option<String>,
}

/// Discord wants the API version and encoding in the gateway URL's query.
fn with_query(base: &str) -> String {
    if base.contains('?') {
        return base.to_owned();
    }
    let after_scheme = base.split_once("://").map_or(base, |(_, r)| r);
    if after_scheme.contains('/') {
        format!("{base}?v=10&encoding=json")
    } else {
        format!("{base}/?v=10&encoding=json")
    }
}

impl Connector for Discord {
    async fn prepare(&mut self, resume_url: Option<&str>) -> Result<Prepared, PlatformError> {
        let auth = format!("Bot {}", self.token.expose());
        let known = resume_url
            .map(str::to_owned)
            .or_else(|| self.config.gateway_url.clone())
            .or_else(|| self.gateway_url.clone());
        let (base, limit) = match known {
            Some(u) => (u, None),
            // Discord's credential is the bot token itself: a refusal is final.
            None => {
                let endpoint = format!("{}/gateway/bot", self.config.api_base);
                match discover(&self.shared, &endpoint, &auth).await? {
                    Discovery::Found(url, limit) => {
                        self.gateway_url = Some(url.clone());
                        (url, limit)
                    }
                    Discovery::Refused(said) => {
                        return Err(PlatformError::Fatal(format!("{said}: check the bot token")))
                    }
                }
            }
        };
        Ok(Prepared {
            url: with_query(&base),
            authorization: None,
            dialect: Dialect::Gateway(Gateway {
                token: self.token.expose().to_owned(),
                intents: self.config.intents,
                shard: None,
                properties: dialect::properties(),
                ws_ping: self.config.ws_ping,
            }),
            limit,
        })
    }

    fn invalidate(&mut self) {
        self.gateway_url = None;
    }

    fn identify_key(&self) -> String {
        identify_queue::key("Discord", self.token.expose())
    }

    fn close(&self, code: Option<u16>) -> (CloseAction, &'static str) {
        classify(TABLE, code)
    }

    fn fatal_hint(&self, code: Option<u16>) -> String {
        match code {
            Some(4014) => "; enable the privileged intents (message-content, guild-members) \
                           for the bot in the Discord developer portal, or remove them from \
                           intents"
                .into(),
            _ => String::new(),
        }
    }
}
