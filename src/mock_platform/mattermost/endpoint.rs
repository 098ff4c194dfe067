//! The REST v4 endpoints a bot calls (api.mattermost.com): `GET /api/v4/users/me`,
//! `GET /api/v4/users/me/channels`, `GET /api/v4/channels/{id}/posts?since=MS` and
//! `POST /api/v4/posts`. Errors are the server's `AppError`: `{"id", "message",
//! "detailed_error", "request_id", "status_code"}`.

use std::time::Duration;

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::post::{Platform, Post, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::state::MattermostState;

pub(crate) const API: &str = "/api/v4/";

pub(crate) fn app_error(status: u16, id: &str, message: &str) -> Answer {
    Answer::new(
        status,
        json!({"id": id, "message": message, "detailed_error": "", "request_id": "mockrequest",
               "status_code": status}),
    )
}

pub(crate) fn unauthorized() -> Answer {
    app_error(
        401,
        "api.context.session_expired.app_error",
        "Invalid or expired session, please login again.",
    )
}

/// The token in the request's `Authorization: Bearer` (or `Token`) header.
pub(crate) fn bearer(head: &RequestHead) -> Option<&str> {
    let a = head.header("authorization")?;
    let a = a
        .strip_prefix("Bearer ")
        .or_else(|| a.strip_prefix("BEARER "))
        .or_else(|| a.strip_prefix("Token "))?;
    Some(a.trim())
}

pub(crate) fn route(
    head: &RequestHead,
    body: &[u8],
    state: &MattermostState,
    posts: &PostRecord,
) -> Option<Reply> {
    let rest = head.path.strip_prefix(API)?;
    let token = bearer(head);
    let answer = match (head.method.as_str(), rest) {
        ("GET", "users/me") => me(token, state),
        ("GET", "users/me/channels") => channels(token, state),
        ("POST", "posts") => return Some(create(token, body, state, posts)),
        ("GET", path) if path.starts_with("files/") => super::files::get(token, state, path),
        ("GET", path) if path.starts_with("channels/") && path.ends_with("/posts") => {
            let channel = path
                .trim_start_matches("channels/")
                .trim_end_matches("/posts");
            let since = head
                .query_param("since")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            since_posts(token, state, channel, since)
        }
        _ => return None,
    };
    Some(Reply::Answer(answer))
}

fn me(token: Option<&str>, state: &MattermostState) -> Answer {
    state.count(|s| s.me_calls += 1);
    if !state.authorised(token) {
        return unauthorized();
    }
    let c = &state.config;
    Answer::new(
        200,
        json!({"id": c.bot_user_id, "username": c.bot_username, "is_bot": true,
        "email": "", "nickname": "", "first_name": "", "last_name": "", "roles": "system_user",
        "locale": "en", "create_at": 0, "update_at": 0, "delete_at": 0}),
    )
}

fn channels(token: Option<&str>, state: &MattermostState) -> Answer {
    state.count(|s| s.channel_lists += 1);
    if !state.authorised(token) {
        return unauthorized();
    }
    let c = &state.config;
    let list: Vec<Value> = c
        .channels
        .iter()
        .map(|ch| {
            json!({"id": ch.id, "type": ch.kind, "name": ch.name, "display_name": ch.name,
                         "team_id": if ch.kind == "D" { "" } else { c.team_id.as_str() },
                         "create_at": 0, "update_at": 0, "delete_at": 0})
        })
        .collect();
    Answer::new(200, json!(list))
}

fn since_posts(token: Option<&str>, state: &MattermostState, channel: &str, since: i64) -> Answer {
    state.count(|s| s.since_calls += 1);
    if !state.authorised(token) {
        return unauthorized();
    }
    if !state.is_member(channel) {
        return app_error(
            403,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    Answer::new(200, state.posts_since(channel, since))
}

fn create(token: Option<&str>, body: &[u8], state: &MattermostState, posts: &PostRecord) -> Reply {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let field = |name: &str| request[name].as_str().unwrap_or("").to_owned();
    let channel = field("channel_id");
    attempted(
        posts,
        Platform::Mattermost,
        Target::Channel,
        channel.clone(),
        |attempt| {
            state.count(|s| s.creates += 1);
            if !state.authorised(token) {
                return Reply::Answer(unauthorized());
            }
            if let Some(refused) = struck_before(posts, attempt, &RestApi) {
                return refused;
            }
            if !request.is_object() {
                return Reply::Answer(app_error(
                    400,
                    "api.context.invalid_body_param.app_error",
                    "Invalid or missing post in request body.",
                ));
            }
            if !state.is_member(&channel) {
                return Reply::Answer(app_error(
                    403,
                    "api.context.permissions.app_error",
                    "You do not have the appropriate permissions.",
                ));
            }
            let (message, root, pending) =
                (field("message"), field("root_id"), field("pending_post_id"));
            let new = state.new_post(
                &channel,
                &state.config.bot_user_id,
                &message,
                &root,
                &pending,
            );
            let record = Post {
                platform: Platform::Mattermost,
                target: Target::Channel,
                target_id: channel.clone(),
                content: message.clone(),
                reply_to: Some(root.clone()).filter(|r| !r.is_empty()),
                msg_seq: None,
                nonce: Some(pending.clone()).filter(|p| !p.is_empty()),
                message_id: String::new(),
                received_at: attempt.received_at,
                received_unix_ms: attempt.received_unix_ms,
                files: vec![],
            };
            // `deduplicateCreatePost`: a pending post id seen within the window answers with the
            // first post; none at all, and every request is a new post.
            let dedupe = if pending.is_empty() {
                Dedupe::None
            } else {
                Dedupe::Window {
                    author: state.config.bot_user_id.clone(),
                    key: pending,
                    window: state.config.pending_post_window,
                }
            };
            let id = new["id"].as_str().unwrap_or("").to_owned();
            let accepted = posts.accept(record, dedupe, |_| id, |_| new.clone());
            let created = matches!(
                accepted,
                super::super::post_record::Acceptance::Created { .. }
            );
            let Some(answer) = settled(accepted, attempt) else {
                return Reply::Answer(app_error(
                    500,
                    "api.post.create_post.app_error",
                    "Unable to save the post.",
                ));
            };
            if created {
                state.publish(&answer);
            } else {
                state.count(|s| s.deduplicated += 1);
            }
            if let Some(withheld) = struck_after(posts, attempt) {
                return withheld;
            }
            Reply::Answer(Answer::new(201, answer))
        },
    )
}

/// REST v4's answers to the send faults: 500 and 503 `AppError`s, and 429 with the
/// `X-Ratelimit-*` headers (`app/ratelimit.go`: `X-Ratelimit-Reset` in seconds).
pub(crate) struct RestApi;

impl Refusals for RestApi {
    fn server_error(&self) -> Answer {
        app_error(
            500,
            "api.post.create_post.app_error",
            "Unable to save the post.",
        )
    }

    fn unavailable(&self) -> Answer {
        app_error(503, "api.server.unavailable", "Service unavailable.")
    }

    fn rate_limited(&self, _: Target, retry_after: Duration) -> (Answer, Option<Duration>) {
        let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let mut answer = app_error(429, "api.context.rate_limited", "Too many requests.");
        answer.headers.push(("x-ratelimit-limit", "10".into()));
        answer.headers.push(("x-ratelimit-remaining", "0".into()));
        answer.headers.push(("x-ratelimit-reset", secs.to_string()));
        (answer, Some(Duration::from_secs(secs)))
    }
}
