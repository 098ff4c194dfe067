//! Discord's Create Message (`POST /channels/{channel.id}/messages`, DM channels included), as
//! the platform checks a request: authorisation, the body, the nonce; then the shared
//! pipeline's faults and record ([`send_attempt`](super::super::send_attempt)).
//!
//! QQ's channel endpoint shares the path; a request authorised with `QQBot` is QQ's
//! (`qqbot/send.rs`), any other is Discord's.

use std::time::Duration;

use serde_json::json;

use super::super::http::RequestHead;
use super::super::multipart::Form;
use super::super::opcode_gateway::state::Gateway;
use super::super::post::{unix_ms_now, Platform, Post, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::body::{self, discord_error, Request};
use super::upload;
use super::Discord;

/// Discord's snowflake epoch (2015-01-01T00:00:00Z) in Unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// The channel a Create Message request targets, if it is one.
pub(crate) fn endpoint(head: &RequestHead) -> Option<String> {
    if head.method != "POST" {
        return None;
    }
    let qq_auth = head
        .header("authorization")
        .is_some_and(|auth| auth.starts_with("QQBot "));
    let parts: Vec<&str> = head.path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["channels", id, "messages"] if !qq_auth && !id.is_empty() => Some((*id).to_owned()),
        _ => None,
    }
}

/// The channel a Trigger Typing Indicator request (`POST /channels/{channel.id}/typing`)
/// names, if it is one.
pub(crate) fn typing_endpoint(head: &RequestHead) -> Option<String> {
    let parts: Vec<&str> = head.path.trim_start_matches('/').split('/').collect();
    match (head.method.as_str(), parts.as_slice()) {
        ("POST", ["channels", id, "typing"]) if !id.is_empty() => Some((*id).to_owned()),
        _ => None,
    }
}

/// Trigger Typing Indicator (`resources/channel.md`): "Returns a 204 empty response on
/// success", with the bot's authorisation.
pub(crate) fn typing(
    gateway: &Gateway,
    posts: &PostRecord,
    channel: String,
    head: &RequestHead,
) -> Reply {
    if !authorized(gateway, head.header("authorization").unwrap_or_default()) {
        return Reply::Answer(discord_error(401, 0, "401: Unauthorized"));
    }
    posts.typing(Platform::Discord, channel);
    Reply::Answer(Answer::new(204, serde_json::Value::Null))
}

/// A Create Message body: JSON, or a `multipart/form-data` form as read (or why it could not
/// be).
pub(crate) enum Incoming<'a> {
    Json(&'a [u8]),
    Form(Result<Form, String>),
}

pub(crate) fn handle(
    discord: &Discord,
    channel_id: String,
    head: &RequestHead,
    body: Incoming<'_>,
) -> Reply {
    let auth = head.header("authorization").unwrap_or_default();
    let (gateway, posts) = (&discord.gateway, &discord.posts);
    attempted(
        posts,
        Platform::Discord,
        Target::Channel,
        channel_id,
        |attempt| {
            if !authorized(gateway, auth) {
                return Reply::Answer(discord_error(401, 0, "401: Unauthorized"));
            }
            process(discord, auth, body, attempt)
        },
    )
}

/// `Bot <token>`, checked against `expected_token` when the test set one.
fn authorized(gateway: &Gateway, auth: &str) -> bool {
    auth.strip_prefix("Bot ")
        .is_some_and(|token| !token.trim().is_empty() && gateway.token_accepted(token))
}

fn process(discord: &Discord, auth: &str, body: Incoming<'_>, attempt: &mut SendAttempt) -> Reply {
    let posts = &discord.posts;
    if let Some(refused) = struck_before(posts, attempt, &RestApi) {
        return refused;
    }
    let request = match body {
        Incoming::Json(body) => body::discord_request(body),
        Incoming::Form(Ok(form)) => upload::form_request(form),
        Incoming::Form(Err(error)) => {
            tracing::debug!(%error, "mock discord could not read a multipart body");
            // JSON error 0: "General error (such as a malformed request body, ...)".
            Err(discord_error(400, 0, "400: Bad Request"))
        }
    };
    let request = match request {
        Ok(request) => request,
        Err(answer) => return Reply::Answer(answer),
    };
    let dedupe = dedupe(discord.nonce_window, auth, &request);
    let post = Post {
        platform: Platform::Discord,
        target: attempt.target,
        target_id: attempt.target_id.clone(),
        nonce: request.nonce_key(),
        content: request.content,
        reply_to: request.reply_to,
        msg_seq: None,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files: request.uploads.iter().map(|u| u.part.posted()).collect(),
    };
    let unix_ms = post.received_unix_ms;
    let nonce = request.nonce;
    let uploads = request.uploads;
    // Only a message that is created puts its files on the CDN; a nonce hit answers the
    // earlier message, whose files are already there.
    let render = |post: &Post| {
        let attachments = uploads
            .into_iter()
            .map(|upload| discord.attach(&post.target_id, upload))
            .collect();
        body::discord_message(post, nonce.as_ref(), attachments)
    };
    let accepted = posts.accept(post, dedupe, |n| snowflake(n, unix_ms), render);
    // Discord's dedupe only ever answers a repeat with the earlier message.
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(RestApi.server_error());
    };
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// Discord remembers an enforced nonce per author (the bot token here) for a few minutes and
/// answers a repeat with the first message.
fn dedupe(window: Duration, auth: &str, request: &Request) -> Dedupe {
    match request.nonce_key() {
        Some(nonce) if request.enforce_nonce => Dedupe::Window {
            author: auth.to_owned(),
            key: nonce,
            window,
        },
        _ => Dedupe::None,
    }
}

/// Discord ids are snowflakes (milliseconds since its epoch above 22 bits of sequence), so a
/// client that reads the time out of an id gets the time of the post.
fn snowflake(n: u64, unix_ms: u64) -> String {
    let ms = unix_ms.saturating_sub(DISCORD_EPOCH_MS);
    ((ms << 22) | (n & 0x3F_FFFF)).to_string()
}

/// Discord's answers to the send faults. Its 429 is the documented body and headers
/// (`Retry-After` in whole seconds, rounded up; `X-RateLimit-*` with decimals).
struct RestApi;

impl Refusals for RestApi {
    fn server_error(&self) -> Answer {
        discord_error(500, 0, "500: Internal Server Error")
    }

    fn unavailable(&self) -> Answer {
        discord_error(503, 0, "503: Service Unavailable")
    }

    fn rate_limited(&self, _: Target, retry_after: Duration) -> (Answer, Option<Duration>) {
        let secs = retry_after.as_secs_f64();
        let reset = unix_ms_now() as f64 / 1000.0 + secs;
        let body =
            json!({"message": "You are being rate limited.", "retry_after": secs, "global": false});
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
        (answer, Some(retry_after))
    }
}
