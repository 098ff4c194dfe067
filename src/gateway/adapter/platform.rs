//! Per-platform setup before each connection: credentials, the gateway URL, and the Identify
//! token. QQ Bot needs an access token fetched (and refreshed) from its token endpoint;
//! Discord hands out its gateway URL and session start limit from `/gateway/bot`; a plain
//! WebSocket needs neither.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::time::Instant;

use super::close_code::GatewayPlatform;
use super::dialect::{Dialect, Gateway};
use super::identify_queue::SessionStartLimit;
use super::Shared;
use crate::config::{AdapterSpec, Protocol, Secret};

/// Why setup failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlatformError {
    /// Retrying will not help (rejected credentials): the gateway exits 78.
    #[error("{0}")]
    Fatal(String),
    /// Network trouble or a server error: back off and retry.
    #[error("{0}")]
    Retry(String),
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

/// A QQ access token and when it expires, on both clocks. The monotonic clock stops while
/// the machine sleeps, so a laptop that slept past the token's lifetime would still think
/// it fresh; the wall clock keeps counting but can be set back. The token is used only while
/// both say it is fresh.
#[derive(Debug)]
struct AccessToken {
    value: String,
    expires: Instant,
    expires_wall: SystemTime,
}

impl AccessToken {
    fn fresh(&self, now: Instant, wall: SystemTime) -> bool {
        now + TOKEN_MARGIN < self.expires && wall + TOKEN_MARGIN < self.expires_wall
    }
}

pub(crate) struct Platform {
    spec: AdapterSpec,
    secret: Option<Secret>,
    shared: Shared,
    access_token: Option<AccessToken>,
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

/// Refresh a QQ access token this long before it expires (the platform hands out a new one
/// in the last 60 s of the old one's life, and both work meanwhile).
const TOKEN_MARGIN: Duration = Duration::from_secs(60);

/// QQ's token endpoint answers errors in the body as `{"code": N, "message": "..."}`. These
/// codes mean the AppID or AppSecret is wrong, which no retry fixes; any other code is
/// retried with backoff. Source: tencent-connect/bot-docs, the API error-code page
/// (`docs/develop/api-v2/openapi/error/error.md`), and botgo's token source.
const QQ_CREDENTIAL_ERRORS: &[i64] = &[100007, 100016];

impl Platform {
    pub(crate) fn new(spec: AdapterSpec, secret: Option<Secret>, shared: Shared) -> Self {
        Self {
            spec,
            secret,
            shared,
            access_token: None,
            gateway_url: None,
        }
    }

    /// Forget the cached gateway URL (after a failed connect, it may have moved).
    pub(crate) fn invalidate(&mut self) {
        self.gateway_url = None;
    }

