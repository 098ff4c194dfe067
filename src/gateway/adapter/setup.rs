//! What a WebSocket adapter's platform does before each connection, and the trait it does it
//! through ([`Connector`]): fetch or refresh a credential, find the gateway's URL, and say
//! which dialect the server speaks; then, after the connection, read how it was closed. The
//! platforms' own connectors live in their wings; what they share is here: the errors of
//! setup, a gateway-endpoint lookup, and one bounded way to make a setup request.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use super::close_code::CloseAction;
use super::dialect::Dialect;
use super::identify_queue::SessionStartLimit;
use super::outlet::Outlet;
use super::Shared;

/// A platform's side of a WebSocket adapter, kept across its connections.
pub(crate) trait Connector: Send {
    /// What the next connection needs: its URL, its credentials, its dialect. `resume_url`
    /// is where the last session said to resume, if it said.
    fn prepare(
        &mut self,
        resume_url: Option<&str>,
    ) -> impl Future<Output = Result<Prepared, PlatformError>> + Send;

    /// Forget what was looked up (after a failed connect, the gateway may have moved).
    fn invalidate(&mut self) {}

    /// Forget the credential the last connection used: the platform said it is stale.
    fn drop_token(&mut self) {}

    /// Which session start limit the adapter counts against: a hash of the platform and the
    /// credential, never a secret.
    fn identify_key(&self) -> String;

    /// What the server closing with `code` means, and what to do next. A plain server's
    /// own codes mean nothing: it is reconnected.
    fn close(&self, _code: Option<u16>) -> (CloseAction, &'static str) {
        (CloseAction::Resume, "closed")
    }

    /// What the user can do about a fatal close, where the code says more than its meaning.
    fn fatal_hint(&self, _code: Option<u16>) -> String {
        String::new()
    }

    /// The live connection's outlet, when the adapter's sender writes into it.
    fn outlet(&self) -> Option<Arc<Outlet>> {
        None
    }
}

/// Why setup failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlatformError {
    /// Retrying will not help (rejected credentials): the gateway exits 78.
    #[error("{0}")]
    Fatal(String),
    /// A server error, or an answer that is not one: back off and retry.
    #[error("{0}")]
    Retry(String),
    /// The request got no answer at all (connection refused, DNS, a reset, no answer in
    /// time): the platform said nothing, so no wait it asked for before applies; back off
    /// from the start of the schedule and retry.
    #[error("{0}")]
    Unreachable(String),
}

/// Everything one connection attempt needs.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) url: String,
    pub(crate) authorization: Option<String>,
    pub(crate) dialect: Dialect,
    /// What discovery said about the session start limit, when it said anything.
    pub(crate) limit: Option<SessionStartLimit>,
}

/// What a gateway endpoint (`GET /gateway/bot`) answered.
pub(crate) enum Discovery {
    Found(String, Option<SessionStartLimit>),
    /// 401 or 403, with the platform's words.
    Refused(String),
}

/// A gateway endpoint (`GET /gateway/bot`): the WebSocket URL, and the session start limit
/// when given; or the platform's refusal of the credential (401, 403), which each platform
/// reads its own way.
pub(crate) async fn discover(
    shared: &Shared,
    endpoint: &str,
    auth: &str,
) -> Result<Discovery, PlatformError> {
    let request = shared.http.get(endpoint).header("Authorization", auth);
    let (status, v) = shared.call("gateway endpoint", request).await?;
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Ok(Discovery::Refused(format!(
            "gateway endpoint rejected the credential ({status}{})",
            platform_says(&v)
        )));
    }
    if !status.is_success() {
        return Err(PlatformError::Retry(format!(
            "gateway endpoint answered {status}{}",
            platform_says(&v)
        )));
    }
    let url = v["url"]
        .as_str()
        .filter(|u| u.starts_with("ws://") || u.starts_with("wss://"))
        .ok_or_else(|| PlatformError::Retry("gateway endpoint returned no ws url".into()))?
        .to_owned();
    Ok(Discovery::Found(url, SessionStartLimit::from_json(&v)))
}

/// `: code N: message` from a platform's error body, or nothing. The message is the
/// platform's own text, cut short, so a log line never grows without bound.
pub(crate) fn platform_says(v: &Value) -> String {
    let code = v.get("code").and_then(Value::as_i64);
    let message = v
        .get("message")
        .or_else(|| v.get("msg"))
        .and_then(Value::as_str)
        .map(|m| crate::safe_text::clip(m, 200));
    match (code, message) {
        (Some(c), Some(m)) => format!(": code {c}: {m}"),
        (Some(c), None) => format!(": code {c}"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) => String::new(),
    }
}

impl Shared {
    /// Send an HTTP request and read its JSON answer, whatever the status (platforms put their
    /// error codes in the body). At most a few such requests run at once per gateway, so a
    /// thousand adapters starting together neither flood the platform nor leave a thousand
    /// connections behind. Messages never carry the URL (a query string could hold a
    /// credential).
    pub(crate) async fn call(
        &self,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, Value), PlatformError> {
        let said = |e: reqwest::Error| format!("{what}: {}", e.without_url());
        let _permit = self.setup_permits.acquire().await;
        let resp = request
            .send()
            .await
            .map_err(|e| PlatformError::Unreachable(said(e)))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| PlatformError::Retry(said(e)))?;
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok((status, v)),
            Err(_) if status.is_success() => Err(PlatformError::Retry(format!(
                "{what} answered {status} with a body that is not JSON"
            ))),
            Err(_) => Ok((status, Value::Null)),
        }
    }
}
