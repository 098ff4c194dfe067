//! Feishu's message-send endpoints: which paths they are, who may call them, and how the
//! platform answers the send faults; the checks of a request's body are `body.rs`, the faults
//! and the record the shared pipeline's ([`send_attempt`](super::super::send_attempt)).
//!
//! From the docs: "发送消息" (`POST /open-apis/im/v1/messages?receive_id_type=…`), "回复消息"
//! (`POST /open-apis/im/v1/messages/:message_id/reply`), the `uuid` dedupe ("持有相同 uuid 的请求
//! 1 小时内至多成功发送一条消息"), the gateway's frequency limit (HTTP 429, code 99991400,
//! `x-ogw-ratelimit-limit` / `x-ogw-ratelimit-reset`) and the token errors 99991661 (missing)
//! and 99991663 (invalid).

use std::time::Duration;

use super::super::http::RequestHead;
use super::super::post::{Platform, Post, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::body::{self, error};
use super::state::FeishuState;
use super::uploads;

/// The send endpoint a request targets: a create (by `receive_id_type`; the id is in the
/// body) or a reply (the message id in the path).
pub(crate) fn endpoint(head: &RequestHead) -> Option<(Target, String)> {
    if head.method != "POST" {
        return None;
    }
    let parts: Vec<&str> = head.path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["open-apis", "im", "v1", "messages"] => {
            let target = match head.query_param("receive_id_type").as_deref() {
                Some("open_id") => Target::OpenId,
                _ => Target::ChatId,
            };
            Some((target, String::new()))
        }
        ["open-apis", "im", "v1", "messages", id, "reply"] if !id.is_empty() => {
            Some((Target::Reply, (*id).to_owned()))
        }
        _ => None,
    }
}

pub(crate) fn handle(
    state: &FeishuState,
    posts: &PostRecord,
    target: Target,
    target_id: String,
    head: &RequestHead,
    body: &[u8],
) -> Reply {
    attempted(posts, Platform::Feishu, target, target_id, |attempt| {
        process(state, posts, head, body, attempt)
    })
}

fn process(
    state: &FeishuState,
    posts: &PostRecord,
    head: &RequestHead,
    body: &[u8],
    attempt: &mut SendAttempt,
) -> Reply {
    let auth = head.header("authorization").unwrap_or_default();
    if !authorized(auth, state) {
        return Reply::Answer(unauthorized(auth));
    }
    if let Some(refused) = struck_before(posts, attempt, &OpenApi) {
        return refused;
    }
    let request = body::request(attempt.target, &attempt.target_id, head, body, state);
    let request = match request {
        Ok(request) => request,
        Err(answer) => return Reply::Answer(answer),
    };
    if let Some(receive_id) = &request.extra.receive_id {
        attempt.target_id = receive_id.clone();
    }
    let extra = request.extra;
    // An image, file or audio message posts the upload it names.
    let files = match uploads::attached(&extra.msg_type, &extra.raw_content, state) {
        Ok(files) => files,
        Err(refused) => return Reply::Answer(refused),
    };
    // Feishu answers a repeated `uuid` within its window with the first message, per app.
    let config = &state.config;
    let dedupe = match &request.uuid {
        Some(uuid) => Dedupe::Window {
            author: config.app_id.clone(),
            key: uuid.clone(),
            window: config.uuid_window,
        },
        None => Dedupe::None,
    };
    let post = Post {
        platform: Platform::Feishu,
        target: attempt.target,
        target_id: attempt.target_id.clone(),
        nonce: request.uuid,
        content: request.content,
        reply_to: request.reply_to,
        msg_seq: None,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files,
    };
    // Feishu's ids are `om_` and 32 hex digits.
    let mint = |n| format!("om_{n:032x}");
    let accepted = posts.accept(post, dedupe, mint, |post| body::message(post, &extra));
    // A `uuid` repeat is answered with the first message; nothing is refused outright.
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(OpenApi.server_error());
    };
    // A message the platform made is one a reply may target.
    if let Some(message_id) = attempt.message_id.as_ref().filter(|_| attempt.recorded) {
        state.remember_message(message_id, &extra.chat_id);
    }
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// `Authorization: Bearer <tenant_access_token>` the token endpoint issued and still honours.
pub(crate) fn authorized(auth: &str, state: &FeishuState) -> bool {
    auth.strip_prefix("Bearer ").is_some_and(|token| {
        state
            .tokens
            .honoured(token.trim(), std::time::Instant::now())
    })
}

/// 99991661 when no token came, 99991663 when it is not one the platform honours.
pub(crate) fn unauthorized(auth: &str) -> Answer {
    if auth.trim().is_empty() {
        error(
            400,
            99991661,
            "Missing access token for authorization. Please make a request with token attached.",
        )
    } else {
        error(
            400,
            99991663,
            "Invalid access token for authorization. Please make a request with token attached.",
        )
    }
}

/// Feishu's answers to the send faults. Its 429 is the gateway's frequency limit: 99991400,
/// and the wait in `x-ogw-ratelimit-reset` (whole seconds, rounded up).
struct OpenApi;

impl Refusals for OpenApi {
    fn server_error(&self) -> Answer {
        error(500, 1500, "internal error")
    }

    fn unavailable(&self) -> Answer {
        error(503, 1500, "service unavailable")
    }

    fn rate_limited(&self, _: Target, retry_after: Duration) -> (Answer, Option<Duration>) {
        let mut answer = error(429, 99991400, "request trigger frequency limit");
        answer.headers = vec![
            ("x-ogw-ratelimit-limit", "50".to_owned()),
            (
                "x-ogw-ratelimit-reset",
                retry_after.as_secs_f64().ceil().to_string(),
            ),
        ];
        (answer, Some(retry_after))
    }
}
