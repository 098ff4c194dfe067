//! The platforms' message-send endpoints: QQ's four (group, C2C, channel, DM) and Discord's
//! Create Message. Each request is checked as the platform checks it (authorisation, body,
//! deduplication), meets whatever send fault is armed, and is logged as an attempt; accepted
//! ones are recorded as posts.
//!
//! QQ's channel endpoint and Discord's share a path (`/channels/{id}/messages`); the
//! authorisation scheme (`QQBot` or `Bot`) tells them apart, as it would tell the two hosts'
//! clients apart if they had pointed at one server. Feishu's create and reply endpoints
//! (`feishu/send.rs`) go through the same checks, faults and record.

use std::time::Duration;

use serde_json::json;

use super::fault::SendFault;
use super::feishu::send;
use super::http::RequestHead;
use super::message_body::{self, discord_error, qq_error, Request};
use super::post::{unix_ms_now, Platform, Post, SendAttempt, Target};
use super::post_record::{Acceptance, Dedupe};
use super::reply::{Answer, Reply};
use super::send_attempt::attempted;
use super::state::Shared;

/// The send endpoint a request targets, if any: (target kind, target id). A Feishu create
/// names its target in the body, so its id here is empty.
pub(super) fn endpoint(head: &RequestHead) -> Option<(Target, String)> {
    if head.method != "POST" {
        return None;
    }
    if let Some(feishu) = send::endpoint(head) {
        return Some(feishu);
    }
    let parts: Vec<&str> = head.path.trim_start_matches('/').split('/').collect();
    let (target, id) = match parts.as_slice() {
        ["v2", "groups", id, "messages"] => (Target::Group, *id),
        ["v2", "users", id, "messages"] => (Target::User, *id),
        ["channels", id, "messages"] => (Target::Channel, *id),
        ["dms", id, "messages"] => (Target::Dm, *id),
        _ => return None,
    };
    (!id.is_empty()).then(|| (target, id.to_owned()))
}

pub(super) fn handle(
    target: Target,
    target_id: String,
    head: &RequestHead,
    body: &[u8],
    shared: &Shared,
) -> Reply {
    let auth = head.header("authorization").unwrap_or_default();
    let platform = match target {
        Target::Channel if !auth.starts_with("QQBot ") => Platform::Discord,
        Target::ChatId | Target::OpenId | Target::Reply => Platform::Feishu,
        _ => Platform::Qq,
    };
    attempted(&shared.posts, platform, target, target_id, |attempt| {
        process(auth, head, body, shared, attempt)
    })
}

fn process(
    auth: &str,
    head: &RequestHead,
    body: &[u8],
    shared: &Shared,
    attempt: &mut SendAttempt,
) -> Reply {
    let platform = attempt.platform;
    if !authorized(platform, auth, shared) {
        return Reply::Answer(unauthorized(platform, auth));
    }
    if let Some(fault) = shared.posts.strike_before(platform) {
        attempt.fault = Some(fault.name());
        match fault {
            SendFault::ServerError(_) => return Reply::Answer(server_error(platform)),
            SendFault::RateLimited { retry_after, .. } => {
                attempt.retry_after = (platform != Platform::Qq).then_some(retry_after);
                return Reply::Answer(rate_limited(platform, attempt.target, retry_after));
            }
            SendFault::Hang(_) => return Reply::Hang,
            SendFault::Down(_) => return Reply::Answer(unavailable(platform)),
            // Never struck before processing.
            SendFault::ResetAfterProcessing(_) | SendFault::HangAfterProcessing(_) => {}
        }
    }
    let request = match platform {
        Platform::Discord => message_body::discord_request(body),
        Platform::Qq => message_body::qq_request(attempt.target, body),
        Platform::Feishu => send::request(attempt.target, &attempt.target_id, head, body, shared),
        // Their send endpoints are served by their own modules, never routed here.
        Platform::Telegram | Platform::Weixin => Err(Answer::new(404, json!({}))),
    };
    let request = match request {
        Ok(request) => request,
        Err(answer) => return Reply::Answer(answer),
    };
    if let Some(receive_id) = request.feishu.as_ref().and_then(|f| f.receive_id.clone()) {
        attempt.target_id = receive_id;
    }
    let dedupe = dedupe(platform, attempt.target, auth, &request, shared);
    let post = Post {
        platform,
        target: attempt.target,
        target_id: attempt.target_id.clone(),
        nonce: request.nonce_key(),
        content: request.content,
        reply_to: request.reply_to,
        msg_seq: request.msg_seq,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
    };
    let nonce = request.nonce;
    let feishu = request.feishu;
    let render = |post: &Post| message_body::message(post, nonce.as_ref(), feishu.as_ref());
    let unix_ms = post.received_unix_ms;
    let mint = |n| message_id(platform, n, unix_ms);
    let answer = match shared.posts.accept(post, dedupe, mint, render) {
        Acceptance::Created { message_id, answer } => {
            if let Some(feishu) = &feishu {
                shared.feishu.remember_message(&message_id, &feishu.chat_id);
            }
            attempt.recorded = true;
            attempt.message_id = Some(message_id);
            answer
        }
        Acceptance::Earlier { message_id, answer } => {
            attempt.message_id = Some(message_id);
            answer
        }
        Acceptance::Duplicate => {
            return Reply::Answer(qq_error(400, 40054005, "消息被去重，请检查请求msgseq"));
        }
    };
    if let Some(fault) = shared.posts.strike_after(platform) {
        attempt.fault = Some(fault.name());
        return match fault {
            SendFault::ResetAfterProcessing(_) => Reply::Reset,
            _ => Reply::Hang,
        };
    }
    Reply::Answer(Answer::new(200, answer))
}

