//! QQ's app access token (`POST /app/getAppAccessToken`): what a client trades its app id and
//! secret for, and then presents as `QQBot <token>` to discovery, the gateway and the send
//! endpoints. The tokens themselves are the gateway's, which checks every Identify against
//! them.

use std::time::Duration;

use serde_json::{json, Value};

use super::super::opcode_gateway::state::Gateway;
use super::super::reply::Answer;

pub(crate) const PATH: &str = "/app/getAppAccessToken";

/// A token the gateway honours for `lifetime`. A `clientSecret` other than `expected_secret`
/// (when set) is refused. Errors come in the body with HTTP 200, as the platform sends them: a
/// body that is not JSON is 100007 ("appid invalid"), a wrong secret 100016.
pub(crate) fn access_token(
    gateway: &Gateway,
    expected_secret: Option<&str>,
    lifetime: Duration,
    body: &[u8],
) -> Answer {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return Answer::new(200, json!({"code": 100007, "message": "appid invalid"}));
    };
    if let Some(expected) = expected_secret {
        let given = request.get("clientSecret").and_then(Value::as_str);
        if given != Some(expected) {
            tracing::info!("mock rejected a client secret");
            return Answer::new(
                200,
                json!({"code": 100016, "message": "invalid appid or secret"}),
            );
        }
    }
    // QQ sends expires_in as a string; clients must cope with that, so the mock does too.
    let token = gateway.next_access_token();
    let expires_in = lifetime.as_secs().to_string();
    Answer::new(
        200,
        json!({"access_token": token, "expires_in": expires_in}),
    )
}
