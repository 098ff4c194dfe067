//! Discord: `POST /channels/{channel.id}/messages` with the bot token.
//!
//! Every message carries a `nonce` derived from its outbox id with `enforce_nonce: true`, so
//! Discord answers a repeat with the message the first attempt created instead of posting
//! it again. Discord keeps nonces only "in the past few minutes", which covers a retry and a
//! quick restart, not a send resumed hours later.
//!
//! A message with files goes as multipart/form-data ("Uploading Files"): the same JSON as
//! `payload_json`, its `attachments` naming each `files[n]` part by `id`, so the nonce
//! covers the files too and a repeat posts nothing twice.
//!
//! Sources (discord/discord-api-docs): `resources/message.md` (Create Message: `content` up
//! to 2000 characters, `nonce` up to 25 characters, `enforce_nonce`, `message_reference`),
//! `topics/rate-limits.md` (429 body `retry_after` in seconds as a float, `Retry-After`, the
//! `X-RateLimit-*` headers), `topics/opcodes-and-status-codes.md` (JSON error codes).

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::Target;
use crate::config::Secret;
use crate::gateway::platform_number::WaitKind;
use crate::gateway::send::classify::{self, header_wait, int, json, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::upload::{part, timeout_for};
use crate::gateway::send::{Answer, FileLimits, Outgoing, Post};

/// Create Message's `content` limit, in characters.
const MAX_TEXT: usize = 2000;
/// "Up to 10 files" per message; a file over the channel's upload limit is refused with
/// 413 (40005, "Request entity too large"). The limit a bot has everywhere is the smallest a
/// server grants, 10 MiB ("Uploading Files"; boosted servers allow more).
const MAX_FILES: usize = 10;
const MAX_FILE: u64 = 10 * 1024 * 1024;

pub struct Sender {
    pub(super) http: reqwest::Client,
    pub(super) api_base: String,
    pub(super) token: Secret,
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// With files the text is still `content`, up to its usual length.
    const FILES: Option<FileLimits> = Some(FileLimits {
        max_files: MAX_FILES,
        max_bytes: MAX_FILE,
        max_caption: MAX_TEXT,
    });

    /// Always, through the nonce, within the few minutes Discord remembers it.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        true
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        let Some(auth) = self.auth() else {
            let m = "the bot token holds a character an HTTP header cannot carry";
            return (Answer::Failed(local(m)), None);
        };
        let request = self
            .http
            .post(self.channel_url(&msg.target, "messages"))
            .header(AUTHORIZATION, auth);
        let request = if msg.files.is_empty() {
            request.json(&body(msg))
        } else {
            let bytes = msg.files.iter().map(|f| f.bytes).sum();
            match form(msg).await {
                Ok(form) => request.timeout(timeout_for(bytes)).multipart(form),
                Err(answer) => return (answer, None),
            }
        };
        match exchange(request).await {
            Ok(r) => classify(r.status, &r.headers, &r.body),
            Err(answer) => (answer, None),
        }
    }

    /// Trigger Typing Indicator (`resources/channel.md`): "expires after 10 seconds".
    const TYPING_LASTS: Option<Duration> = Some(Duration::from_secs(10));

    /// `POST /channels/{channel.id}/typing`, answered 204 with no body.
    async fn typing(&self, target: &Target) -> Result<(), String> {
        let auth = self.auth().ok_or("the bot token cannot be a header")?;
        let request = self
            .http
            .post(self.channel_url(target, "typing"))
            .header(AUTHORIZATION, auth);
        match exchange(request).await {
            Ok(r) if (200..300).contains(&r.status) => Ok(()),
            Ok(r) => Err(format!("HTTP {}", r.status)),
            Err(answer) => Err(format!("{answer:?}")),
        }
    }
}

impl Sender {
    fn auth(&self) -> Option<HeaderValue> {
        let mut auth = HeaderValue::from_str(&format!("Bot {}", self.token.expose())).ok()?;
        auth.set_sensitive(true);
        Some(auth)
    }

    fn channel_url(&self, target: &Target, what: &str) -> String {
        format!(
            "{}/channels/{}/{what}",
            self.api_base.trim_end_matches('/'),
            target.0
        )
    }
}

fn body(msg: &Outgoing<Target>) -> Value {
    let mut body = json!({
        "content": msg.text,
        "nonce": nonce(&msg.id),
        "enforce_nonce": true,
    });
    if let Some(id) = &msg.reply_to {
        body["message_reference"] = json!({ "message_id": id });
    }
    body
}

