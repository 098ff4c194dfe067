//! Per-platform setup before each connection: credentials, the gateway URL, and the Identify
//! token. QQ Bot needs an access token fetched (and refreshed) from its token endpoint,
//! cached in `qq_token` where the sender finds it too; Discord hands out its gateway URL and session start limit from `/gateway/bot`; a plain
//! WebSocket needs neither.

use std::sync::Arc;

use serde_json::{json, Value};

use super::close_code::GatewayPlatform;
use super::dialect::{Dialect, Gateway};
use super::identify_queue::SessionStartLimit;
use super::qq_token::QqToken;
use super::Shared;
use crate::config::Secret;
use crate::platform::{discord, qqbot, websocket, AdapterSpec, Protocol};

/// Why setup failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlatformError {
    /// Retrying will not help (rejected credentials): the gateway exits 78.
    #[error("{0}")]
    Fatal(String),
    /// A server error, or an answer that is not one: back off and retry.
    #[error("{0}")]
    Retry(String),
    /// The request got no answer at all (connection refused, DNS, a reset, no answer in
    /// time): the platform said nothing, so nothing it asked for (Feishu's
    /// ReconnectInterval) applies; back off from the start of the schedule and retry.
    #[error("{0}")]
    Unreachable(String),
}

/// What `/gateway/bot` answered.
enum Discovery {
    Found(String, Option<SessionStartLimit>),
    /// 401 or 403, with the platform's words.
    Refused(String),
}

/// Everything one connection attempt needs.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) url: String,
    pub(crate) authorization: Option<String>,
    pub(crate) dialect: Dialect,
    /// What discovery said about the session start limit, when it said anything.
    pub(crate) limit: Option<SessionStartLimit>,
}

pub(crate) struct Platform {
    spec: AdapterSpec,
    secret: Option<Secret>,
    shared: Shared,
    /// QQ only: this credential's token, shared with the sender.
    qq_token: Option<Arc<QqToken>>,
    /// The token the last Identify carried, the one a 4004 close says is stale.
    token_used: Option<String>,
    gateway_url: Option<String>,
}

