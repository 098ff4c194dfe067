//! Endpoint discovery, before every connection: `POST {base}/callback/ws/endpoint` with the
//! app's id and secret answers with the WebSocket URL (a fresh one each time, its query holding
//! the connection's ticket) and the server's `ClientConfig`.
//!
//! What the answer's `code` means follows the official SDKs (larksuite/oapi-sdk-go
//! `ws/const.go` and `ws/client.go` `getConnURL`, larksuite/node-sdk `ws-client/enum.ts` and
//! `pullConnectConfig`, larksuite/oapi-sdk-python `lark_oapi/ws/const.py`): 0 is the endpoint;
//! 1 (system busy) and 1000040343 (internal error) are the server's trouble and are retried; a
//! non-200 status is too. 403 (the app is banned), 514 (authentication failed), 1000040344 (no
//! credential), 1000040345 (a wrong App ID or App Secret, as field reports have the platform
//! answer it) and 1000040350 (the app's connection limit, 50 per app) are fatal. The SDKs stop on any other code as well; here an unknown code is
//! retried with backoff and shown in `status`, since a code we do not know is no proof that
//! waiting cannot help, and exit 78 keeps a gateway down until someone acts.

use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Secret;
use crate::gateway::adapter::setup::{platform_says, PlatformError};
use crate::gateway::adapter::Shared;

/// The path the SDKs post to (`GenEndpointUri`).
pub(crate) const ENDPOINT_PATH: &str = "/callback/ws/endpoint";

const SYSTEM_BUSY: i64 = 1;
const INTERNAL_ERROR: i64 = 1_000_040_343;
/// Banned, authentication failed, no credential, invalid credential, connection limit.
const FATAL: &[i64] = &[403, 514, 1_000_040_344, 1_000_040_345, 1_000_040_350];
/// The open platform's own codes for a wrong App ID (10003) or App Secret (10014), as its
/// token endpoint answers them: the same mistake, should the endpoint ever answer so.
const BAD_CREDENTIAL: &[i64] = &[10003, 10014];

/// The longest wait or interval a server's ClientConfig is taken at: it sets our ping
/// interval and the floors of our backoff, and a value past this (a bug, a unit mix-up) would
/// leave a dead connection unnoticed or an adapter waiting for hours.
const MAX_SERVER_SECONDS: u64 = 600;

/// The server's connection settings (`ClientConfig`, all in seconds on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientConfig {
    /// How often to ping: the heartbeat interval.
    pub(crate) ping_interval: Duration,
    /// The SDKs wait this long between reconnect attempts: the floor of our backoff after a
    /// failed attempt.
    pub(crate) reconnect_interval: Duration,
    /// The SDKs wait a random part of this before the first reconnect: the floor of the
    /// jitter after a connection drops.
    pub(crate) reconnect_nonce: Duration,
    /// After this many failed reconnects the SDKs give up (negative: never). We never do; past
    /// it, `status` says that the server keeps refusing.
    pub(crate) reconnect_count: i64,
}

impl Default for ClientConfig {
    /// The SDKs' defaults before the server says otherwise (oapi-sdk-go `NewClient`).
    fn default() -> Self {
        Self {
            ping_interval: Duration::from_secs(120),
            reconnect_interval: Duration::from_secs(120),
            reconnect_nonce: Duration::from_secs(30),
            reconnect_count: -1,
        }
    }
}

impl ClientConfig {
    /// `previous`, updated with what `v` says. A field that is missing, not a number, or
    /// out of range keeps its previous value: Go's SDK would take a missing PingInterval as 0
    /// and ping in a tight loop.
    pub(crate) fn updated(self, v: &Value) -> ClientConfig {
        let secs = |key: &str, min: u64| {
            v.get(key)
                .and_then(Value::as_u64)
                .filter(|s| (min..=MAX_SERVER_SECONDS).contains(s))
                .map(Duration::from_secs)
        };
        ClientConfig {
            ping_interval: secs("PingInterval", 1).unwrap_or(self.ping_interval),
            reconnect_interval: secs("ReconnectInterval", 0).unwrap_or(self.reconnect_interval),
            reconnect_nonce: secs("ReconnectNonce", 0).unwrap_or(self.reconnect_nonce),
            reconnect_count: v
                .get("ReconnectCount")
                .and_then(Value::as_i64)
                .unwrap_or(self.reconnect_count),
        }
    }

    /// The same settings from a pong's payload (JSON bytes), or `None` when it holds none.
    pub(crate) fn updated_by_pong(self, payload: &[u8]) -> Option<ClientConfig> {
        let v: Value = serde_json::from_slice(payload).ok()?;
        v.is_object().then(|| self.updated(&v))
    }
}

/// Where to connect, and with what settings.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Holds the connection's ticket in its query: never logged, never in an error.
    pub(crate) url: String,
    pub(crate) config: ClientConfig,
}

/// Ask for an endpoint. Transport trouble is retried; the answer is read by [`read_answer`].
pub(crate) async fn discover(
    shared: &Shared,
    api_base: &str,
    app_id: &str,
    secret: &Secret,
    previous: ClientConfig,
) -> Result<Endpoint, PlatformError> {
    let body = json!({"AppID": app_id, "AppSecret": secret.expose()});
    let request = shared
        .http
        .post(format!("{api_base}{ENDPOINT_PATH}"))
        // The SDKs send it, and the server words its messages by it.
        .header("locale", "zh")
        .json(&body);
    let (status, v) = shared.call("endpoint discovery", request).await?;
    read_answer(app_id, status.as_u16(), &v, previous)
}

