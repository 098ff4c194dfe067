//! What every authenticated iLink POST must carry, checked as the mock sees fit to count it,
//! and the application-level answers the endpoints share.
//!
//! Tencent's protocol doc lists the headers (`AuthorizationType: ilink_bot_token`,
//! `Authorization: Bearer <bot_token>`, `X-WECHAT-UIN`: base64 of a random uint32 in decimal)
//! and `base_info.channel_version` in every body. Whether the real server refuses a request
//! that lacks one is not documented, so the mock counts the violation and answers anyway;
//! only the token decides: one the server does not honour gets the session-expired answer.

use serde_json::{json, Value};

use super::codec;
use super::state::WeixinState;
use crate::mock_platform::http::RequestHead;
use crate::mock_platform::reply::Answer;

/// iLink's session-expired code (`SESSION_EXPIRED_ERRCODE` in both clients).
pub(crate) const SESSION_EXPIRED: i64 = -14;
/// iLink's frequency-limit code (hermes-agent's `RATE_LIMIT_ERRCODE`).
pub(crate) const FREQUENCY_LIMIT: i64 = -2;

/// The body of a POST whose token the mock honours, parsed (`Null` when it is not JSON);
/// `Err` carries the session-expired answer for any other token.
pub(crate) fn check_post(
    head: &RequestHead,
    body: &[u8],
    state: &WeixinState,
) -> Result<Value, Answer> {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let path = head.path.as_str();
    let mut inner = state.lock();
    let mut failed = Vec::new();
    if head.header("authorizationtype") != Some("ilink_bot_token") {
        failed.push("AuthorizationType is not ilink_bot_token");
    }
    let token = head
        .header("authorization")
        .and_then(|auth| auth.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty());
    if token.is_none() {
        failed.push("Authorization is not Bearer <token>");
    }
    let uin = head.header("x-wechat-uin");
    match uin {
        Some(uin) if codec::uin_well_formed(uin) => {}
        Some(_) => failed.push("X-WECHAT-UIN is not base64 of a decimal u32"),
        None => failed.push("X-WECHAT-UIN is missing"),
    }
    let channel_version = parsed.pointer("/base_info/channel_version");
    if channel_version.is_none_or(|v| v.as_str().is_none_or(str::is_empty)) {
        failed.push("base_info.channel_version is missing");
    }
    if !failed.is_empty() {
        inner.stats.header_violations += 1;
        for check in failed {
            inner.violation(path, check);
        }
    }
    if let Some(uin) = uin {
        if inner.last_uin.as_deref() == Some(uin) {
            inner.stats.uin_repeats += 1;
            inner.violation(path, "X-WECHAT-UIN repeats the previous request's");
        }
        inner.last_uin = Some(uin.to_owned());
    }
    if token.is_some_and(|token| inner.tokens.contains(token)) {
        Ok(parsed)
    } else {
        inner.stats.expired_answers += 1;
        Err(session_expired())
    }
}

/// The session-expired answer, HTTP 200 like every iLink application error. The sources
/// document the code (-14) but not the text; "session timeout" is the mock's.
pub(crate) fn session_expired() -> Answer {
    Answer::new(
        200,
        json!({"ret": SESSION_EXPIRED, "errcode": SESSION_EXPIRED, "errmsg": "session timeout"}),
    )
}

/// The frequency limit. Its text must not be "unknown error": hermes-agent reads -2 with that
/// text as a stale session rather than a rate limit.
pub(crate) fn frequency_limit() -> Answer {
    Answer::new(
        200,
        json!({"ret": FREQUENCY_LIMIT, "errcode": FREQUENCY_LIMIT, "errmsg": "freq limit"}),
    )
}

/// A request the mock refuses. The sources document no code for a malformed request; -1
/// with a description is the mock's.
pub(crate) fn invalid(errmsg: &str) -> Answer {
    Answer::new(200, json!({"ret": -1, "errcode": -1, "errmsg": errmsg}))
}

/// A failure in front of the application: an HTTP error whose body is not iLink's.
pub(crate) fn http_error(status: u16) -> Answer {
    let text = match status {
        500 => "internal server error",
        502 => "bad gateway",
        _ => "error",
    };
    Answer::new(status, json!({"errmsg": text}))
}

/// Success as the protocol doc shows it.
pub(crate) fn ok() -> Value {
    json!({"ret": 0, "errmsg": ""})
}
