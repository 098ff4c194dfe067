//! What both platforms' answers share: reading the body, the platform's own code and
//! message, waits given in seconds, and what a status means when the body says nothing
//! more specific.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use super::{Answer, PlatformReply};
use crate::gateway::platform_number::{self, WaitKind};

/// The platform's message is kept to this many characters: it goes into the journal and
/// logs, and a proxy's error page must not.
const MAX_MESSAGE: usize = 200;

/// The body as JSON, or `Null` when it is empty or not JSON (a proxy's HTML page).
pub(crate) fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// A number that may come as a JSON number or a string of digits (QQ sends both).
pub(crate) fn int(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A non-empty string id.
pub(crate) fn id(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// What to keep of an answer that was not a success: the status, the platform's code, and
/// its message (or the status's reason when the body has none).
pub(crate) fn reply(status: u16, code: Option<i64>, message: Option<&str>) -> PlatformReply {
    let message = match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => crate::safe_text::clip(m, MAX_MESSAGE),
        None => reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_owned(),
    };
    PlatformReply {
        status: Some(status),
        code,
        message,
    }
}

/// A reply for something that happened before any answer (or instead of a request).
pub(crate) fn local(message: impl Into<String>) -> PlatformReply {
    PlatformReply {
        status: None,
        code: None,
        message: message.into(),
    }
}

/// A refusal's wait given in seconds, possibly with a fraction, by the one rule
/// ([`platform_number::platform_wait`]): 1 s to 1 h; negative and NaN are not given.
pub(crate) fn seconds(s: f64) -> Option<Duration> {
    platform_number::platform_wait(s, WaitKind::Refusal)
}

/// A refusal's wait in a body's field: a JSON number of seconds, or a string of one.
pub(crate) fn json_seconds(v: &Value) -> Option<Duration> {
    platform_number::platform_wait_json(v, WaitKind::Refusal)
}

/// A header holding seconds (`Retry-After: 65`, `X-RateLimit-Reset-After: 64.57`), read
/// as `kind`. The HTTP-date form of `Retry-After` is not used by any platform we speak and
/// reads as not given.
pub(crate) fn header_wait(headers: &HeaderMap, name: &str, kind: WaitKind) -> Option<Duration> {
    platform_number::platform_wait_text(headers.get(name)?.to_str().ok()?, kind)
}

/// A refusal's `Retry-After`.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    header_wait(headers, RETRY_AFTER.as_str(), WaitKind::Refusal)
}

/// What a status alone says, for an answer the platform's code did not settle: throttled
/// or a server error, retry (after `Retry-After` when given); a gateway timeout, unknown
/// (the platform behind it may have posted the message and not said so in time); anything
/// else, failed.
pub(crate) fn by_status(status: u16, headers: &HeaderMap, reply: PlatformReply) -> Answer {
    match status {
        504 => Answer::Unknown(format!("the platform's gateway timed out: {reply}")),
        408 | 429 | 500..=599 => Answer::Retry {
            after: retry_after(headers),
            reply,
        },
        _ => Answer::Failed(reply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    const SEC: Duration = Duration::from_secs(1);
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn seconds_are_a_second_to_an_hour() {
        assert_eq!(seconds(1.5), Some(Duration::from_millis(1500)));
        assert_eq!(seconds(0.0), Some(SEC));
        assert_eq!(seconds(-1.0), None);
        assert_eq!(seconds(f64::NAN), None);
        assert_eq!(seconds(f64::INFINITY), Some(HOUR));
        assert_eq!(seconds(1e308), Some(HOUR));
        assert_eq!(seconds(86_400.0), Some(HOUR));
    }

    #[test]
    fn retry_after_reads_seconds_and_ignores_the_rest() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        for (text, want) in [
            ("65", Some(Duration::from_secs(65))),
            ("0", Some(SEC)),
            ("-1", None),
            ("NaN", None),
            ("1.5", Some(Duration::from_millis(1500))),
            ("Wed, 21 Oct 2015 07:28:00 GMT", None),
            ("86400", Some(HOUR)),
            ("1e308", Some(HOUR)),
            ("inf", Some(HOUR)),
        ] {
            h.insert(RETRY_AFTER, HeaderValue::from_static(text));
            assert_eq!(retry_after(&h), want, "{text}");
        }
    }

    #[test]
    fn a_reply_keeps_the_platform_words_cut_short() {
        let r = reply(400, Some(50035), Some("Invalid Form Body"));
        assert_eq!(r.to_string(), "HTTP 400: code 50035: Invalid Form Body");
        let r = reply(502, None, None);
        assert_eq!(r.message, "Bad Gateway");
        let long = "x".repeat(10_000);
        // The limit, and the mark that says it was cut.
        assert_eq!(
            reply(400, None, Some(&long)).message.chars().count(),
            MAX_MESSAGE + 1
        );
    }

    #[test]
    fn statuses_alone() {
        let h = HeaderMap::new();
        let r = || reply(500, None, None);
        for s in [408, 429, 500, 502, 503] {
            assert!(matches!(by_status(s, &h, r()), Answer::Retry { .. }), "{s}");
        }
        assert!(matches!(by_status(504, &h, r()), Answer::Unknown(_)));
        for s in [400, 401, 403, 404, 405, 413, 302] {
            assert!(matches!(by_status(s, &h, r()), Answer::Failed(_)), "{s}");
        }
    }
}
