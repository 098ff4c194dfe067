//! Matrix: `PUT /rooms/{roomId}/send/m.room.message/{txnId}` with the outbox message's id as
//! the transaction id (docs/research/matrix-client-server.md §5).
//!
//! The homeserver treats a request with the same path and transaction id from the same device
//! as the first one again and answers with the first event's id (spec, "Transaction
//! identifiers"; Synapse keeps them 24 h across restarts). So a send whose answer was lost is
//! sent again whatever the message's policy, and posts once.
//!
//! A reply is a rich reply, `m.relates_to.m.in_reply_to`, with no quoted fallback in the body
//! (MSC2781 removed it).
//!
//! A message with files is one upload and one event per file (`files.rs`), each event under a
//! transaction id of its own that is fixed by the message and the file's place in it, so the
//! same rule makes each file's event post once.

mod files;

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::{json, Value};

use super::api::{Api, Refusal};
use super::Target;
use crate::gateway::send::classify::{self, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::progress::Progress;
use crate::gateway::send::{Answer, FileLimits, Outgoing, Post};

/// The spec limits a whole event to 65,536 bytes of JSON; a text of 16,000 characters stays
/// under it in any script.
const MAX_TEXT: usize = 16_000;

pub struct Sender {
    api: Api,
    /// What each message with files has done so far (`files.rs`).
    /// Each unfinished message's uploaded content URIs and events posted.
    progress: Progress<String>,
}

impl Sender {
    pub(super) fn new(api: Api) -> Sender {
        Sender {
            api,
            progress: Progress::default(),
        }
    }
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// Always: the transaction id makes a repeat the same event.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        true
    }

    /// Files as `files.rs` chooses: its limits, with the text as the first file's caption.
    const FILES: Option<FileLimits> = Some(files::LIMITS);

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        if !msg.files.is_empty() {
            return (self.post_files(msg).await, None);
        }
        let mut content = json!({"msgtype": "m.text", "body": msg.text});
        reply_relation(&mut content, msg);
        (self.put_event(&msg.target, &msg.id, &content).await, None)
    }
}

impl Sender {
    /// One `m.room.message` event under transaction id `txn`.
    async fn put_event(&self, room: &Target, txn: &str, content: &Value) -> Answer {
        let path = ["rooms", &room.0, "send", "m.room.message", txn];
        let Some(request) = self.api.request(Method::PUT, &path, &[]) else {
            return Answer::Failed(local(BAD_TOKEN));
        };
        match exchange(request.json(content)).await {
            Ok(r) => classify(r.status, &r.headers, &r.body),
            Err(answer) => answer,
        }
    }
}

const BAD_TOKEN: &str = "the access token holds a character an HTTP header cannot carry";

/// The rich reply's relation, when the message answers an event.
fn reply_relation(content: &mut Value, msg: &Outgoing<Target>) {
    if let Some(event_id) = &msg.reply_to {
        content["m.relates_to"] = json!({"m.in_reply_to": {"event_id": event_id}});
    }
}

fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> Answer {
    if (200..300).contains(&status) {
        let v: Value = classify::json(body);
        return Answer::Sent {
            platform_id: v["event_id"].as_str().map(str::to_owned),
        };
    }
    let refusal = Refusal::read(status, headers, body);
    let reply = classify::reply(status, None, Some(&refusal.to_string()));
    if refusal.rate_limited() {
        return Answer::Retry {
            after: Some(refusal.wait()),
            reply,
        };
    }
    match status {
        // The transaction id makes any repeat safe, a gateway timeout's included.
        408 | 500..=599 => Answer::Retry { after: None, reply },
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
    fn matrix_answers_are_read_by_status_and_errcode() {
        let sent = answer(200, json!({"event_id": "$e1"}));
        assert_eq!(sent, Answer::Sent { platform_id: Some("$e1".into()) });
        let limited = answer(429, json!({"errcode": "M_LIMIT_EXCEEDED", "error": "x", "retry_after_ms": 2000}));
        assert_eq!(
            limited,
            Answer::Retry {
                after: Some(Duration::from_secs(2)),
                reply: classify::reply(429, None, Some("HTTP 429 M_LIMIT_EXCEEDED: x")),
            }
        );
        assert!(matches!(answer(504, Value::Null), Answer::Retry { .. }));
        assert!(matches!(answer(502, Value::Null), Answer::Retry { .. }));
        for (status, code) in [(403, "M_FORBIDDEN"), (401, "M_UNKNOWN_TOKEN"), (400, "M_BAD_JSON")] {
            match answer(status, json!({"errcode": code, "error": "no"})) {
                Answer::Failed(reply) => assert!(reply.to_string().contains(code), "{reply}"),
                other => panic!("{code}: {other:?}"),
            }
        }
    }
}