/// Discord wants the API version and encoding in the gateway URL's query.
fn with_discord_query(base: &str) -> String {
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

impl Platform {
    pub(crate) fn new(spec: AdapterSpec, secret: Option<Secret>, shared: Shared) -> Self {
        let qq_token = match &spec.protocol {
            Protocol::QqBot(qqbot::Config {
                app_id, token_url, ..
            }) => Some(shared.qq_tokens.get(app_id, token_url, secret.as_ref())),
            _ => None,
        };
        Self {
            spec,
            secret,
            shared,
            qq_token,
            token_used: None,
            gateway_url: None,
        }
    }

    /// Forget the cached gateway URL (after a failed connect, it may have moved).
    pub(crate) fn invalidate(&mut self) {
        self.gateway_url = None;
    }

    /// Forget the access token: the platform said it is no longer valid (QQ close 4004).
    pub(crate) fn drop_token(&mut self) {
        if let (Some(cache), Some(stale)) = (&self.qq_token, self.token_used.take()) {
            cache.invalidate(&stale);
        }
    }

    fn secret(&self) -> &str {
        self.secret.as_ref().map(Secret::expose).unwrap_or("")
    }

    pub(crate) async fn prepare(
        &mut self,
        resume_url: Option<&str>,
    ) -> Result<Prepared, PlatformError> {
        let properties =
            json!({"os": std::env::consts::OS, "browser": "hermes-svc", "device": "hermes-svc"});
        match self.spec.protocol.clone() {
            Protocol::QqBot(qqbot::Config {
                api_base,
                gateway_url,
                intents,
                shard,
                ws_ping,
                ..
            }) => {
                let mut auth = format!("QQBot {}", self.qq_access_token().await?);
                let (url, limit) = match gateway_url.or_else(|| self.gateway_url.clone()) {
                    Some(u) => (u, None),
                    None => self.discover_qq(&api_base, &mut auth).await?,
                };
                Ok(Prepared {
                    url,
                    authorization: None,
                    dialect: Dialect::Gateway(Gateway {
                        platform: GatewayPlatform::QqBot,
                        token: auth,
                        intents,
                        shard: Some(shard),
                        properties,
                        ws_ping,
                    }),
                    limit,
                })
            }
            Protocol::Discord(discord::Config {
                api_base,
                gateway_url,
                intents,
                ws_ping,
                ..
            }) => {
                let auth = format!("Bot {}", self.secret());
                let (base, limit) = match resume_url
                    .map(str::to_owned)
                    .or(gateway_url)
                    .or_else(|| self.gateway_url.clone())
                {
                    Some(u) => (u, None),
                    // Discord's credential is the bot token itself: a refusal is final.
                    None => match self
                        .discover(&format!("{api_base}/gateway/bot"), &auth)
                        .await?
                    {
                        Discovery::Found(url, limit) => (url, limit),
                        Discovery::Refused(said) => {
                            return Err(PlatformError::Fatal(format!(
                                "{said}: check the bot token"
                            )))
                        }
                    },
                };
                Ok(Prepared {
                    url: with_discord_query(&base),
                    authorization: None,
                    dialect: Dialect::Gateway(Gateway {
                        platform: GatewayPlatform::Discord,
                        token: self.secret().to_owned(),
                        intents,
                        shard: None,
                        properties,
                        ws_ping,
                    }),
                    limit,
                })
            }
            Protocol::WebSocket(websocket::Config {
                url,
                ping_interval,
                app_ping,
                ..
            }) => Ok(Prepared {
                url,
                authorization: self
                    .secret
                    .as_ref()
                    .map(|s| format!("Bearer {}", s.expose())),
                dialect: Dialect::Plain {
                    ping_interval,
                    app_ping,
                },
                limit: None,
            }),
            // Feishu's long connection has its own runner (`feishu`), which discovers its
            // endpoint itself; it never comes here.
            Protocol::Feishu(_) | Protocol::Telegram(_) | Protocol::Weixin(_) => {
                Err(PlatformError::Fatal(format!(
                    "a {} adapter has no op-code gateway to prepare",
                    self.spec.protocol.kind()
                )))
            }
        }
    }

    async fn qq_access_token(&mut self) -> Result<String, PlatformError> {
        let cache = self
            .qq_token
            .as_ref()
            .ok_or_else(|| PlatformError::Fatal("no token cache for a QQ adapter".into()))?;
        let token = cache.get(&self.shared).await?;
        self.token_used = Some(token.clone());
        Ok(token)
    }

    /// QQ's `GET /gateway/bot`, authorised by an access token. A refusal means the platform
    /// no longer honours that token (it restarted, or ended the token early), never that the
    /// AppSecret is wrong: only the token endpoint can say that. So the token is dropped, a
    /// new one fetched (into `auth`, for the Identify too) and the call made again; a second
    /// refusal is retried with backoff, never fatal.
    async fn discover_qq(
        &mut self,
        api_base: &str,
        auth: &mut String,
    ) -> Result<(String, Option<SessionStartLimit>), PlatformError> {
        let endpoint = format!("{api_base}/gateway/bot");
        if let Discovery::Found(url, limit) = self.discover(&endpoint, auth).await? {
            return Ok((url, limit));
        }
        tracing::info!(adapter = %self.spec.name, "the gateway endpoint refused the access token; fetching a new one");
        self.drop_token();
        *auth = format!("QQBot {}", self.qq_access_token().await?);
        match self.discover(&endpoint, auth).await? {
            Discovery::Found(url, limit) => Ok((url, limit)),
            Discovery::Refused(said) => Err(PlatformError::Retry(format!(
                "{said}, with a newly fetched access token too; retrying (only the token \
                 endpoint can reject the AppSecret)"
            ))),
        }
    }

    /// `GET /gateway/bot`: the WebSocket URL, and the session start limit when given; or the
    /// platform's refusal of the credential (401, 403), which each platform reads its own way.
    async fn discover(&mut self, endpoint: &str, auth: &str) -> Result<Discovery, PlatformError> {
        let request = self.shared.http.get(endpoint).header("Authorization", auth);
        let (status, v) = self.shared.call("gateway endpoint", request).await?;
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Ok(Discovery::Refused(format!(
                "gateway endpoint rejected the credential ({status}{})",
                platform_says(&v)
            )));
        }
        if !status.is_success() {
            return Err(PlatformError::Retry(format!(
                "gateway endpoint answered {status}{}",
                platform_says(&v)
            )));
        }
        let url = v["url"]
            .as_str()
            .filter(|u| u.starts_with("ws://") || u.starts_with("wss://"))
            .ok_or_else(|| PlatformError::Retry("gateway endpoint returned no ws url".into()))?
            .to_owned();
        self.gateway_url = Some(url.clone());
        Ok(Discovery::Found(url, SessionStartLimit::from_json(&v)))
    }
}

/// `: code N: message` from a platform's error body, or nothing. The message is the
/// platform's own text, cut short, so a log line never grows without bound.
pub(crate) fn platform_says(v: &Value) -> String {
    let code = v.get("code").and_then(Value::as_i64);
    let message = v
        .get("message")
        .or_else(|| v.get("msg"))
        .and_then(Value::as_str)
        .map(|m| crate::safe_text::clip(m, 200));
    match (code, message) {
        (Some(c), Some(m)) => format!(": code {c}: {m}"),
        (Some(c), None) => format!(": code {c}"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) => String::new(),
    }
}

impl Shared {
    /// Send an HTTP request and read its JSON answer, whatever the status (platforms put their
    /// error codes in the body). At most a few such requests run at once per gateway, so a
    /// thousand adapters starting together neither flood the platform nor leave a thousand
    /// connections behind. Messages never carry the URL (a query string could hold a
    /// credential).
    pub(crate) async fn call(
        &self,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, Value), PlatformError> {
        let said = |e: reqwest::Error| format!("{what}: {}", e.without_url());
        let _permit = self.setup_permits.acquire().await;
        let resp = request
            .send()
            .await
            .map_err(|e| PlatformError::Unreachable(said(e)))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| PlatformError::Retry(said(e)))?;
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok((status, v)),
            Err(_) if status.is_success() => Err(PlatformError::Retry(format!(
                "{what} answered {status} with a body that is not JSON"
            ))),
            Err(_) => Ok((status, Value::Null)),
        }
    }
}
