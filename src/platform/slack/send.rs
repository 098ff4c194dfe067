//! Slack: `POST /api/chat.postMessage` with the bot token (docs.slack.dev, chat.postMessage;
//! docs/research/slack-socket-mode.md §6).
//!
//! Slack has no idempotency key for a post, so a request whose answer was lost may or may not
//! have posted: the message's policy decides (at-most-once makes it `unknown`, at-least-once
//! sends it again). The SDKs retry such a request once by default and post twice; here it is
//! the agent's choice, per message.
//!
//! Answers are HTTP 200 with `ok`, except a rate limit (429, `Retry-After` in seconds). Of the
//! `ok: false` errors, `ratelimited` and `service_unavailable` are retried, `internal_error`
//! and `fatal_error` are unknown ("some aspect of the operation [may have] succeeded"), and
//! the rest (`channel_not_found`, `not_in_channel`, `invalid_auth`, …) fail with Slack's word.
//!
//! A message with files goes through Slack's external upload flow instead (`files.rs`), its
//! text the files' `initial_comment`: one post with every file, under the same rule, since
//! that flow has no key either.

mod files;

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};

use super::Target;
use crate::config::Secret;
use crate::gateway::send::classify::{self, json, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::{Answer, FileLimits, Outgoing, Post};
use crate::media::download::Origins;

/// "We recommend keeping your text to 4,000 characters"; above 40,000 Slack truncates.
const MAX_TEXT: usize = 4000;

pub struct Sender {
    http: reqwest::Client,
    api_base: String,
    token: Secret,
    /// Where an upload URL Slack hands out may point (`files.rs`).
    upload_origins: Origins,
}

impl Sender {
    pub(super) fn new(http: reqwest::Client, api_base: &str, token: Secret) -> Sender {
        let api_base = api_base.trim_end_matches('/').to_owned();
        Sender {
            upload_origins: files::upload_origins(&api_base),
            http,
            api_base,
            token,
        }
    }
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// Never: Slack has no idempotency key, for a post or for sharing files.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        false
    }

    /// Files as `files.rs` chooses, the text their `initial_comment`.
    const FILES: Option<FileLimits> = Some(files::LIMITS);

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        let Some(auth) = self.auth() else {
            let m = "the bot token holds a character an HTTP header cannot carry";
            return (Answer::Failed(local(m)), None);
        };
        if !msg.files.is_empty() {
            return (self.post_files(msg, auth).await, None);
        }
        let mut body = json!({"channel": msg.target.0, "text": msg.text});
        if let Some(thread) = &msg.reply_to {
            body["thread_ts"] = json!(thread);
        }
        let request = self
            .http
            .post(format!("{}/api/chat.postMessage", self.api_base))
            .header(AUTHORIZATION, auth)
            .json(&body);
        match exchange(request).await {
            Ok(r) => (classify(r.status, &r.headers, &r.body), None),
            Err(answer) => (answer, None),
        }
    }
}

impl Sender {
    fn auth(&self) -> Option<HeaderValue> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", self.token.expose())).ok()?;
        auth.set_sensitive(true);
        Some(auth)
    }
}

fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> Answer {
    let v: Value = json(body);
    let error = v["error"].as_str();
    let reply = classify::reply(status, None, error);
    if status == 429 || error == Some("ratelimited") {
        return Answer::Retry {
            after: classify::retry_after(headers),
            reply,
        };
    }
    if !(200..300).contains(&status) {
        return classify::by_status(status, headers, reply);
    }
    match (v["ok"].as_bool(), error) {
        (Some(true), _) => Answer::Sent {
            platform_id: v["ts"].as_str().map(str::to_owned),
        },
        (_, Some("service_unavailable" | "rate_limited" | "message_limit_exceeded")) => {
            Answer::Retry { after: None, reply }
        }
        (_, Some(e @ ("internal_error" | "fatal_error"))) => Answer::Unknown(format!(
            "Slack answered {e}, which may follow a post it made"
        )),
        _ => Answer::Failed(reply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: Value) -> Answer {
        classify(status, &HeaderMap::new(), body.to_string().as_bytes())
    }

    #[test]
    fn slacks_answers_are_read_by_ok_and_error() {
        let sent = answer(200, json!({"ok": true, "channel": "C1", "ts": "1.2"}));
        assert_eq!(sent, Answer::Sent { platform_id: Some("1.2".into()) });
        assert!(matches!(answer(429, json!({"ok": false, "error": "ratelimited"})), Answer::Retry { .. }));
        assert!(matches!(answer(200, json!({"ok": false, "error": "service_unavailable"})), Answer::Retry { .. }));
        assert!(matches!(answer(200, json!({"ok": false, "error": "internal_error"})), Answer::Unknown(_)));
        for failed in ["channel_not_found", "not_in_channel", "invalid_auth", "no_text"] {
            match answer(200, json!({"ok": false, "error": failed})) {
                Answer::Failed(reply) => assert!(reply.to_string().contains(failed), "{reply}"),
                other => panic!("{failed}: {other:?}"),
            }
        }
        assert!(matches!(answer(503, json!({"ok": false})), Answer::Retry { .. }));
    }
}
