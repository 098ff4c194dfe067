//! QQ's four send endpoints (group, C2C, channel, DM), as the platform checks a request:
//! authorisation, the body, a media message's `file_info` (`files.rs`), the passive-reply
//! dedupe; then the shared pipeline's faults and record
//! ([`send_attempt`](super::super::send_attempt)). A media message is recorded with the
//! uploaded file as the post's file and its `content` as sent (a space, for no caption).
//!
//! QQ's channel endpoint and Discord's Create Message share a path
//! (`/channels/{id}/messages`); the authorisation scheme (`QQBot` or `Bot`) tells them apart,
//! as it would tell the two hosts' clients apart if they had pointed at one server. A channel
//! request is QQ's only with `QQBot`.

use std::time::Duration;

use super::super::http::RequestHead;
use super::super::opcode_gateway::state::Gateway;
use super::super::post::{Platform, Post, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::body::{self, qq_error, Request};
use super::files::Files;

/// The send endpoint a request targets, if any: (target kind, target id).
pub(crate) fn endpoint(head: &RequestHead) -> Option<(Target, String)> {
    if head.method != "POST" {
        return None;
    }
    let qq_auth = head
        .header("authorization")
        .is_some_and(|auth| auth.starts_with("QQBot "));
    let parts: Vec<&str> = head.path.trim_start_matches('/').split('/').collect();
    let (target, id) = match parts.as_slice() {
        ["v2", "groups", id, "messages"] => (Target::Group, *id),
        ["v2", "users", id, "messages"] => (Target::User, *id),
        ["channels", id, "messages"] if qq_auth => (Target::Channel, *id),
        ["dms", id, "messages"] => (Target::Dm, *id),
        _ => return None,
    };
    (!id.is_empty()).then(|| (target, id.to_owned()))
}

/// What a send reads of the QQ side: the access tokens, the post record, the uploads.
pub(crate) struct Sides<'a> {
    pub(crate) gateway: &'a Gateway,
    pub(crate) posts: &'a PostRecord,
    pub(crate) files: &'a Files,
}

pub(crate) fn handle(
    sides: &Sides<'_>,
    target: Target,
    target_id: String,
    head: &RequestHead,
    body: &[u8],
) -> Reply {
    attempted(sides.posts, Platform::Qq, target, target_id, |attempt| {
        process(sides, head, body, attempt)
    })
}

fn process(sides: &Sides<'_>, head: &RequestHead, body: &[u8], attempt: &mut SendAttempt) -> Reply {
    let posts = sides.posts;
    // QQ: `QQBot <access token>` the token endpoint issued and still honours.
    let auth = head.header("authorization").unwrap_or_default();
    if !(auth.starts_with("QQBot ") && sides.gateway.token_accepted(auth)) {
        return Reply::Answer(qq_error(401, 11244, "token not exist or expire"));
    }
    if let Some(refused) = struck_before(posts, attempt, &OpenApi) {
        return refused;
    }
    let request = match body::qq_request(attempt.target, body) {
        Ok(request) => request,
        Err(answer) => return Reply::Answer(answer),
    };
    // A media message posts the upload its `file_info` names, which must be the mock's,
    // current, and for this kind of chat; the docs' code for media QQ could not fetch.
    let files = match &request.file_info {
        None => vec![],
        Some(info) => match sides.files.posted(info, attempt.target) {
            Some(file) => vec![file],
            None => return Reply::Answer(qq_error(400, 304082, "upload media info fail")),
        },
    };
    let dedupe = dedupe(attempt.target, &request);
    let post = Post {
        platform: Platform::Qq,
        target: attempt.target,
        target_id: attempt.target_id.clone(),
        nonce: None,
        content: request.content,
        reply_to: request.reply_to,
        msg_seq: request.msg_seq,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files,
    };
    // QQ's ids are opaque strings.
    let mint = |n| format!("ROBOT1.0_mock{n:012}");
    let accepted = posts.accept(post, dedupe, mint, body::qq_message);
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(qq_error(400, 40054005, "消息被去重，请检查请求msgseq"));
    };
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// QQ refuses a second passive reply with the same `msg_id` + `msg_seq` (a missing `msg_seq`
/// counts as 1). It documents `msg_seq` only for group and C2C, and active messages (no
/// `msg_id`) not at all.
fn dedupe(target: Target, request: &Request) -> Dedupe {
    match (&request.reply_to, target) {
        (Some(msg_id), Target::Group | Target::User) => Dedupe::Once {
            key: msg_id.clone(),
            seq: request.msg_seq.unwrap_or(1),
        },
        _ => Dedupe::None,
    }
}

/// QQ's answers to the send faults, in its error body. Its 429 carries the send-rate code
/// (22009 "msg limit exceed" for group and C2C, 20028 for a channel) and no wait, which it
/// does not document.
struct OpenApi;

impl Refusals for OpenApi {
    fn server_error(&self) -> Answer {
        qq_error(500, 500, "internal error")
    }

    fn unavailable(&self) -> Answer {
        qq_error(503, 503, "service unavailable")
    }

    fn rate_limited(&self, target: Target, _: Duration) -> (Answer, Option<Duration>) {
        let answer = match target {
            Target::Channel => qq_error(429, 20028, "channel hit write rate limit"),
            _ => qq_error(429, 22009, "msg limit exceed"),
        };
        (answer, None)
    }
}
