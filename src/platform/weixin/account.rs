//! One Weixin bot's account as the adapter and its sender share it: the login (token and
//! base URL, from the login file, read again when the platform ends the session), the newest
//! `context_token` of each peer (a reply carries it), and how an iLink request is dressed.
//!
//! iLink's request shape, as the public client (NousResearch/hermes-agent
//! `gateway/platforms/weixin.py`) sends it: a JSON POST whose body carries
//! `base_info.channel_version`, with `AuthorizationType: ilink_bot_token`, `Authorization:
//! Bearer <token>` and `X-WECHAT-UIN`, the base64 of a random uint32 written in decimal, new
//! on every request.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};

use super::context_tokens::ContextTokens;
use crate::config::Secret;
use crate::platform::weixin::{LoginFileError, WeixinLogin};

/// The channel version the public client reports in `base_info`.
const CHANNEL_VERSION: &str = "2.2.0";

/// iLink's codes for a login the platform no longer honours: -14 ("session timeout"); and
/// -2 when its message is "unknown error", which the public client treats the same way.
pub(crate) fn session_expired(v: &Value) -> bool {
    let code = |k: &str| v[k].as_i64();
    let expired = code("ret") == Some(-14) || code("errcode") == Some(-14);
    let stale = (code("ret") == Some(-2) || code("errcode") == Some(-2))
        && v["errmsg"]
            .as_str()
            .is_some_and(|m| m.eq_ignore_ascii_case("unknown error"));
    expired || stale
}

/// iLink's frequency limit (-2, with any other message).
pub(crate) fn rate_limited(v: &Value) -> bool {
    (v["ret"].as_i64() == Some(-2) || v["errcode"].as_i64() == Some(-2)) && !session_expired(v)
}

/// The `ret`/`errcode` pair and message of an answer, for an error text.
pub(crate) fn said(v: &Value) -> String {
    let msg = crate::safe_text::clip(v["errmsg"].as_str().unwrap_or(""), 200);
    format!(
        "ret {} errcode {} {msg}",
        v["ret"].as_i64().unwrap_or(0),
        v["errcode"].as_i64().unwrap_or(0)
    )
}

pub(crate) struct WeixinAccount {
    login_file: PathBuf,
    default_base: String,
    login: Mutex<Option<Login>>,
    /// Peer → the newest `context_token` a message from them carried, within a budget.
    contexts: Mutex<ContextTokens>,
    /// Whether a context token too long to keep was warned of.
    refused_context: AtomicBool,
}

#[derive(Clone)]
struct Login {
    token: Secret,
    base_url: String,
}

impl WeixinAccount {
    fn new(login_file: &Path, default_base: &str) -> Self {
        Self {
            login_file: login_file.to_owned(),
            default_base: default_base.trim_end_matches('/').to_owned(),
            login: Mutex::new(None),
            contexts: Mutex::new(ContextTokens::default()),
            refused_context: AtomicBool::new(false),
        }
    }

