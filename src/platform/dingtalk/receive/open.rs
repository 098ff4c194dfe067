//! `POST {base}/v1.0/gateway/connections/open` before every connection: the app's client id
//! and secret and its subscriptions answer `{"endpoint": "wss://…", "ticket": "…"}`; the
//! socket is `endpoint?ticket=…`, and the ticket is good for one connection within 90 s
//! (open.dingtalk.com, "Stream 模式协议"; the SDKs' `open_connection`). The URL holds the
//! ticket: it is never logged.
//!
//! The SDKs retry a failed open every 10 s for ever, wrong or revoked credentials included;
//! here a 400, 401 or 403 is the credentials refused, and ends the adapter (exit 78 with the
//! fix), while 429 and server errors are retried with backoff.

use serde_json::{json, Value};

use crate::config::Secret;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;
use crate::platform::dingtalk::token::{refuses_credentials, says};

pub(crate) const OPEN_PATH: &str = "/v1.0/gateway/connections/open";
/// The topic of robot messages, the one subscription the adapter asks for.
pub(crate) const ROBOT_TOPIC: &str = "/v1.0/im/bot/messages/get";

/// A connection's URL, with its ticket.
pub(crate) async fn open(
    shared: &Shared,
    api_base: &str,
    client_id: &str,
    secret: &Secret,
) -> Result<String, PlatformError> {
    let body = json!({
        "clientId": client_id,
        "clientSecret": secret.expose(),
        "subscriptions": [{"type": "CALLBACK", "topic": ROBOT_TOPIC}],
        "ua": concat!("hermes-svc/", env!("CARGO_PKG_VERSION")),
        "localIp": "",
    });
    let request = shared.http.post(format!("{api_base}{OPEN_PATH}")).json(&body);
    let (status, v) = shared.call("connections/open", request).await?;
    read_answer(client_id, status.as_u16(), &v)
}

pub(crate) fn read_answer(client_id: &str, status: u16, v: &Value) -> Result<String, PlatformError> {
    if refuses_credentials(status) {
        return Err(PlatformError::Fatal(format!(
            "connections/open refused client-id {client_id} (HTTP {status}{}): check client-id \
             in gateway.toml and the Client Secret in the profile's .env, and that the app's \
             robot uses Stream mode",
            says(v)
        )));
    }
    if !(200..300).contains(&status) {
        return Err(PlatformError::Retry(format!(
            "connections/open answered HTTP {status}{}",
            says(v)
        )));
    }
    let endpoint = v["endpoint"]
        .as_str()
        .filter(|e| e.starts_with("wss://") || e.starts_with("ws://"));
    let ticket = v["ticket"].as_str().filter(|t| !t.is_empty());
    let (Some(endpoint), Some(ticket)) = (endpoint, ticket) else {
        return Err(PlatformError::Retry(
            "connections/open gave no WebSocket endpoint and ticket".into(),
        ));
    };
    reqwest::Url::parse_with_params(endpoint, &[("ticket", ticket)])
        .map(String::from)
        .map_err(|_| PlatformError::Retry("connections/open gave an endpoint that is no URL".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_with_its_ticket_or_a_refusal() {
        let v = json!({"endpoint": "wss://wss-open-connection.dingtalk.com:443/connect", "ticket": "a b+c"});
        let url = read_answer("ding1", 200, &v).unwrap();
        assert_eq!(url, "wss://wss-open-connection.dingtalk.com/connect?ticket=a+b%2Bc");
        let refused = json!({"code": "invalidClientIdOrSecret", "message": "bad"});
        match read_answer("ding1", 401, &refused) {
            Err(PlatformError::Fatal(m)) => assert!(m.contains("invalidClientIdOrSecret") && m.contains("Stream mode"), "{m}"),
            other => panic!("{other:?}"),
        }
        for (status, v) in [(429, Value::Null), (500, Value::Null), (200, json!({"endpoint": "https://x", "ticket": "t"})), (200, json!({"endpoint": "wss://x"}))] {
            assert!(matches!(read_answer("ding1", status, &v), Err(PlatformError::Retry(_))), "{status} {v}");
        }
    }
}
