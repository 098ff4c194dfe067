//! The homeserver's client-server API as every part of this wing calls it: URLs under
//! `/_matrix/client/v3/` (and the content repository's upload, under `/_matrix/media/v3/`) with each id percent-encoded as one path segment (room and event
//! ids hold `!`, `:` and `$`), the access token in the `Authorization` header (never in the
//! query string, where it would reach logs), and what an error answer says
//! (docs/research/matrix-client-server.md §1, §6).

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::{Method, Url};
use serde_json::Value;

use crate::config::Secret;
use crate::gateway::send::classify;
use crate::safe_text::clip;

/// A 429 that names no wait waits this long (matrix-nio's default).
const DEFAULT_RETRY: Duration = Duration::from_secs(5);

/// One homeserver and the token the bot calls it with.
#[derive(Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    auth: Option<HeaderValue>,
}

impl Api {
    pub(crate) fn new(http: reqwest::Client, homeserver: &str, token: &Secret) -> Self {
        let auth = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .ok()
            .map(|mut h| {
                h.set_sensitive(true);
                h
            });
        Api {
            http,
            base: homeserver.trim_end_matches('/').to_owned(),
            auth,
        }
    }

    /// `method` on `/_matrix/client/v3/` + `segments`, each encoded as one segment, with
    /// `query`; `None` when the token cannot be an HTTP header (it holds a control
    /// character), which no request can fix.
    pub(crate) fn request(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Option<reqwest::RequestBuilder> {
        self.request_under("client/v3", method, segments, query)
    }

    /// `method` on `/_matrix/` + `root` + `segments`, as [`Api::request`] does for the
    /// client API: for the content repository's upload, which stays under `media/v3`.
    pub(crate) fn request_under(
        &self,
        root: &str,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Option<reqwest::RequestBuilder> {
        let mut url = Url::parse(&format!("{}/_matrix/{root}/", self.base)).ok()?;
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let auth = self.auth.clone()?;
        Some(self.http.request(method, url).header(AUTHORIZATION, auth))
    }
}

/// What an answer that is not a success says, in the spec's terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) status: u16,
    /// `M_UNKNOWN_TOKEN`, `M_LIMIT_EXCEEDED`, …; none for a body that is not Matrix's
    /// (a proxy's error page).
    pub(crate) errcode: Option<String>,
    /// The server's words, clipped: they go into logs and status.
    pub(crate) error: String,
    pub(crate) soft_logout: bool,
    /// `Retry-After` first (MSC4041 deprecates the body's field), then `retry_after_ms`,
    /// each by the one rule (platform_number::platform_wait: 1 s to 1 h); one that is not
    /// given (missing, negative, NaN, an HTTP-date) gives way to the next.
    pub(crate) retry_after: Option<Duration>,
}

impl Refusal {
    pub(crate) fn read(status: u16, headers: &HeaderMap, body: &[u8]) -> Refusal {
        let v: Value = classify::json(body);
        let retry_after = classify::retry_after(headers).or_else(|| {
            v["retry_after_ms"]
                .as_f64()
                .and_then(|ms| classify::seconds(ms / 1000.0))
        });
        Refusal {
            status,
            errcode: v["errcode"].as_str().map(|c| clip(c, 64)),
            error: clip(v["error"].as_str().unwrap_or("no description"), 200),
            soft_logout: v["soft_logout"] == true,
            retry_after,
        }
    }

    pub(crate) fn is(&self, errcode: &str) -> bool {
        self.errcode.as_deref() == Some(errcode)
    }

    /// The token is not (or no longer) good: retrying cannot help until it is replaced.
    pub(crate) fn token_refused(&self) -> bool {
        self.status == 401 || self.is("M_UNKNOWN_TOKEN") || self.is("M_MISSING_TOKEN")
    }

    pub(crate) fn rate_limited(&self) -> bool {
        self.status == 429 || self.is("M_LIMIT_EXCEEDED")
    }

    /// How long a rate limit asks to wait.
    pub(crate) fn wait(&self) -> Duration {
        self.retry_after.unwrap_or(DEFAULT_RETRY)
    }