    /// Forget the access token: the platform said it is no longer valid (QQ close 4004).
    pub(crate) fn drop_token(&mut self) {
        self.access_token = None;
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
            Protocol::QqBot {
                app_id,
                api_base,
                token_url,
                gateway_url,
                intents,
                shard,
                ws_ping,
                ..
            } => {
                let token = self.qq_access_token(&app_id, &token_url).await?;
                let auth = format!("QQBot {token}");
                let (url, limit) = match gateway_url.or_else(|| self.gateway_url.clone()) {
                    Some(u) => (u, None),
                    None => {
                        self.discover(&format!("{api_base}/gateway/bot"), &auth)
                            .await?
                    }
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
            Protocol::Discord {
                api_base,
                gateway_url,
                intents,
                ws_ping,
                ..
            } => {
                let auth = format!("Bot {}", self.secret());
                let (base, limit) = match resume_url
                    .map(str::to_owned)
                    .or(gateway_url)
                    .or_else(|| self.gateway_url.clone())
                {
                    Some(u) => (u, None),
                    None => {
                        self.discover(&format!("{api_base}/gateway/bot"), &auth)
                            .await?
                    }
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
                limit: None,
            }),
        }
    }

    async fn qq_access_token(
        &mut self,
        app_id: &str,
        token_url: &str,
    ) -> Result<String, PlatformError> {
        let wall = crate::test_hook::wall_clock();
        if let Some(t) = &self.access_token {
            if t.fresh(Instant::now(), wall) {
                return Ok(t.value.clone());
            }
        }
        let body = json!({"appId": app_id, "clientSecret": self.secret()});
        let request = self.shared.http.post(token_url).json(&body);
        let (status, v) = self.shared.call("token endpoint", request).await?;
        let token = v["access_token"].as_str().filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(qq_token_error(app_id, status, &v));
        };
        // QQ sends expires_in as a string; accept a number too.
        let secs = v["expires_in"]
            .as_u64()
            .or_else(|| v["expires_in"].as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(7200);
        let lifetime = Duration::from_secs(secs);
        self.access_token = Some(AccessToken {
            value: token.to_owned(),
            expires: Instant::now() + lifetime,
            expires_wall: crate::test_hook::wall_clock() + lifetime,
        });
        Ok(token.to_owned())
    }

    /// `GET /gateway/bot`: the WebSocket URL, and the session start limit when given.
    async fn discover(
        &mut self,
        endpoint: &str,
        auth: &str,
    ) -> Result<(String, Option<SessionStartLimit>), PlatformError> {
        let request = self.shared.http.get(endpoint).header("Authorization", auth);
        let (status, v) = self.shared.call("gateway endpoint", request).await?;
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(PlatformError::Fatal(format!(
                "gateway endpoint rejected the credential ({status}{}): check the credential",
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
        Ok((url, SessionStartLimit::from_json(&v)))
    }
}

/// `: code N: message` from a platform's error body, or nothing. The message is the
/// platform's own text, cut short, so a log line never grows without bound.
fn platform_says(v: &Value) -> String {
    let code = v.get("code").and_then(Value::as_i64);
    let message = v
        .get("message")
        .or_else(|| v.get("msg"))
        .and_then(Value::as_str)
        .map(|m| m.chars().take(200).collect::<String>());
    match (code, message) {
        (Some(c), Some(m)) => format!(": code {c}: {m}"),
        (Some(c), None) => format!(": code {c}"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) => String::new(),
    }
}

/// A token answer without a token: a wrong AppID or AppSecret is fatal with the platform's
/// own code and message; anything else is retried.
fn qq_token_error(app_id: &str, status: reqwest::StatusCode, v: &Value) -> PlatformError {
    let code = v.get("code").and_then(Value::as_i64);
    let says = platform_says(v);
    if code.is_some_and(|c| QQ_CREDENTIAL_ERRORS.contains(&c))
        || status == reqwest::StatusCode::UNAUTHORIZED
        || status == reqwest::StatusCode::FORBIDDEN
    {
        return PlatformError::Fatal(format!(
            "token endpoint rejected app-id {app_id} ({status}{says}): check app-id in \
             gateway.toml and the secret in the profile's .env"
        ));
    }
    PlatformError::Retry(format!(
        "token endpoint answered {status} without an access_token{says}"
    ))
}

impl Shared {
    /// Send an HTTP request and read its JSON answer, whatever the status (platforms put their
    /// error codes in the body). At most a few such requests run at once per gateway, so a
    /// thousand adapters starting together neither flood the platform nor leave a thousand
    /// connections behind. Messages never carry the URL (a query string could hold a
    /// credential).
    async fn call(
        &self,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, Value), PlatformError> {
        let retry =
            |e: reqwest::Error| PlatformError::Retry(format!("{what}: {}", e.without_url()));
        let _permit = self.setup_permits.acquire().await;
        let resp = request.send().await.map_err(retry)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(retry)?;
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok((status, v)),
            Err(_) if status.is_success() => Err(PlatformError::Retry(format!(
                "{what} answered {status} with a body that is not JSON"
            ))),
            Err(_) => Ok((status, Value::Null)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stale_when_either_clock_says_so() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let t = AccessToken {
            value: "t".into(),
            expires: now + hour,
            expires_wall: wall + hour,
        };
        assert!(t.fresh(now, wall));
        // Suspended for two hours: the monotonic clock did not move, the wall clock did.
        assert!(!t.fresh(now, wall + 2 * hour));
        // The wall clock was set back: the monotonic clock still ends the token.
        assert!(!t.fresh(now + 2 * hour, wall - hour));
        // Within the refresh margin.
        assert!(!t.fresh(now + hour - TOKEN_MARGIN, wall));
    }

    #[test]
    fn token_errors_keep_the_platform_code_and_message() {
        let ok = reqwest::StatusCode::OK;
        let e = qq_token_error(
            "102",
            ok,
            &json!({"code": 100016, "message": "invalid appid or secret"}),
        );
        match e {
            PlatformError::Fatal(m) => {
                assert!(
                    m.contains("100016") && m.contains("invalid appid or secret"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        let e = qq_token_error("102", ok, &json!({"code": 11298, "message": "busy"}));
        assert!(matches!(e, PlatformError::Retry(m) if m.contains("11298") && m.contains("busy")));
        let e = qq_token_error("102", reqwest::StatusCode::BAD_GATEWAY, &Value::Null);
        assert!(matches!(e, PlatformError::Retry(m) if m.contains("502")));
    }
}
