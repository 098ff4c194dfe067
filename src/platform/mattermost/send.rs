//! Mattermost: `POST /api/v4/posts` with `channel_id`, `message`, `root_id` for a reply in a
//! thread, and the outbox message's id as `pending_post_id` (api.mattermost.com, "Create a
//! post"; `deduplicateCreatePost` in the server's `app/post.go`).
//!
//! The server remembers a `pending_post_id` for 30 s (`PendingPostIDsCacheTTL`): a repeat
//! within that time is answered with the first post, and a repeat that arrives while the
//! first is still being saved gets a 500 (`api.post.deduplicate_create_post.pending`), which
//! is a retry. So a send whose answer was lost is sent again and posts once, as long as the
//! repeat comes within the 30 s: the outbox's first retries do (its backoff starts at a
//! second); a repeat after a longer outage may post a second copy, which is the server's
//! limit, not ours.
//!
//! Answers: 201 with the post; errors are an `AppError` (`id`, `message`, `status_code`).
//! 429 carries `X-Ratelimit-Reset` (seconds); 401/403/404/400 fail with the server's word.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};

use super::Target;
use crate::config::Secret;
use crate::gateway::platform_number::WaitKind;
use crate::gateway::send::classify::{self, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::{Answer, Outgoing, Post};

/// `PostMessageMaxRunesV2`: 16,383 characters (servers since 5.0).
const MAX_TEXT: usize = 16_383;

/// The id of the 500 a repeat gets while the first post is still being saved.
const PENDING: &str = "api.post.deduplicate_create_post.pending";

pub struct Sender {
    http: reqwest::Client,
    server_url: String,
    token: Secret,
}

impl Sender {
    pub(super) fn new(http: reqwest::Client, server_url: &str, token: Secret) -> Sender {
        Sender {
            http,
            server_url: server_url.trim_end_matches('/').to_owned(),
            token,
        }
    }

    fn auth(&self) -> Option<HeaderValue> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", self.token.expose())).ok()?;
        auth.set_sensitive(true);
        Some(auth)
    }
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// Always, within the server's 30 s: `pending_post_id` makes a repeat the first post.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        true
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        let Some(auth) = self.auth() else {
            let m = "the token holds a character an HTTP header cannot carry";
            return (Answer::Failed(local(m)), None);
        };
        let mut body = json!({"channel_id": msg.target.0, "message": msg.text,
                              "pending_post_id": msg.id});
        if let Some(root) = &msg.reply_to {
            body["root_id"] = json!(root);
        }
        let request = self
            .http
            .post(format!("{}/api/v4/posts", self.server_url))
            .header(AUTHORIZATION, auth)
            .json(&body);
        match exchange(request).await {
            Ok(r) => (classify(r.status, &r.headers, &r.body), None),
            Err(answer) => (answer, None),
        }
    }
}

fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> Answer {
    let v: Value = classify::json(body);
    if (200..300).contains(&status) {
        return Answer::Sent {
            platform_id: classify::id(&v["id"]),
        };
    }
    let error_id = v["id"].as_str().unwrap_or("");
    let said = v["message"].as_str().filter(|m| !m.is_empty()).unwrap_or(error_id);
    let reply = classify::reply(status, None, Some(said));
    if status == 429 {
        return Answer::Retry {
            after: classify::header_wait(headers, "x-ratelimit-reset", WaitKind::Refusal)
                .or_else(|| classify::retry_after(headers)),
            reply,
        };
    }
    if error_id == PENDING {
        // The first attempt is still being saved: asking again shortly gets its post.
        return Answer::Retry {
            after: Some(Duration::from_secs(1)),
            reply,
        };
    }
    classify::by_status(status, headers, reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: Value) -> Answer {
        classify(status, &HeaderMap::new(), body.to_string().as_bytes())
    }

    #[test]
    fn mattermosts_answers_are_read_by_status_and_error_id() {
        let sent = answer(201, json!({"id": "pppppppppppppppppppppppppp", "message": "hi"}));
        assert_eq!(sent, Answer::Sent { platform_id: Some("pppppppppppppppppppppppppp".into()) });
        let pending = answer(500, json!({"id": PENDING, "status_code": 500}));
        assert!(matches!(pending, Answer::Retry { after: Some(_), .. }));
        assert!(matches!(answer(429, json!({"id": "api.context.rate_limited"})), Answer::Retry { .. }));
        assert!(matches!(answer(503, json!({})), Answer::Retry { .. }));
        for (status, id) in [(403, "api.context.permissions.app_error"), (400, "model.post.is_valid.channel_id.app_error"), (401, "api.context.session_expired.app_error")] {
            match answer(status, json!({"id": id, "message": ""})) {
                Answer::Failed(reply) => assert!(reply.to_string().contains(id), "{reply}"),
                other => panic!("{status}: {other:?}"),
            }
        }
    }
}
