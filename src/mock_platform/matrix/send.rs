//! `PUT /_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}`
//! (docs/research/matrix-client-server.md §5, spec `room_send.yaml` and §Transaction
//! identifiers) through the shared send machinery: the armed
//! [`SendFault`](crate::mock_platform::SendFault) in the homeserver's shapes, the post record
//! and the attempt log.
//!
//! Idempotent as the spec (v1.7, MSC3970) scopes it: the same transaction id on the same path
//! from the same device is a retransmission, answered 200 with the original `event_id` and
//! recorded nothing new. The record decides that under its lock, so a retry racing the first
//! request still finds it once it is accepted; a request that failed before being accepted
//! left nothing behind, so its retry is a new send ("failures are not cached"). An accepted
//! event joins the room's timeline as the bot's own echo, with `unsigned.transaction_id`.
//!
//! A file event (`m.image`, `m.file`, `m.audio`, `m.video`) is recorded with its caption as
//! the post's content and the uploaded content its `url` names as the post's file.

use std::time::Duration;

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::post::{Platform, Post, PostedFile, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::auth;
use super::errors;
use super::events::{self, Origin};
use super::state::MatrixState;

/// How long a transaction id is remembered: Synapse's persistent
/// `event_txn_id_device_id` table is pruned after 24 h (its in-memory cache keeps entries
/// 30-60 min).
const TXN_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// The path's ids, decoded.
pub(crate) struct SendPath {
    pub(crate) room: String,
    pub(crate) event_type: String,
    pub(crate) txn_id: String,
}

pub(crate) fn send(
    head: &RequestHead,
    body: &[u8],
    path: SendPath,
    state: &MatrixState,
    posts: &PostRecord,
) -> Reply {
    let room = path.room.clone();
    attempted(posts, Platform::Matrix, Target::Room, room, |attempt| {
        state.count(|s| s.sends += 1);
        if let Err(answer) = auth::check(head, state) {
            return Reply::Answer(answer);
        }
        if let Some(refused) = struck_before(posts, attempt, &ClientServer) {
            return refused;
        }
        let content = match content(body) {
            Ok(content) => content,
            Err(answer) => return Reply::Answer(answer),
        };
        if !state.is_joined(&path.room) {
            let user = &state.config.user_id;
            return Reply::Answer(errors::not_in_room(user, &path.room));
        }
        process(path, content, state, posts, attempt)
    })
}

/// "The request body … is the event content": a JSON object.
fn content(body: &[u8]) -> Result<Value, Answer> {
    let Ok(content) = serde_json::from_slice::<Value>(body) else {
        return Err(errors::error(400, "M_NOT_JSON", "Content not JSON."));
    };
    if !content.is_object() {
        return Err(errors::error(
            400,
            "M_BAD_JSON",
            "Content must be a JSON object.",
        ));
    }
    Ok(content)
}

fn process(
    path: SendPath,
    content: Value,
    state: &MatrixState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
) -> Reply {
    let config = &state.config;
    let (text, files) = match file_post(&content, state) {
        Some(file) => file,
        None => match content.get("body").and_then(Value::as_str) {
            Some(body) => (body.to_owned(), vec![]),
            None => (content.to_string(), vec![]),
        },
    };
    let reply_to = content["m.relates_to"]["m.in_reply_to"]["event_id"]
        .as_str()
        .map(str::to_owned);
    let post = Post {
        platform: Platform::Matrix,
        target: Target::Room,
        target_id: path.room.clone(),
        content: text,
        reply_to,
        msg_seq: None,
        nonce: Some(path.txn_id.clone()),
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files,
    };
    let dedupe = Dedupe::Window {
        author: format!("{} {}", config.user_id, config.device_id),
        key: format!(
            "/rooms/{}/send/{}/{}",
            path.room, path.event_type, path.txn_id
        ),
        window: TXN_WINDOW,
    };
    let mint = |_| state.mint_event_id();
    let render = |post: &Post| json!({"event_id": post.message_id});
    let accepted = posts.accept(post, dedupe, mint, render);
    // A window dedupe answers a repeat with the earlier answer; it never refuses one.
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(ClientServer.server_error());
    };
    match (&attempt.message_id, attempt.recorded) {
        (Some(event_id), true) => {
            let event = events::message(event_id, &path.event_type, &config.user_id, content);
            state.append(&path.room, event, Origin::Bot, Some(path.txn_id));
        }
        _ => state.count(|s| s.txn_hits += 1),
    }
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// The msgtypes whose `url` is a file in the content repository (spec "m.room.message
/// msgtypes": `m.image`, `m.file`, `m.audio`, `m.video`).
const FILE_MSGTYPES: [&str; 4] = ["m.image", "m.file", "m.audio", "m.video"];

/// A file event's caption and file, as the record keeps them: the caption is `body` when
/// `filename` is set and differs from it, and there is none otherwise (`body` is then the
/// file's name; spec v1.10 "Media captions"). The file is the uploaded content the `url`
/// names, recorded under its `msgtype`; a `url` the repository does not hold (another
/// server's, or none) records no file, as a homeserver posts such an event without looking.
fn file_post(content: &Value, state: &MatrixState) -> Option<(String, Vec<PostedFile>)> {
    let msgtype = content["msgtype"].as_str()?;
    if !FILE_MSGTYPES.contains(&msgtype) {
        return None;
    }
    let body = content["body"].as_str().unwrap_or_default();
    let filename = content["filename"].as_str();
    let caption = match filename {
        Some(name) if name != body => body.to_owned(),
        _ => String::new(),
    };
    let name = filename.or(Some(body).filter(|b| !b.is_empty()));
    let url = content["url"].as_str().unwrap_or_default();
    let files = state.media.posted(url, msgtype, name).into_iter().collect();
    Some((caption, files))
}

/// The homeserver's answers to the send faults: Synapse's 500 `M_UNKNOWN`, a proxy's 503
/// page while the homeserver is down, and 429 `M_LIMIT_EXCEEDED` with both waits, as Synapse
/// sends them (`retry_after_ms`, and `Retry-After` rounded up to whole seconds).
struct ClientServer;

impl Refusals for ClientServer {
    fn server_error(&self) -> Answer {
        errors::error(500, "M_UNKNOWN", "Internal server error")
    }

    fn unavailable(&self) -> Answer {
        errors::proxy_error(503, true)
    }

    fn rate_limited(&self, _: Target, retry_after: Duration) -> (Answer, Option<Duration>) {
        let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
        let secs = ms.div_ceil(1000);
        let answer = errors::limit_exceeded(Some(ms), Some(secs));
        (answer, Some(Duration::from_millis(ms)))
    }
}