    /// What a person should do about a refused token.
    pub(crate) fn token_fix(&self, token_env: &str) -> String {
        let how = if self.soft_logout {
            "the homeserver soft-logged the session out: log the bot in again"
        } else {
            "the token was revoked, logged out, or never valid: log the bot in again (or make \
             a new access token)"
        };
        format!("{how} and put its access token in {token_env} in the profile's .env, then restart the gateway")
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)?;
        if let Some(code) = &self.errcode {
            write!(f, " {code}")?;
        }
        write!(f, ": {}", self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_one_segment_each_and_the_token_is_a_header() {
        // The client needs a crypto provider, which nothing else in this test installs.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = Api::new(
            reqwest::Client::new(),
            "https://hs.example/",
            &Secret::new("syt_x".into()),
        );
        let req = api
            .request(
                Method::PUT,
                &["rooms", "!r:hs.example", "send", "m.room.message", "a/b?c"],
                &[],
            )
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(
            req.url().as_str(),
            "https://hs.example/_matrix/client/v3/rooms/!r:hs.example/send/m.room.message/a%2Fb%3Fc"
        );
        assert!(req.headers()[AUTHORIZATION].is_sensitive());
        assert!(!req.url().as_str().contains("syt_x"));
        let bad = Api::new(reqwest::Client::new(), "https://hs", &Secret::new("a\nb".into()));
        assert!(bad.request(Method::GET, &["sync"], &[]).is_none());
    }

    #[test]
    fn waits_are_read_by_the_one_rule() {
        use reqwest::header::RETRY_AFTER;
        let (sec, hour) = (Duration::from_secs(1), Duration::from_secs(3600));
        let by_header = |text: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(RETRY_AFTER, HeaderValue::from_static(text));
            Refusal::read(429, &h, b"{}").wait()
        };
        for (text, want) in [
            ("0", sec),
            ("-1", DEFAULT_RETRY),
            ("NaN", DEFAULT_RETRY),
            ("1.5", Duration::from_millis(1500)),
            ("Wed, 21 Oct 2015 07:28:00 GMT", DEFAULT_RETRY),
            ("86400", hour),
            ("1e308", hour),
            ("inf", hour),
        ] {
            assert_eq!(by_header(text), want, "Retry-After: {text}");
        }
        let by_body = |ms: &str| {
            let body = format!(r#"{{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":{ms}}}"#);
            Refusal::read(429, &HeaderMap::new(), body.as_bytes()).wait()
        };
        for (ms, want) in [
            ("0", sec),
            ("-1", DEFAULT_RETRY),
            ("\"NaN\"", DEFAULT_RETRY),
            ("1500", Duration::from_millis(1500)),
            ("\"Wed, 21 Oct 2015 07:28:00 GMT\"", DEFAULT_RETRY),
            ("86400000", hour),
            ("1e308", hour),
            ("\"inf\"", DEFAULT_RETRY),
        ] {
            assert_eq!(by_body(ms), want, "retry_after_ms: {ms}");
        }
        assert_eq!(by_body("null"), DEFAULT_RETRY);
        // A header that is not a wait gives way to the body's.
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        let body = br#"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":2500}"#;
        assert_eq!(Refusal::read(429, &h, body).wait(), Duration::from_millis(2500));
    }

    #[test]
    fn retry_after_prefers_the_header_then_the_body() {
        let body = json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests",
            "retry_after_ms": 1500});
        let bytes = body.to_string();
        let r = Refusal::read(429, &HeaderMap::new(), bytes.as_bytes());
        assert!(r.rate_limited());
        assert_eq!(r.wait(), Duration::from_millis(1500));
        let mut h = HeaderMap::new();
        h.insert(
            reqwest::header::RETRY_AFTER,
            HeaderValue::from_static("2"),
        );
        assert_eq!(Refusal::read(429, &h, bytes.as_bytes()).wait(), Duration::from_secs(2));
        let html = Refusal::read(429, &HeaderMap::new(), b"<html>slow down</html>");
        assert_eq!(html.wait(), DEFAULT_RETRY);
        assert_eq!(html.errcode, None);
        let gone = json!({"errcode": "M_UNKNOWN_TOKEN", "error": "x", "soft_logout": true});
        let r = Refusal::read(401, &HeaderMap::new(), gone.to_string().as_bytes());
        assert!(r.token_refused() && r.soft_logout);
        assert!(r.token_fix("MX").contains("soft-logged"));
    }
}