/// What the discovery answer says: the endpoint, or why there is none, fatal or not.
pub(crate) fn read_answer(
    app_id: &str,
    status: u16,
    v: &Value,
    previous: ClientConfig,
) -> Result<Endpoint, PlatformError> {
    let code = v.get("code").and_then(Value::as_i64);
    let says = platform_says(v);
    if let Some(c) = code.filter(|c| FATAL.contains(c) || BAD_CREDENTIAL.contains(c)) {
        let fix = match c {
            1_000_040_350 => {
                "the app already has as many long connections as the platform allows: stop \
                 the other clients of this app (another profile, an SDK), or wait for the \
                 server to forget connections that died"
            }
            403 => "the platform has banned this app's long connection",
            _ => "check app-id in gateway.toml and the App Secret in the profile's .env",
        };
        return Err(PlatformError::Fatal(format!(
            "endpoint discovery refused app-id {app_id} (HTTP {status}{says}): {fix}"
        )));
    }
    if !(200..300).contains(&status) {
        return Err(PlatformError::Retry(format!(
            "endpoint discovery answered HTTP {status}{says}"
        )));
    }
    match code {
        Some(0) => {}
        Some(SYSTEM_BUSY) | Some(INTERNAL_ERROR) => {
            return Err(PlatformError::Retry(format!(
                "endpoint discovery: the server is busy{says}"
            )))
        }
        _ => {
            return Err(PlatformError::Retry(format!(
                "endpoint discovery answered an unknown code{says}"
            )))
        }
    }
    let data = &v["data"];
    let url = data["URL"]
        .as_str()
        .filter(|u| u.starts_with("wss://") || u.starts_with("ws://"))
        .ok_or_else(|| PlatformError::Retry("endpoint discovery returned no ws url".into()))?;
    Ok(Endpoint {
        url: url.to_owned(),
        config: previous.updated(&data["ClientConfig"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(status: u16, v: Value) -> Result<Endpoint, PlatformError> {
        read_answer("cli_x", status, &v, ClientConfig::default())
    }

    #[test]
    fn an_endpoint_and_its_client_config() {
        let v = json!({"code": 0, "msg": "ok", "data": {
            "URL": "wss://msg-frontier.feishu.cn/ws/v2?device_id=1&service_id=2&ticket=t",
            "ClientConfig": {"ReconnectCount": -1, "ReconnectInterval": 120,
                             "ReconnectNonce": 30, "PingInterval": 90}}});
        let e = read(200, v).unwrap();
        assert!(e.url.starts_with("wss://msg-frontier.feishu.cn/ws/v2?"));
        assert_eq!(
            e.config,
            ClientConfig {
                ping_interval: Duration::from_secs(90),
                reconnect_interval: Duration::from_secs(120),
                reconnect_nonce: Duration::from_secs(30),
                reconnect_count: -1,
            }
        );
    }

    #[test]
    fn missing_or_absurd_settings_keep_the_previous_ones() {
        let before = ClientConfig {
            ping_interval: Duration::from_secs(5),
            ..ClientConfig::default()
        };
        let after = before.updated(&json!({"PingInterval": 0, "ReconnectInterval": 86400,
                                            "ReconnectNonce": "30", "ReconnectCount": 3}));
        assert_eq!(after.ping_interval, Duration::from_secs(5));
        assert_eq!(after.reconnect_interval, before.reconnect_interval);
        assert_eq!(after.reconnect_nonce, before.reconnect_nonce);
        assert_eq!(after.reconnect_count, 3);
        assert_eq!(before.updated(&Value::Null), before);
        // A pong's payload: JSON bytes, or nothing that counts.
        let pong = br#"{"PingInterval": 2, "ReconnectCount": 5}"#;
        assert_eq!(
            before.updated_by_pong(pong).unwrap().ping_interval,
            Duration::from_secs(2)
        );
        assert_eq!(before.updated_by_pong(b""), None);
        assert_eq!(before.updated_by_pong(b"[1]"), None);
    }

    #[test]
    fn busy_and_internal_errors_and_server_trouble_are_retried() {
        for (status, v) in [
            (200, json!({"code": 1, "msg": "system busy"})),
            (200, json!({"code": 1000040343, "msg": "internal error"})),
            (502, Value::Null),
            (500, json!({"code": 0})),
            (200, json!({"code": 0, "data": {"URL": ""}})),
            (
                200,
                json!({"code": 0, "data": {"URL": "https://not-a-socket"}}),
            ),
            (200, json!({"code": 99, "msg": "something new"})),
        ] {
            let e = read(status, v.clone()).unwrap_err();
            assert!(matches!(e, PlatformError::Retry(_)), "{status} {v}: {e:?}");
        }
    }

    #[test]
    fn credentials_bans_and_the_connection_limit_are_fatal_with_the_platform_words() {
        for (code, fix) in [
            (514, "check app-id"),
            (403, "banned"),
            (1000040344, "check app-id"),
            (1000040345, "check app-id"),
            (10014, "check app-id"),
            (1000040350, "as many long connections"),
        ] {
            let v = json!({"code": code, "msg": "the platform's own words"});
            match read(200, v) {
                Err(PlatformError::Fatal(m)) => {
                    assert!(m.contains(&code.to_string()), "{m}");
                    assert!(
                        m.contains("the platform's own words") && m.contains(fix),
                        "{m}"
                    );
                    assert!(m.contains("cli_x"), "{m}");
                }
                other => panic!("{code}: {other:?}"),
            }
        }
        // A refusal with a non-200 status is still a refusal.
        let v = json!({"code": 514, "msg": "auth failed"});
        assert!(matches!(read(401, v), Err(PlatformError::Fatal(_))));
    }
}
