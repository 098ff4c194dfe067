//! The QQ Bot access token of one credential, shared by everything that speaks for it: the
//! adapter's connection (Identify) and the sender (`Authorization: QQBot ...`). One cache
//! means one fetch when both need a token at once, and a token the platform rejected on one
//! path is not offered again on the other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::config::Secret;
use crate::gateway::adapter::setup::{platform_says, PlatformError};
use crate::gateway::adapter::token_cache::TokenCache;
use crate::gateway::adapter::Shared;
use crate::gateway::platform_number::{self, TOKEN_LIFETIME};

/// Refresh a QQ access token this long before it expires (the platform hands out a new one
/// in the last 60 s of the old one's life, and both work meanwhile).
pub(crate) const TOKEN_MARGIN: Duration = Duration::from_secs(60);

/// QQ's token endpoint answers errors in the body as `{"code": N, "message": "..."}`. These
/// codes mean the AppID or AppSecret is wrong, which no retry fixes; any other code is
/// retried with backoff. Source: tencent-connect/bot-docs, the API error-code page
/// (`docs/develop/api-v2/openapi/error/error.md`), and botgo's token source.
const QQ_CREDENTIAL_ERRORS: &[i64] = &[100007, 100016];

/// One credential's access token, fetched on first use and again when it nears its end or
/// the platform rejects it (the keeping is `token_cache`'s). Not `Debug`: it holds the secret
/// and the token.
pub(crate) struct QqToken {
    app_id: String,
    token_url: String,
    secret: Secret,
    cache: TokenCache,
}

impl QqToken {
    pub(crate) fn new(app_id: &str, token_url: &str, secret: Option<Secret>) -> Self {
        Self {
            app_id: app_id.to_owned(),
            token_url: token_url.to_owned(),
            secret: secret.unwrap_or_else(|| Secret::new(String::new())),
            cache: TokenCache::new(TOKEN_MARGIN),
        }
    }

    /// A token fresh on both clocks: the cached one, or a new one from the token endpoint.
    pub(crate) async fn get(&self, shared: &Shared) -> Result<String, PlatformError> {
        self.cache.get(|| self.fetch(shared)).await
    }

    async fn fetch(&self, shared: &Shared) -> Result<(String, Duration), PlatformError> {
        let body = json!({"appId": self.app_id, "clientSecret": self.secret.expose()});
        let request = shared.http.post(&self.token_url).json(&body);
        let (status, v) = shared.call("token endpoint", request).await?;
        let token = v["access_token"].as_str().filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(qq_token_error(&self.app_id, status, &v));
        };
        // QQ sends expires_in as a string; a number is read too.
        let lifetime = platform_number::seconds_json(&v["expires_in"], TOKEN_LIFETIME)
            .unwrap_or(Duration::from_secs(7200));
        Ok((token.to_owned(), lifetime))
    }

    /// Forget `stale`, the token the platform just rejected. A newer token someone else
    /// fetched meanwhile is kept: it was not the one rejected.
    pub(crate) fn invalidate(&self, stale: &str) {
        self.cache.invalidate(stale);
    }
}

/// The tokens of one gateway, one per credential (AppID, token endpoint and secret), so the
/// adapter and the sender built for the same `[[adapter]]` find the same cache.
#[derive(Clone, Default)]
pub(crate) struct QqTokens(Arc<Mutex<HashMap<[u8; 32], Arc<QqToken>>>>);

impl QqTokens {
    pub(crate) fn get(
        &self,
        app_id: &str,
        token_url: &str,
        secret: Option<&Secret>,
    ) -> Arc<QqToken> {
        // The key is a hash, so the map never holds a second copy of the secret.
        let mut h = Sha256::new();
        for part in [app_id, token_url, secret.map(Secret::expose).unwrap_or("")] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        let key: [u8; 32] = h.finalize().into();
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key)
            .or_insert_with(|| Arc::new(QqToken::new(app_id, token_url, secret.cloned())))
            .clone()
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn one_credential_has_one_cache_per_gateway() {
        let tokens = QqTokens::default();
        let s = Secret::new("s".into());
        let a = tokens.get("1", "u", Some(&s));
        let b = tokens.get("1", "u", Some(&s));
        assert!(Arc::ptr_eq(&a, &b));
        let other_secret = Secret::new("t".into());
        assert!(!Arc::ptr_eq(&a, &tokens.get("1", "u", Some(&other_secret))));
        assert!(!Arc::ptr_eq(&a, &tokens.get("2", "u", Some(&s))));
        // A token cached through one handle is seen through the other.
        a.cache.store("tok", Duration::from_secs(3600));
        assert_eq!(b.cache.fresh().as_deref(), Some("tok"));
    }
}
