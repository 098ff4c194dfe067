//! The HTTP endpoints a Feishu client calls before it sends or listens: long-connection
//! discovery, the tenant token, and who the app's bot is.
//!
//! Discovery (`POST /callback/ws/endpoint`, body `{"AppID", "AppSecret"}`) answers HTTP 200
//! with `{code, msg, data: {URL, ClientConfig}}`, read as in oapi-sdk-go `ws/client.go`
//! (`getConnURL`, `EndpointResp` in `ws/model.go`) and node-sdk `ws-client/index.ts`
//! (`pullConnectConfig`). The token endpoint is "自建应用获取 tenant_access_token"
//! (`POST /open-apis/auth/v3/tenant_access_token/internal`): `{app_id, app_secret}` →
//! `{code, msg, tenant_access_token, expire}`; its error codes (10003 invalid param, 10014 app
//! secret invalid, HTTP 400) are the ones clients report from the platform. "获取机器人信息"
//! (`GET /open-apis/bot/v3/info`, `Authorization: Bearer <tenant_access_token>`) answers
//! `{code, msg, bot: {activate_status, app_name, avatar_url, ip_white_list, open_id}}`; a
//! missing or unknown token gets the send endpoints' 99991661 or 99991663.

use std::time::Instant;

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::faults::Refusal;
use super::send::{authorized, unauthorized};
use super::state::FeishuState;
use super::ticket::Discovery;

pub(crate) const DISCOVERY_PATH: &str = "/callback/ws/endpoint";
pub(crate) const TOKEN_PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";
pub(crate) const BOT_INFO_PATH: &str = "/open-apis/bot/v3/info";

/// Answers the request if it is for one of these endpoints.
pub(crate) fn route(head: &RequestHead, body: &[u8], state: &FeishuState) -> Option<Answer> {
    match (head.method.as_str(), head.path.as_str()) {
        ("POST", DISCOVERY_PATH) => Some(discovery(body, state)),
        ("POST", TOKEN_PATH) => Some(token(body, state)),
        ("GET", BOT_INFO_PATH) => Some(bot_info(head, state)),
        _ => None,
    }
}

fn bot_info(head: &RequestHead, state: &FeishuState) -> Answer {
    let auth = head.header("authorization").unwrap_or_default();
    if !authorized(auth, state) {
        return unauthorized(auth);
    }
    let config = &state.config;
    Answer::new(
        200,
        json!({"code": 0, "msg": "ok", "bot": {
            "activate_status": 2,
            "app_name": config.bot_name,
            "avatar_url": "https://s1-imfile.feishucdn.com/static-resource/v1/mock-avatar",
            "ip_white_list": [],
            "open_id": config.bot_open_id,
        }}),
    )
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
