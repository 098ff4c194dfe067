//! The `tenant_access_token` a Feishu/Lark sender posts with: `POST
//! {base}/open-apis/auth/v3/tenant_access_token/internal` with the app's id and secret
//! answers `{"code":0, "tenant_access_token":..., "expire":7200}` (seconds). Kept by
//! `token_cache`, fresh on both clocks, refreshed before its end and when a send is refused
//! for it.
//!
//! Sources: the open platform's "自建应用获取 tenant_access_token" page (request, answer, the
//! 2 h lifetime, and that within its last 30 minutes a new token is handed out while the old
//! one still works); oapi-sdk-go `core/tokenmanager.go` (refresh 3 minutes early); the token
//! endpoint's answers for a wrong App ID (10003) and App Secret (10014), as clients report
//! them.

use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Secret;
use crate::gateway::adapter::setup::{platform_says, PlatformError};
use crate::gateway::adapter::token_cache::TokenCache;
use crate::gateway::adapter::Shared;
use crate::gateway::platform_number::{self, TOKEN_LIFETIME};

pub(super) const TOKEN_PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";

/// Refresh this long before the token expires (the Go SDK's `expiryDelta`).
const MARGIN: Duration = Duration::from_secs(180);

/// The token endpoint's codes for a wrong App ID or App Secret: no retry fixes them.
const BAD_CREDENTIAL: &[i64] = &[10003, 10014];

/// One app's tenant token. Not `Debug`: it holds the secret and the token.
pub(super) struct FeishuToken {
    app_id: String,
    url: String,
    secret: Secret,
    cache: TokenCache,
}

impl FeishuToken {
    pub(super) fn new(api_base: &str, app_id: &str, secret: Secret) -> Self {
        Self {
            app_id: app_id.to_owned(),
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
        let body = json!({"app_id": self.app_id, "app_secret": self.secret.expose()});
        let request = shared.http.post(&self.url).json(&body);
        let (status, v) = shared.call("tenant_access_token", request).await?;
        read_answer(&self.app_id, status.as_u16(), &v)
    }
}

/// The token and its lifetime, or why there is none.
fn read_answer(app_id: &str, status: u16, v: &Value) -> Result<(String, Duration), PlatformError> {
    let code = v.get("code").and_then(Value::as_i64);
    let token = v["tenant_access_token"].as_str().filter(|t| !t.is_empty());
    if let (Some(0), Some(token), true) = (code, token, (200..300).contains(&status)) {
        let lifetime = platform_number::seconds_json(&v["expire"], TOKEN_LIFETIME)
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_secs(7200));
        return Ok((token.to_owned(), lifetime));
    }
    let says = platform_says(v);
    if code.is_some_and(|c| BAD_CREDENTIAL.contains(&c)) {
        return Err(PlatformError::Fatal(format!(
            "the token endpoint refused app-id {app_id} (HTTP {status}{says}): check app-id in \
             gateway.toml and the App Secret in the profile's .env"
        )));
    }
    Err(PlatformError::Retry(format!(
        "the token endpoint answered HTTP {status} without a tenant_access_token{says}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_and_its_lifetime() {
        let v = json!({"code": 0, "msg": "ok", "tenant_access_token": "t-abc", "expire": 7140});
        let (t, life) = read_answer("cli_x", 200, &v).unwrap();
        assert_eq!((t.as_str(), life), ("t-abc", Duration::from_secs(7140)));
        let v = json!({"code": 0, "tenant_access_token": "t-abc"});
        assert_eq!(
            read_answer("cli_x", 200, &v).unwrap().1,
            Duration::from_secs(7200)
        );
    }

    #[test]
    fn a_wrong_secret_is_fatal_and_the_rest_is_retried() {
        let v = json!({"code": 10014, "msg": "app secret invalid"});
        match read_answer("cli_x", 200, &v) {
            Err(PlatformError::Fatal(m)) => {
                assert!(
                    m.contains("10014") && m.contains("app secret invalid"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        for (status, v) in [
            (500, Value::Null),
            (200, json!({"code": 1, "msg": "busy"})),
            (200, json!({"code": 0, "tenant_access_token": ""})),
            (503, json!({"code": 0, "tenant_access_token": "t"})),
        ] {
            assert!(
                matches!(
                    read_answer("cli_x", status, &v),
                    Err(PlatformError::Retry(_))
                ),
                "{status} {v}"
            );
        }
    }
}