    /// The current login, read from the file the first time.
    fn current(&self) -> Result<Login, LoginFileError> {
        if let Some(l) = self
            .login
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Ok(l);
        }
        self.reload().map(|(l, _)| l)
    }

    /// Read the login file again; the second value says whether the token changed.
    fn reload(&self) -> Result<(Login, bool), LoginFileError> {
        let file = WeixinLogin::read(&self.login_file)?;
        let base_url = if file.base_url.trim().is_empty() {
            self.default_base.clone()
        } else {
            file.base_url.trim_end_matches('/').to_owned()
        };
        let login = Login {
            token: file.token(),
            base_url,
        };
        let mut held = self.login.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = held.as_ref().is_none_or(|h| h.token != login.token);
        *held = Some(login.clone());
        Ok((login, changed))
    }

    /// Whether the login file now holds another token than the one in use.
    pub(crate) fn renewed(&self) -> bool {
        let before = self
            .login
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match WeixinLogin::read(&self.login_file) {
            Ok(file) if before.as_ref().is_none_or(|b| b.token != file.token()) => {
                self.reload().is_ok()
            }
            _ => false,
        }
    }

    pub(crate) fn remember_context(&self, peer: &str, token: &str) {
        let kept = self
            .contexts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remember(peer, token);
        // Once per process: a server that sends such tokens sends them with every message.
        if !kept && !self.refused_context.swap(true, Ordering::Relaxed) {
            tracing::warn!(peer_bytes = peer.len(), token_bytes = token.len(), "a context_token or peer id longer than any real one; not kept (replies to this peer go without it; said once)");
        }
    }

    pub(crate) fn context(&self, peer: &str) -> Option<String> {
        self.contexts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(peer)
    }

    /// A POST to `endpoint` (`ilink/bot/getupdates`, ...) with `payload` and `base_info`,
    /// dressed as iLink wants it; an error when there is no usable login.
    pub(crate) fn request(
        &self,
        http: &reqwest::Client,
        endpoint: &str,
        mut payload: Value,
    ) -> Result<reqwest::RequestBuilder, LoginFileError> {
        let login = self.current()?;
        payload["base_info"] = json!({ "channel_version": CHANNEL_VERSION });
        let url = format!("{}/{endpoint}", login.base_url);
        Ok(http
            .post(url)
            .headers(headers(&login.token))
            .body(payload.to_string()))
    }
}

/// The headers of one request; `X-WECHAT-UIN` is new every time.
fn headers(token: &Secret) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(
        "AuthorizationType",
        HeaderValue::from_static("ilink_bot_token"),
    );
    let uin = base64::engine::general_purpose::STANDARD.encode(fastrand::u32(..).to_string());
    if let Ok(v) = HeaderValue::from_str(&uin) {
        h.insert("X-WECHAT-UIN", v);
    }
    // A token no header can carry gets no Authorization at all; the platform then answers
    // as for an expired session, which asks for a new login.
    if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", token.expose())) {
        v.set_sensitive(true);
        h.insert(AUTHORIZATION, v);
    }
    h
}

/// The accounts of one gateway, by adapter name, so an adapter and its sender share one.
#[derive(Clone, Default)]
pub(crate) struct WeixinAccounts(Arc<Mutex<HashMap<String, Arc<WeixinAccount>>>>);

impl WeixinAccounts {
    pub(crate) fn get(
        &self,
        adapter: &str,
        login_file: &Path,
        api_base: &str,
    ) -> Arc<WeixinAccount> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(adapter.to_owned())
            .or_insert_with(|| Arc::new(WeixinAccount::new(login_file, api_base)))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_and_rate_limit_codes() {
        assert!(session_expired(&json!({"ret": -14})));
        assert!(session_expired(&json!({"ret": 0, "errcode": -14})));
        assert!(session_expired(
            &json!({"ret": -2, "errmsg": "unknown error"})
        ));
        assert!(!session_expired(
            &json!({"ret": -2, "errmsg": "freq limit"})
        ));
        assert!(rate_limited(&json!({"ret": -2, "errmsg": "freq limit"})));
        assert!(!rate_limited(
            &json!({"ret": -2, "errmsg": "Unknown Error"})
        ));
        assert!(!rate_limited(&json!({"ret": 0})));
    }

    #[test]
    fn every_request_gets_a_new_uin_in_base64_decimal() {
        let t = Secret::new("tok".into());
        let (a, b) = (headers(&t), headers(&t));
        let uin = |h: &HeaderMap| h["X-WECHAT-UIN"].to_str().unwrap().to_owned();
        assert_ne!(uin(&a), uin(&b));
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(uin(&a))
            .unwrap();
        assert!(String::from_utf8(decoded).unwrap().parse::<u32>().is_ok());
        assert_eq!(a["AuthorizationType"], "ilink_bot_token");
        assert!(a[AUTHORIZATION].is_sensitive());
    }
}