/// The message as `payload_json` and one `files[n]` part per file.
async fn form(msg: &Outgoing<Target>) -> Result<reqwest::multipart::Form, Answer> {
    let mut payload = body(msg);
    payload["attachments"] = msg
        .files
        .iter()
        .enumerate()
        .map(|(n, f)| json!({"id": n, "filename": f.name}))
        .collect();
    let mut form = reqwest::multipart::Form::new().text("payload_json", payload.to_string());
    for (n, file) in msg.files.iter().enumerate() {
        form = form.part(format!("files[{n}]"), part(file).await?);
    }
    Ok(form)
}

/// The message's nonce: the same for every attempt of one outbox message, within Discord's
/// 25 characters whatever the id looks like. A letter first keeps it from reading as a
/// number; 24 hex digits are 96 bits, so two messages do not meet by chance.
fn nonce(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    let mut s = String::with_capacity(25);
    s.push('h');
    for b in &digest[..12] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Classify Discord's answer. The second value is how long to wait before the next request
/// on this route: given when the answer says the route's bucket is spent
/// (`X-RateLimit-Remaining: 0`), whatever the status.
fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> (Answer, Option<Duration>) {
    let v = json(body);
    let answer = if (200..300).contains(&status) {
        // With enforce_nonce, a repeat is answered with the first message: sent either way.
        Answer::Sent {
            platform_id: classify::id(&v["id"]),
        }
    } else {
        let reply = classify::reply(status, int(&v["code"]), v["message"].as_str());
        match status {
            // The body's `retry_after` has the fraction the header rounds away.
            429 => Answer::Retry {
                after: classify::json_seconds(&v["retry_after"])
                    .or_else(|| classify::retry_after(headers)),
                reply,
            },
            // 401 is a token Discord does not know: no retry fixes it, and each one counts
            // towards the invalid-request limit. The rest follow their status: 400 (50035
            // invalid form body), 403 (50001 missing access, 50013 missing permissions),
            // 404 (10003 unknown channel) and 413 fail; 408 and 5xx retry.
            _ => classify::by_status(status, headers, reply),
        }
    };
    (answer, pause(headers))
}

fn pause(headers: &HeaderMap) -> Option<Duration> {
    let remaining = headers.get("x-ratelimit-remaining")?.to_str().ok()?;
    if remaining.trim() != "0" {
        return None;
    }
    // Pacing, not a refusal: a bucket that resets in 250 ms is waited 250 ms.
    header_wait(headers, "x-ratelimit-reset-after", WaitKind::Pacing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::send::PlatformReply;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn failed(status: u16, body: &str) -> PlatformReply {
        match classify(status, &HeaderMap::new(), body.as_bytes()).0 {
            Answer::Failed(r) => r,
            other => panic!("{status} {body}: {other:?}"),
        }
    }

    #[test]
    fn a_created_message_gives_its_id() {
        let (a, pause) = classify(200, &HeaderMap::new(), br#"{"id":"1100","content":"hi"}"#);
        assert_eq!(
            a,
            Answer::Sent {
                platform_id: Some("1100".into())
            }
        );
        assert_eq!(pause, None);
        let (a, _) = classify(200, &HeaderMap::new(), b"");
        assert_eq!(a, Answer::Sent { platform_id: None });
    }

    #[test]
    fn a_spent_bucket_asks_for_a_pause_even_on_success() {
        let h = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "1.25"),
        ]);
        let (_, pause) = classify(200, &h, br#"{"id":"1"}"#);
        assert_eq!(pause, Some(Duration::from_millis(1250)));
        let h = headers(&[
            ("x-ratelimit-remaining", "3"),
            ("x-ratelimit-reset-after", "1.25"),
        ]);
        assert_eq!(classify(200, &h, b"{}").1, None);
    }

    #[test]
    fn a_429_waits_as_long_as_the_body_says_or_else_the_header() {
        // The documented user-limit example.
        let h = headers(&[
            ("retry-after", "65"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "64.57"),
            ("x-ratelimit-scope", "user"),
        ]);
        let body =
            br#"{"message":"You are being rate limited.","retry_after":64.57,"global":false}"#;
        let (a, pause) = classify(429, &h, body);
        match a {
            Answer::Retry { after, reply } => {
                assert_eq!(after, Some(Duration::from_millis(64570)));
                assert_eq!(reply.status, Some(429));
                assert_eq!(reply.message, "You are being rate limited.");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(pause, Some(Duration::from_millis(64570)));
        let (a, _) = classify(429, &headers(&[("retry-after", "3")]), b"<html>");
        assert!(matches!(a, Answer::Retry { after: Some(d), .. } if d == Duration::from_secs(3)));
    }

    /// The one rule (platform_number::platform_wait) for the body's `retry_after` and the
    /// pacing header: a refusal waits 1 s to 1 h, a pause keeps a zero; nonsense is not given.
    #[test]
    fn waits_read_by_the_one_rule() {
        let (sec, hour) = (Duration::from_secs(1), Duration::from_secs(3600));
        let retry = |body: &str| match classify(429, &HeaderMap::new(), body.as_bytes()).0 {
            Answer::Retry { after, .. } => after,
            other => panic!("{other:?}"),
        };
        for (value, want) in [
            ("0", Some(sec)),
            ("-1", None),
            ("\"NaN\"", None),
            ("1.5", Some(Duration::from_millis(1500))),
            ("\"Wed, 21 Oct 2015 07:28:00 GMT\"", None),
            ("86400", Some(hour)),
            ("1e308", Some(hour)),
            ("\"inf\"", Some(hour)),
        ] {
            assert_eq!(retry(&format!(r#"{{"retry_after":{value}}}"#)), want, "{value}");
        }
        assert_eq!(retry("{}"), None);
        let pause = |after: &'static str| {
            let h = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset-after", after)]);
            classify(200, &h, b"{}").1
        };
        for (text, want) in [
            ("0", Some(Duration::ZERO)),
            ("-1", None),
            ("NaN", None),
            ("1.5", Some(Duration::from_millis(1500))),
            ("Wed, 21 Oct 2015 07:28:00 GMT", None),
            ("86400", Some(hour)),
            ("1e308", Some(hour)),
            ("inf", Some(hour)),
        ] {
            assert_eq!(pause(text), want, "{text}");
        }
        assert_eq!(classify(200, &headers(&[("x-ratelimit-remaining", "0")]), b"{}").1, None);
    }

    #[test]
    fn server_trouble_is_retried_and_a_gateway_timeout_is_unknown() {
        for s in [408, 500, 502, 503] {
            let (a, _) = classify(s, &HeaderMap::new(), b"");
            assert!(matches!(a, Answer::Retry { .. }), "{s}: {a:?}");
        }
        let (a, _) = classify(504, &HeaderMap::new(), b"");
        assert!(matches!(a, Answer::Unknown(_)), "{a:?}");
    }

    #[test]
    fn refusals_fail_with_discords_code_and_message() {
        let r = failed(404, r#"{"message":"Unknown Channel","code":10003}"#);
        assert_eq!((r.status, r.code), (Some(404), Some(10003)));
        assert_eq!(r.message, "Unknown Channel");
        let r = failed(403, r#"{"message":"Missing Access","code":50001}"#);
        assert_eq!(r.code, Some(50001));
        let r = failed(403, r#"{"message":"Missing Permissions","code":50013}"#);
        assert_eq!(r.code, Some(50013));
        let r = failed(
            400,
            r#"{"message":"Invalid Form Body","code":50035,"errors":{"content":{}}}"#,
        );
        assert_eq!(r.to_string(), "HTTP 400: code 50035: Invalid Form Body");
        let r = failed(413, "");
        assert_eq!(r.message, "Payload Too Large");
        let r = failed(401, r#"{"message":"401: Unauthorized","code":0}"#);
        assert_eq!(r.status, Some(401));
    }

    #[test]
    fn the_nonce_is_stable_short_and_not_a_number() {
        for id in ["", "01J9ZQ3V6K8W2M4N5P7R9S1T3V", &"x".repeat(1000)] {
            let n = nonce(id);
            assert_eq!(n, nonce(id));
            assert_eq!(n.len(), 25);
            assert!(n.starts_with('h'));
        }
        assert_ne!(nonce("a"), nonce("b"));
    }

    #[test]
    fn the_body_carries_the_nonce_and_the_reply() {
        let mut msg = Outgoing {
            id: "m1".into(),
            target: Target("1".into()),
            text: "hi".into(),
            reply_to: None,
            seq: None,
            files: vec![],
        };
        let b = body(&msg);
        assert_eq!(b["content"], "hi");
        assert_eq!(b["nonce"], nonce("m1"));
        assert_eq!(b["enforce_nonce"], true);
        assert!(b.get("message_reference").is_none());
        msg.reply_to = Some("99".into());
        assert_eq!(body(&msg)["message_reference"]["message_id"], "99");
    }
}