/// Discord remembers an enforced nonce per author (the bot token here); QQ refuses a second
/// passive reply with the same `msg_id` + `msg_seq` (a missing `msg_seq` counts as 1). QQ
/// documents `msg_seq` only for group and C2C, and active messages (no `msg_id`) not at all.
/// Feishu answers a repeated `uuid` within its window with the first message, per app.
fn dedupe(
    platform: Platform,
    target: Target,
    auth: &str,
    request: &Request,
    shared: &Shared,
) -> Dedupe {
    match platform {
        Platform::Discord => match request.nonce_key() {
            Some(nonce) if request.enforce_nonce => Dedupe::Window {
                author: auth.to_owned(),
                key: nonce,
                window: shared.config.nonce_window,
            },
            _ => Dedupe::None,
        },
        Platform::Feishu => match request.nonce_key() {
            Some(uuid) => Dedupe::Window {
                author: shared.config.feishu.app_id.clone(),
                key: uuid,
                window: shared.config.feishu.uuid_window,
            },
            None => Dedupe::None,
        },
        Platform::Telegram | Platform::Weixin => Dedupe::None,
        Platform::Qq => match (&request.reply_to, target) {
            (Some(msg_id), Target::Group | Target::User) => Dedupe::Once {
                key: msg_id.clone(),
                seq: request.msg_seq.unwrap_or(1),
            },
            _ => Dedupe::None,
        },
    }
}

/// QQ: `QQBot <access token>` the token endpoint issued and still honours. Discord:
/// `Bot <token>`, checked against `expected_token` when the test set one. Feishu: `Bearer
/// <tenant_access_token>` its token endpoint issued and still honours.
fn authorized(platform: Platform, auth: &str, shared: &Shared) -> bool {
    match platform {
        Platform::Feishu => send::authorized(auth, shared),
        Platform::Telegram | Platform::Weixin => false,
        Platform::Qq => auth.starts_with("QQBot ") && shared.gateway.token_accepted(auth),
        Platform::Discord => auth
            .strip_prefix("Bot ")
            .is_some_and(|token| !token.trim().is_empty() && shared.gateway.token_accepted(token)),
    }
}

fn unauthorized(platform: Platform, auth: &str) -> Answer {
    match platform {
        Platform::Feishu => send::unauthorized(auth),
        Platform::Discord | Platform::Telegram | Platform::Weixin => {
            discord_error(401, 0, "401: Unauthorized")
        }
        Platform::Qq => qq_error(401, 11244, "token not exist or expire"),
    }
}

fn server_error(platform: Platform) -> Answer {
    match platform {
        Platform::Discord | Platform::Telegram | Platform::Weixin => {
            discord_error(500, 0, "500: Internal Server Error")
        }
        Platform::Qq => qq_error(500, 500, "internal error"),
        Platform::Feishu => send::server_error(),
    }
}

fn unavailable(platform: Platform) -> Answer {
    match platform {
        Platform::Discord | Platform::Telegram | Platform::Weixin => {
            discord_error(503, 0, "503: Service Unavailable")
        }
        Platform::Qq => qq_error(503, 503, "service unavailable"),
        Platform::Feishu => send::unavailable(),
    }
}

/// Discord: the documented 429 body and headers (`Retry-After` in whole seconds, rounded up;
/// `X-RateLimit-*` with decimals). QQ: HTTP 429 with its send-rate code (22009 "msg limit
/// exceed" for group and C2C, 20028 for a channel) and no wait, which it does not document.
fn rate_limited(platform: Platform, target: Target, retry_after: Duration) -> Answer {
    match platform {
        Platform::Discord | Platform::Telegram | Platform::Weixin => {
            let secs = retry_after.as_secs_f64();
            let reset = unix_ms_now() as f64 / 1000.0 + secs;
            let body = json!({"message": "You are being rate limited.", "retry_after": secs, "global": false});
            let mut answer = Answer::new(429, body);
            answer.headers = vec![
                ("Retry-After", retry_after.as_secs_f64().ceil().to_string()),
                ("X-RateLimit-Limit", "5".to_owned()),
                ("X-RateLimit-Remaining", "0".to_owned()),
                ("X-RateLimit-Reset", format!("{reset:.3}")),
                ("X-RateLimit-Reset-After", format!("{secs:.3}")),
                ("X-RateLimit-Bucket", "mock-create-message".to_owned()),
                ("X-RateLimit-Scope", "user".to_owned()),
            ];
            answer
        }
        Platform::Feishu => send::rate_limited(retry_after),
        Platform::Qq => match target {
            Target::Channel => qq_error(429, 20028, "channel hit write rate limit"),
            _ => qq_error(429, 22009, "msg limit exceed"),
        },
    }
}

/// Discord's snowflake epoch (2015-01-01T00:00:00Z) in Unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Discord ids are snowflakes (milliseconds since its epoch above 22 bits of sequence), so a
/// client that reads the time out of an id gets the time of the post. QQ's are opaque strings;
/// Feishu's are `om_` and 32 hex digits.
fn message_id(platform: Platform, n: u64, unix_ms: u64) -> String {
    match platform {
        Platform::Discord => {
            let ms = unix_ms.saturating_sub(DISCORD_EPOCH_MS);
            ((ms << 22) | (n & 0x3F_FFFF)).to_string()
        }
        Platform::Qq => format!("ROBOT1.0_mock{n:012}"),
        Platform::Feishu => format!("om_{n:032x}"),
        // Served by their own modules, which mint their own ids.
        Platform::Telegram => n.to_string(),
        Platform::Weixin => format!("wx_mock_{n:012}"),
    }
}
