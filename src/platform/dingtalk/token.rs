//! The app's access token, which the robot API takes in `x-acs-dingtalk-access-token`:
//! `POST {base}/v1.0/oauth2/accessToken` with `{appKey, appSecret}` answers
//! `{"accessToken": …, "expireIn": 7200}` (seconds). Kept by `token_cache` as QQ's and
//! Feishu's are: fresh on both clocks, fetched again five minutes before its end (the Python
//! SDK's `get_access_token` margin) and when a send is refused for it.
//!
//! Errors of the `/v1.0` APIs are `{"code": "<word>", "message": …, "requestid": …}` with a
//! 4xx or 5xx status (open.dingtalk.com, "服务端错误码"): a 400, 401 or 403 from the token
//! endpoint is the client id or secret (or the app) refused, which no retry fixes.

use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Secret;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::token_cache::TokenCache;
use crate::gateway::adapter::Shared;
use crate::gateway::platform_number::{self, TOKEN_LIFETIME};

pub(crate) const TOKEN_PATH: &str = "/v1.0/oauth2/accessToken";

const MARGIN: Duration = Duration::from_secs(300);

/// One app's access token. Not `Debug`: it holds the secret and the token.
pub(super) struct DingTalkToken {
    client_id: String,
    url: String,
    secret: Secret,
    cache: TokenCache,
}

impl DingTalkToken {
    pub(super) fn new(api_base: &str, client_id: &str, secret: Secret) -> Self {
        Self {
            client_id: client_id.to_owned(),
            url: format!("{api_base}{TOKEN_PATH}"),
            secret,
            cache: TokenCache::new(MARGIN),
        }
    }

    pub(super) async fn get(&self, shared: &Shared) -> Result<String, PlatformError> {
        self.cache.get(|| self.fetch(shared)).await
    }

    /// Forget `stale`, which the platform just refused.
    pub(super) fn invalidate(&self, stale: &str) {
        self.cache.invalidate(stale);
    }

    async fn fetch(&self, shared: &Shared) -> Result<(String, Duration), PlatformError> {
        let body = json!({"appKey": self.client_id, "appSecret": self.secret.expose()});
        let request = shared.http.post(&self.url).json(&body);
        let (status, v) = shared.call("accessToken", request).await?;
        read_answer(&self.client_id, status.as_u16(), &v)
    }
}

/// What a `/v1.0` error body says, for a message: `: CODE: message`.
pub(super) fn says(v: &Value) -> String {
    let code = v["code"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| v["code"].as_i64().map(|c| c.to_string()));
    let message = v["message"]
        .as_str()
        .map(|m| crate::safe_text::clip(m, 200));
    match (code, message) {
        (Some(c), Some(m)) => format!(": {c}: {m}"),
        (Some(c), None) => format!(": {c}"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) => String::new(),
    }
}

/// Whether a `/v1.0` answer refuses the app's credentials: no retry helps.
pub(super) fn refuses_credentials(status: u16) -> bool {
    matches!(status, 400 | 401 | 403)
}

fn read_answer(client_id: &str, status: u16, v: &Value) -> Result<(String, Duration), PlatformError> {
    let token = v["accessToken"].as_str().filter(|t| !t.is_empty());
    if let (Some(token), true) = (token, (200..300).contains(&status)) {
        let lifetime = platform_number::seconds_json(&v["expireIn"], TOKEN_LIFETIME)
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_secs(7200));
        return Ok((token.to_owned(), lifetime));
    }
    let says = says(v);
    if refuses_credentials(status) {
        return Err(PlatformError::Fatal(format!(
            "the access token endpoint refused client-id {client_id} (HTTP {status}{says}): \
             check client-id in gateway.toml and the Client Secret in the profile's .env"
        )));
    }
    Err(PlatformError::Retry(format!(
        "the access token endpoint answered HTTP {status} without a token{says}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_its_lifetime_and_a_refused_secret() {
        let v = json!({"accessToken": "t-1", "expireIn": 7200});
        let (t, life) = read_answer("ding1", 200, &v).unwrap();
        assert_eq!((t.as_str(), life), ("t-1", Duration::from_secs(7200)));
        let v = json!({"code": "invalidClientIdOrSecret", "message": "无效的clientId或clientSecret"});
        match read_answer("ding1", 400, &v) {
            Err(PlatformError::Fatal(m)) => {
                assert!(m.contains("invalidClientIdOrSecret") && m.contains("ding1"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(read_answer("ding1", 503, &Value::Null), Err(PlatformError::Retry(_))));
        assert!(matches!(
            read_answer("ding1", 200, &json!({"accessToken": ""})),
            Err(PlatformError::Retry(_))
        ));
    }
}
