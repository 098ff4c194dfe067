//! The two HTTP endpoints a Feishu client calls before it sends or listens: long-connection
//! discovery and the tenant token.
//!
//! Discovery (`POST /callback/ws/endpoint`, body `{"AppID", "AppSecret"}`) answers HTTP 200
//! with `{code, msg, data: {URL, ClientConfig}}`, read as in oapi-sdk-go `ws/client.go`
//! (`getConnURL`, `EndpointResp` in `ws/model.go`) and node-sdk `ws-client/index.ts`
//! (`pullConnectConfig`). The token endpoint is "自建应用获取 tenant_access_token"
//! (`POST /open-apis/auth/v3/tenant_access_token/internal`): `{app_id, app_secret}` →
//! `{code, msg, tenant_access_token, expire}`; its error codes (10003 invalid param, 10014 app
//! secret invalid, HTTP 400) are the ones clients report from the platform.

use std::time::Instant;

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::faults::Refusal;
use super::state::FeishuState;
use super::ticket::Discovery;

pub(crate) const DISCOVERY_PATH: &str = "/callback/ws/endpoint";
pub(crate) const TOKEN_PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";

/// Answers the request if it is for one of these endpoints.
pub(crate) fn route(head: &RequestHead, body: &[u8], state: &FeishuState) -> Option<Answer> {
    if head.method != "POST" {
        return None;
    }
    match head.path.as_str() {
        DISCOVERY_PATH => Some(discovery(body, state)),
        TOKEN_PATH => Some(token(body, state)),
        _ => None,
    }
}

fn discovery(body: &[u8], state: &FeishuState) -> Answer {
    let request = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    let field = |name: &str| {
        request
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match state.discover(field("AppID"), field("AppSecret")) {
        Discovery::Url { url, config } => Answer::new(
            200,
            json!({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}),
        ),
        Discovery::Refused(Refusal::Endpoint { code, msg }) => {
            tracing::info!(code, "mock feishu refused discovery");
            Answer::new(200, json!({"code": code, "msg": msg}))
        }
        Discovery::Refused(Refusal::EndpointHttp(status)) => {
            Answer::new(status, json!({"code": status, "msg": "system busy"}))
        }
        // Handshake refusals are never taken at discovery.
        Discovery::Refused(Refusal::Handshake { status, msg, .. }) => {
            Answer::new(200, json!({"code": status, "msg": msg}))
        }
    }
}

fn token(body: &[u8], state: &FeishuState) -> Answer {
    let invalid = || Answer::new(400, json!({"code": 10003, "msg": "invalid param"}));
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return invalid();
    };
    let field = |name: &str| request.get(name).and_then(Value::as_str);
    let config = &state.config;
    if field("app_id") != Some(config.app_id.as_str()) {
        return invalid();
    }
    if field("app_secret") != Some(config.app_secret.as_str()) {
        tracing::info!("mock feishu rejected an app secret");
        return Answer::new(400, json!({"code": 10014, "msg": "app secret invalid"}));
    }
    let (token, expire) = state.tokens.issue(Instant::now());
    Answer::new(
        200,
        json!({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": expire}),
    )
}
