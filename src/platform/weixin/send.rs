//! Weixin: `ilink/bot/sendmessage` to a peer, with the peer's newest `context_token` when
//! the adapter has seen one.
//!
//! A text over 2,000 characters goes as several messages, in order. Each piece has a
//! `client_id` made from the outbox message's id and the piece's number, the same on every
//! attempt, and iLink posts one message per `client_id`: a send whose answer was lost is
//! sent again whole and each piece is posted once.
//!
//! An answer that says the session expired while a `context_token` went with the request is
//! tried once more without it (the token, not the login, may be what expired); if that fails
//! the same way, the login is gone, and the message waits in the outbox (retried with
//! backoff) while the adapter shows `needs-login`.
//!
//! A message with files is its text first (the caption, as text messages), then one message
//! per file, each uploaded to the CDN encrypted (`files.rs`).
//!
//! Source: NousResearch/hermes-agent `gateway/platforms/weixin.py` (the `msg` body:
//! `to_user_id`, `client_id`, `message_type` 2, `message_state` 2, `item_list` with a text
//! item, `context_token`; codes -14 and -2).

mod files;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::account::{rate_limited, session_expired, WeixinAccount};
use super::Target;
use crate::gateway::send::classify::{self, json, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::progress::Progress;
use crate::gateway::send::split::pieces;
use crate::gateway::send::{Answer, FileLimits, Outgoing, Post, TextUnit};

/// The public client splits at 2,000 characters.
const PIECE: usize = 2000;
/// Sixteen messages' worth; longer is refused when it is queued.
const MAX_TEXT: usize = PIECE * 16;
/// After the frequency limit, the public client waits 30 s.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(30);
/// `message_type` and `message_state` of a finished message from a bot.
const FROM_BOT: u8 = 2;
const FINISHED: u8 = 2;

pub struct Sender {
    http: reqwest::Client,
    account: Arc<WeixinAccount>,
    /// The CDN files are uploaded to (`cdn-base`).
    cdn_base: String,
    /// Where an upload may go: the CDN's own origins.
    cdn_origins: crate::media::download::Origins,
    /// How far each unfinished message with files got (`files.rs`).
    /// Each unfinished message's files on the CDN and posts confirmed.
    progress: Progress<files::Uploaded>,
}

impl Sender {
    pub(super) fn new(http: reqwest::Client, account: Arc<WeixinAccount>, cdn_base: &str) -> Sender {
        Sender {
            http,
            account,
            cdn_base: cdn_base.trim_end_matches('/').to_owned(),
            cdn_origins: super::fetch::origins(cdn_base),
            progress: Progress::default(),
        }
    }
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    fn max_piece(&self) -> usize {
        PIECE
    }

    /// Always: iLink posts one message per piece's `client_id`.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        true
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        if !msg.files.is_empty() {
            return (self.post_files(msg).await, None);
        }
        (self.pieces(msg).await, None)
    }

    /// As `files.rs` says: each file its own message after the text.
    const FILES: Option<FileLimits> = Some(files::LIMITS);
}

impl Sender {
    async fn pieces(&self, msg: &Outgoing<Target>) -> Answer {
        let peer = &msg.target.0;
        let mut first = None;
        for (i, piece) in pieces(&msg.text, PIECE, TextUnit::Chars).iter().enumerate() {
            let client_id = format!("hermes-{}-{i}", msg.id);
            let item = json!({"type": 1, "text_item": {"text": piece}});
            match self.deliver(peer, item, &client_id).await {
                Answer::Sent { .. } => first = first.or(Some(client_id)),
                other => return other,
            }
        }
        Answer::Sent { platform_id: first }
    }

    /// One message of one `item` to `peer`, with the peer's context token, and once more
    /// without it when the answer says the session (or the token) expired.
    async fn deliver(&self, peer: &str, item: serde_json::Value, client_id: &str) -> Answer {
        let context = self.account.context(peer);
        let mut answer = self.post(peer, &item, client_id, context.as_deref()).await;
        if context.is_some() && expired(&answer) {
            answer = self.post(peer, &item, client_id, None).await;
        }
        answer
    }

    async fn post(
        &self,
        peer: &str,
        item: &serde_json::Value,
        client_id: &str,
        context: Option<&str>,
    ) -> Answer {
        let mut m = json!({
            "from_user_id": "",
            "to_user_id": peer,
            "client_id": client_id,
            "message_type": FROM_BOT,
            "message_state": FINISHED,
            "item_list": [item],
        });
        if let Some(c) = context {
            m["context_token"] = json!(c);
        }
        let request =
            match self
                .account
                .request(&self.http, "ilink/bot/sendmessage", json!({ "msg": m }))
            {
                Ok(r) => r,
                Err(e) => {
                    return Answer::Retry {
                        after: None,
                        reply: local(crate::error_chain::one_line(&e)),
                    }
                }
            };
        match exchange(request).await {
            Ok(r) => classify(r.status, &r.body),
            Err(answer) => answer,
        }
    }
}

/// Whether an answer is the session-expired one (kept as code -14 in the reply).
fn expired(answer: &Answer) -> bool {
    matches!(answer, Answer::Retry { reply, .. } if reply.code == Some(-14))
}

fn classify(status: u16, body: &[u8]) -> Answer {
    let v = json(body);
    let code = |k: &str| v[k].as_i64().unwrap_or(0);
    let (ret, errcode) = (code("ret"), code("errcode"));
    if status == 200 && v.is_object() && ret == 0 && errcode == 0 {
        return Answer::Sent { platform_id: None };
    }
    let platform_code = [ret, errcode].into_iter().find(|c| *c != 0);
    let reply = classify::reply(status, platform_code, v["errmsg"].as_str());
    if status != 200 {
        return classify::by_status(status, &reqwest::header::HeaderMap::new(), reply);
    }
    if session_expired(&v) {
        let mut reply = reply;
        reply.code = Some(-14);
        reply.message = format!(
            "{}; the Weixin login has expired: run `hermes-svc login weixin` for this profile",
            reply.message
        );
        return Answer::Retry { after: None, reply };
    }
    if rate_limited(&v) {
        return Answer::Retry {
            after: Some(RATE_LIMIT_WAIT),
            reply,
        };
    }
    Answer::Failed(reply)
}

/// Exposed for the classifier's tests in this module only.
#[cfg(test)]
fn answer(body: serde_json::Value) -> Answer {
    classify(200, body.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_by_code() {
        assert_eq!(
            answer(json!({"ret": 0})),
            Answer::Sent { platform_id: None }
        );
        assert_eq!(answer(json!({})), Answer::Sent { platform_id: None });
        let e = answer(json!({"ret": -14, "errmsg": "session timeout"}));
        assert!(expired(&e), "{e:?}");
        let stale = answer(json!({"ret": -2, "errmsg": "unknown error"}));
        assert!(expired(&stale), "{stale:?}");
        let limited = answer(json!({"ret": -2, "errmsg": "freq limit"}));
        assert!(
            matches!(limited, Answer::Retry { after: Some(d), .. } if d == RATE_LIMIT_WAIT),
            "{limited:?}"
        );
        assert!(matches!(
            answer(json!({"ret": -1, "errmsg": "too long"})),
            Answer::Failed(_)
        ));
        assert!(matches!(classify(502, b""), Answer::Retry { .. }));
        assert!(matches!(classify(200, b"not json"), Answer::Failed(_)));
    }
}
