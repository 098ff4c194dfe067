//! What both platforms' discovery endpoints (QQ's `GET /gateway`, Discord's
//! `GET /gateway/bot`) share: who may ask, and the URL they hand out.

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::state::Gateway;

/// The answer to a discovery request: `{"url"}` plus what `extra` adds, or 401 to a client
/// the gateway would not let identify. Either scheme is taken on either endpoint: QQ's
/// `QQBot <access token>`, which must be one it issued and still honours, and Discord's
/// `Bot <token>`, checked against `expected_token` when set.
pub(crate) fn answer(
    gateway: &Gateway,
    head: &RequestHead,
    extra: impl FnOnce(&mut Value),
) -> Answer {
    let auth = head.header("authorization").unwrap_or_default();
    let token = auth.strip_prefix("Bot ").unwrap_or(auth);
    if !gateway.token_accepted(token) {
        return Answer::error(401, "invalid access token");
    }
    let mut body = json!({"url": gateway.advertised_ws_url()});
    extra(&mut body);
    Answer::new(200, body)
}
