//! The Web API methods a Socket Mode bot calls (docs/research/slack-socket-mode.md §1, §6, §7):
//! `apps.connections.open` with the app-level token, `auth.test` and `chat.postMessage` with
//! the bot token. Every answer is HTTP 200 with `ok`, except a rate limit (429 with
//! `Retry-After` in seconds) and an outage (503).

use std::time::Duration;

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::post::{Platform, Post, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::state::{OpenError, SlackState, Token};

pub(crate) const OPEN_PATH: &str = "/api/apps.connections.open";
pub(crate) const AUTH_TEST_PATH: &str = "/api/auth.test";
pub(crate) const POST_MESSAGE_PATH: &str = "/api/chat.postMessage";

/// Answers the request if it is for one of these methods.
pub(crate) fn route(
    head: &RequestHead,
    body: &[u8],
    state: &SlackState,
    posts: &PostRecord,
) -> Option<Reply> {
    if head.method != "POST" {
        return None;
    }
    let bearer = bearer(head);
    let reply = match head.path.as_str() {
        OPEN_PATH => Reply::Answer(open(bearer, state)),
        AUTH_TEST_PATH => Reply::Answer(auth_test(bearer, state)),
        POST_MESSAGE_PATH => post_message(bearer, body, state, posts),
        _ => return None,
    };
    Some(reply)
}

/// The token in the request's `Authorization` header.
pub(crate) fn bearer(head: &RequestHead) -> Option<&str> {
    head.header("authorization")
        .map(|a| a.strip_prefix("Bearer ").unwrap_or(a).trim())
}

pub(crate) fn not_ok(code: &str) -> Answer {
    Answer::new(200, json!({"ok": false, "error": code}))
}

fn rate_limited(secs: u64) -> Answer {
    let mut answer = Answer::new(429, json!({"ok": false, "error": "ratelimited"}));
    answer.headers.push(("retry-after", secs.to_string()));
    answer
}

fn open(bearer: Option<&str>, state: &SlackState) -> Answer {
    if let Some(code) = state.refuse_token(bearer, Token::App) {
        state.refused_open();
        return not_ok(&code);
    }
    match state.open() {
        Ok(url) => Answer::new(200, json!({"ok": true, "url": url})),
        Err(OpenError::Code(code)) => not_ok(&code),
        Err(OpenError::RateLimited(secs)) => rate_limited(secs),
    }
}

fn auth_test(bearer: Option<&str>, state: &SlackState) -> Answer {
    if let Some(code) = state.refuse_token(bearer, Token::Bot) {
        return not_ok(&code);
    }
    let c = &state.config;
    Answer::new(
        200,
        json!({"ok": true, "url": "https://mock-workspace.slack.com/", "team": "Mock Workspace",
               "user": "mockbot", "team_id": c.team_id, "user_id": c.bot_user_id,
               "bot_id": c.bot_id, "is_enterprise_install": false}),
    )
}

fn post_message(
    bearer: Option<&str>,
    body: &[u8],
    state: &SlackState,
    posts: &PostRecord,
) -> Reply {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let field = |name: &str| request.get(name).and_then(Value::as_str).map(str::to_owned);
    let channel = field("channel").unwrap_or_default();
    attempted(
        posts,
        Platform::Slack,
        Target::Channel,
        channel,
        |attempt| {
            if let Some(code) = state.refuse_token(bearer, Token::Bot) {
                return Reply::Answer(not_ok(&code));
            }
            if let Some(refused) = struck_before(posts, attempt, &WebApi) {
                return refused;
            }
            if !request.is_object() {
                return Reply::Answer(not_ok("invalid_json"));
            }
            process(state, posts, attempt, field("text"), field("thread_ts"))
        },
    )
}

fn process(
    state: &SlackState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
    text: Option<String>,
    thread_ts: Option<String>,
) -> Reply {
    let channel = attempt.target_id.clone();
    if channel.is_empty() || !state.config.channels.contains(&channel) {
        return Reply::Answer(not_ok("channel_not_found"));
    }
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Reply::Answer(not_ok("no_text"));
    };
    let post = Post {
        platform: Platform::Slack,
        target: Target::Channel,
        target_id: channel.clone(),
        content: text.clone(),
        reply_to: thread_ts.clone(),
        msg_seq: None,
        nonce: None,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files: vec![],
    };
    let config = &state.config;
    let ts = state.mint_ts();
    let render = |post: &Post| {
        let mut message = json!({"type": "message", "text": post.content,
            "user": config.bot_user_id, "bot_id": config.bot_id, "ts": post.message_id});
        if let Some(thread) = &post.reply_to {
            message["thread_ts"] = json!(thread);
        }
        json!({"ok": true, "channel": post.target_id, "ts": post.message_id, "message": message})
    };
    // Slack has no idempotency key: every request that gets here is a new message.
    let accepted = posts.accept(post, Dedupe::None, |_| ts, render);
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(not_ok("internal_error"));
    };
    // The bot's own message comes back as an event, with its `bot_id`.
    state.emit(&channel, &text, thread_ts.as_deref(), true);
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// The Web API's answers to the send faults: `internal_error` ("some aspect of the operation
/// [may have] succeeded"), 503 `service_unavailable`, and 429 `ratelimited`.
pub(crate) struct WebApi;

impl Refusals for WebApi {
    fn server_error(&self) -> Answer {
        not_ok("internal_error")
    }

    fn unavailable(&self) -> Answer {
        Answer::new(503, json!({"ok": false, "error": "service_unavailable"}))
    }

    fn rate_limited(&self, _: Target, retry_after: Duration) -> (Answer, Option<Duration>) {
        let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
        (rate_limited(secs), Some(Duration::from_secs(secs)))
    }
}
