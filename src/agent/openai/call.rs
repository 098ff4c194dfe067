//! One turn as one `POST /v1/chat/completions`, and what its answer means.
//!
//! The session's history is the agent's to keep (Hermes keeps it under `X-Hermes-Session-Id`,
//! and ignores any history in the body), so each call carries only the new message. An answer
//! can fail in three ways that must not be posted as replies: an HTTP error, a `429` (the agent
//! is busy: try again after `Retry-After`), and a `200` whose `finish_reason` is `error` (Hermes
//! puts the model's error there, with `hermes.failed: true`).

use std::time::Duration;

use serde_json::Value;

use crate::gateway::platform_number::{platform_wait_text, WaitKind};

/// How a call ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The reply to post; empty when the agent chose to say nothing.
    Reply(String),
    /// The agent is busy: ask again after this long.
    Busy(Duration),
    /// The agent could not be reached, or answered as a server in trouble (502, 503, 504):
    /// ask again later, without counting it against the turn.
    Away(String),
    /// The turn failed: the agent's or the model's error, in words.
    Failed(String),
}

/// The largest answer read: a long answer is a few hundred kilobytes of JSON, and one that
/// streams forever must fail its turn long before the unit's `MemoryMax` ends the gateway
/// (which would ask the same turn again after the restart: a crash loop).
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// The longest `Retry-After` honoured; a larger one is read as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The body of `response`, read as it arrives and given up past [`MAX_ANSWER_BYTES`]: the
/// answer is a failed turn then, and what was read is dropped at once.
pub async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, Answer> {
    let too_big = || {
        Answer::Failed(format!(
            "the answer is larger than {} MiB; nothing of it is posted",
            MAX_ANSWER_BYTES / (1024 * 1024)
        ))
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(too_big());
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(too_big());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) if e.is_timeout() => {
                return Err(Answer::Failed("the turn timed out (turn-timeout)".into()))
            }
            Err(e) => return Err(Answer::Away(format!("the answer was cut off: {e}"))),
        }
    }
}

/// Read an HTTP answer: `status`, its `Retry-After`, and its body.
pub fn read(status: u16, retry_after: Option<&str>, body: &[u8]) -> Answer {
    match status {
        200 => {}
        429 => {
            // The platforms' one rule (never 0: `Retry-After: 0` looped), then our own cap.
            let wait = retry_after
                .and_then(|r| platform_wait_text(r, WaitKind::Refusal))
                .unwrap_or(Duration::from_secs(1))
                .min(MAX_RETRY_AFTER);
            return Answer::Busy(wait);
        }
        502..=504 => return Answer::Away(format!("the agent answered HTTP {status}")),
        // A key it does not take is the bridge's setting, not the message's fault: the
        // message waits (doctor's HSV023 says so) instead of being given up.
        401 | 403 => {
            return Answer::Away(format!(
                "the agent refused the key (HTTP {status}): check [agent] key-env and the .env variable it names"
            ))
        }
        _ => {
            let said = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_default();
            return Answer::Failed(format!("HTTP {status} {said}").trim().to_owned());
        }
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Answer::Failed("the answer is not JSON".into());
    };
    let choice = &v["choices"][0];
    let content = choice["message"]["content"].as_str().unwrap_or("");
    if choice["finish_reason"] == "error" || v["hermes"]["failed"] == true {
        let why = v["hermes"]["error"]
            .as_str()
            .or(v["error"]["message"].as_str())
            .unwrap_or(content);
        return Answer::Failed(format!("the agent's turn failed: {}", why.trim()));
    }
    if !choice.is_object() {
        return Answer::Failed("the answer has no choices".into());
    }
    Answer::Reply(content.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_replies_waits_and_failures() {
        let ok = br#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        assert_eq!(read(200, None, ok), Answer::Reply("hi".into()));
        let failed = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Error: model down"},"finish_reason":"error"}],"hermes":{"failed":true}}"#;
        assert!(matches!(read(200, None, failed), Answer::Failed(w) if w.contains("model down")));
        assert_eq!(
            read(429, Some("3"), b""),
            Answer::Busy(Duration::from_secs(3))
        );
        assert_eq!(read(429, None, b""), Answer::Busy(Duration::from_secs(1)));
        assert_eq!(read(429, Some("86400"), b""), Answer::Busy(MAX_RETRY_AFTER));
        let sec = Duration::from_secs(1);
        for (text, want) in [
            ("0", sec),
            ("-1", sec),
            ("NaN", sec),
            ("1.5", Duration::from_millis(1500)),
            ("Wed, 21 Oct 2015 07:28:00 GMT", sec),
            ("1e308", MAX_RETRY_AFTER),
            ("inf", MAX_RETRY_AFTER),
        ] {
            assert_eq!(read(429, Some(text), b""), Answer::Busy(want), "{text}");
        }
        assert!(matches!(read(503, None, b""), Answer::Away(_)));
        let unauthorized =
            br#"{"error":{"message":"Invalid API key","type":"invalid_request_error"}}"#;
        assert!(matches!(read(401, None, unauthorized), Answer::Away(w) if w.contains("key-env")));
        let bad = br#"{"error":{"message":"Invalid session ID"}}"#;
        assert_eq!(
            read(400, None, bad),
            Answer::Failed("HTTP 400 Invalid session ID".into())
        );
        assert!(matches!(read(200, None, b"<html>"), Answer::Failed(_)));
    }
}
