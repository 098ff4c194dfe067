//! Per-platform setup before each connection: credentials, the gateway URL, and the Identify
//! token. QQ Bot needs an access token fetched (and refreshed) from its token endpoint;
//! Discord hands out its gateway URL from `/gateway/bot`; a plain WebSocket needs neither.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::session::Dialect;
use crate::config::{AdapterSpec, Protocol, Secret};

/// Why setup failed.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// Retrying will not help (rejected credentials): the gateway exits 78.
    #[error("{0}")]
    Fatal(String),
    /// Network trouble or a server error: back off and retry.
    #[error("{0}")]
    Retry(String),
}

/// Everything one connection attempt needs.
#[derive(Debug)]
pub struct Prepared {
    pub url: String,
    pub authorization: Option<String>,
    pub dialect: Dialect,
}

pub struct Platform {
    spec: AdapterSpec,
    secret: Option<Secret>,
    http: reqwest::Client,
    access_token: Option<(String, Instant)>,
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

/// Refresh a QQ access token this long before it expires.
const TOKEN_MARGIN: Duration = Duration::from_secs(60);

impl Platform {
    pub fn new(spec: AdapterSpec, secret: Option<Secret>, http: reqwest::Client) -> Self {
        Self {
            spec,
            secret,
            http,
            access_token: None,
            gateway_url: None,
        }
    }

    /// Forget the cached gateway URL (after a failed connect, it may have moved).
    pub fn invalidate(&mut self) {
        self.gateway_url = None;
    }

    fn secret(&self) -> &str {
        self.secret.as_ref().map(Secret::expose).unwrap_or("")
    }

    pub async fn prepare(&mut self, resume_url: Option<&str>) -> Result<Prepared, PlatformError> {
        let properties =
            json!({"os": std::env::consts::OS, "browser": "hermes-svc", "device": "hermes-svc"});
        match self.spec.protocol.clone() {
            Protocol::QqBot {
                app_id,
                api_base,
                token_url,
                gateway_url,
                intents,
                shard,
                ..
            } => {
                let token = self.qq_access_token(&app_id, &token_url).await?;
                let auth = format!("QQBot {token}");
                let url = match gateway_url.or_else(|| self.gateway_url.clone()) {
                    Some(u) => u,
                    None => {
                        self.fetch_gateway_url(&format!("{api_base}/gateway"), &auth)
                            .await?
                    }
                };
                Ok(Prepared {
                    url,
                    authorization: None,
                    dialect: Dialect::Gateway {
                        token: auth,
                        intents,
                        shard: Some(shard),
                        properties,
                    },
                })
            }
            Protocol::Discord {
                api_base,
                gateway_url,
                intents,
                ..
            } => {
                let auth = format!("Bot {}", self.secret());
                let base = match resume_url
                    .map(str::to_owned)
                    .or(gateway_url)
                    .or_else(|| self.gateway_url.clone())
                {
                    Some(u) => u,
                    None => {
                        self.fetch_gateway_url(&format!("{api_base}/gateway/bot"), &auth)
                            .await?
                    }
                };
                let url = with_discord_query(&base);
                Ok(Prepared {
                    url,
                    authorization: None,
                    dialect: Dialect::Gateway {
                        token: self.secret().to_owned(),
                        intents,
                        shard: None,
                        properties,
                    },
                })
            }
            Protocol::WebSocket {
                url,
                ping_interval,
                app_ping,
                ..
            } => Ok(Prepared {
                url,
                authorization: self
                    .secret
                    .as_ref()
                    .map(|s| format!("Bearer {}", s.expose())),
                dialect: Dialect::Plain {
                    ping_interval,
                    app_ping,
                },
            }),
        }
    }

    async fn qq_access_token(
        &mut self,
        app_id: &str,
        token_url: &str,
    ) -> Result<String, PlatformError> {
        if let Some((token, expires)) = &self.access_token {
            if Instant::now() + TOKEN_MARGIN < *expires {
                return Ok(token.clone());
            }
        }
        let body = json!({"appId": app_id, "clientSecret": self.secret()});
        let request = self.http.post(token_url).json(&body);
        let rejected = format!("token endpoint rejected app-id {app_id}");
        let v = json_call("token endpoint", request, &rejected).await?;
        let token = v["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| PlatformError::Retry("token endpoint returned no access_token".into()))?
            .to_owned();
        // QQ sends expires_in as a string; accept a number too.
        let secs = v["expires_in"]
            .as_u64()
            .or_else(|| v["expires_in"].as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(7200);
        self.access_token = Some((token.clone(), Instant::now() + Duration::from_secs(secs)));
        Ok(token)
    }

    async fn fetch_gateway_url(
        &mut self,
        endpoint: &str,
        auth: &str,
    ) -> Result<String, PlatformError> {
        let request = self.http.get(endpoint).header("Authorization", auth);
        let v = json_call(
            "gateway endpoint",
            request,
            "gateway endpoint rejected the credential",
        )
        .await?;
        let url = v["url"]
            .as_str()
            .filter(|u| u.starts_with("ws://") || u.starts_with("wss://"))
            .ok_or_else(|| PlatformError::Retry("gateway endpoint returned no ws url".into()))?
            .to_owned();
        self.gateway_url = Some(url.clone());
        Ok(url)
    }
}

/// Send an HTTP request and read a JSON answer. A 401/403 means the credential is wrong, which
/// retrying cannot fix; anything else that fails is retried with backoff. Messages never carry
/// the URL (a query string could hold a credential) or the body.
async fn json_call(
    what: &str,
    request: reqwest::RequestBuilder,
    rejected: &str,
) -> Result<Value, PlatformError> {
    let retry = |e: reqwest::Error| PlatformError::Retry(format!("{what}: {}", e.without_url()));
    let resp = request.send().await.map_err(retry)?;
    let status = resp.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(PlatformError::Fatal(format!(
            "{rejected} ({status}): check the credential"
        )));
    }
    if !status.is_success() {
        return Err(PlatformError::Retry(format!("{what} answered {status}")));
    }
    resp.json().await.map_err(retry)
}
