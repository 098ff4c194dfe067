//! What each platform accepts in a send request's body and what it answers, from their public
//! docs: Discord `resources/message.mdx` ("Create Message") and `topics/rate-limits.md`;
//! QQ (tencent-connect/bot-docs) `api-v2/server-inter/message/send-receive/send.md`,
//! `post_messages.md`, `dms/post_dms_messages.md` and `api-v2/openapi/error/error.md`.
//! The mock speaks text: rich fields are accepted as making a message non-empty but not kept.

use serde_json::{json, Map, Value};

use super::feishu::send;
use super::post::{Platform, Post, Target};
use super::reply::Answer;

/// Discord: "Message contents (up to 2000 characters)".
pub(super) const DISCORD_MAX_CONTENT: usize = 2000;
/// Discord: a nonce "up to 25 characters".
const DISCORD_MAX_NONCE: usize = 25;
/// QQ's channel messages carry a guild; the mock has one.
const QQ_GUILD_ID: &str = "mock-guild";

/// A send request the platform would process.
pub(super) struct Request {
    pub(crate) content: String,
    pub(crate) reply_to: Option<String>,
    pub(crate) msg_seq: Option<u64>,
    /// The nonce as sent (string or integer), echoed in the answer.
    pub(crate) nonce: Option<Value>,
    pub(crate) enforce_nonce: bool,
    /// What only a Feishu request carries.
    pub(crate) feishu: Option<send::Extra>,
}

impl Request {
    /// The nonce as a dedupe key: integers in their decimal form.
    pub(crate) fn nonce_key(&self) -> Option<String> {
        self.nonce.as_ref().map(|nonce| match nonce {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }
}

/// Discord's JSON error: `{"code", "message"}`, with `errors` for a form error.
pub(super) fn discord_error(status: u16, code: u64, message: &str) -> Answer {
    Answer::new(status, json!({"code": code, "message": message}))
}

/// Discord's 50035 "Invalid Form Body" for one field, in its nested `_errors` form.
fn discord_form_error(field: &str, code: &str, message: &str) -> Answer {
    let mut errors = Map::new();
    errors.insert(
        field.to_owned(),
        json!({"_errors": [{"code": code, "message": message}]}),
    );
    Answer::new(
        400,
        json!({"code": 50035, "errors": errors, "message": "Invalid Form Body"}),
    )
}

/// QQ's error body. `err_code` repeats `code` and `trace_id` names the request, as the
/// platform's answers do; the trace id also goes in the `X-Tps-trace-ID` header.
pub(super) fn qq_error(status: u16, code: u64, message: &str) -> Answer {
    let trace_id = format!("{:032x}", fastrand::u128(..));
    let body = json!({"code": code, "err_code": code, "message": message, "trace_id": trace_id});
    let mut answer = Answer::new(status, body);
    answer.headers.push(("X-Tps-trace-ID", trace_id));
    answer
}

/// Create Message's JSON params. At least one of content, embeds, sticker_ids, components,
/// files or poll; content at most 2000 characters; a nonce at most 25.
pub(super) fn discord_request(body: &[u8]) -> Result<Request, Answer> {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return Err(discord_error(
            400,
            50109,
            "The request body contains invalid JSON.",
        ));
    };
    let content = match body.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(_) => {
            return Err(discord_form_error(
                "content",
                "BASE_TYPE_STRING",
                "Must be a string.",
            ))
        }
    };
    if content.chars().count() > DISCORD_MAX_CONTENT {
        return Err(discord_form_error(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        ));
    }
    let other = ["embeds", "sticker_ids", "components", "poll", "attachments"];
    let has_other = other
        .iter()
        .any(|key| body.get(*key).is_some_and(|v| !v.is_null()));
    if content.is_empty() && !has_other {
        return Err(discord_error(400, 50006, "Cannot send an empty message"));
    }
    let nonce = match body.get("nonce") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.chars().count() > DISCORD_MAX_NONCE => {
            return Err(discord_form_error(
                "nonce",
                "BASE_TYPE_MAX_LENGTH",
                "Must be 25 or fewer in length.",
            ))
        }
        Some(nonce @ Value::String(_)) => Some(nonce.clone()),
        Some(nonce @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(nonce.clone()),
        Some(_) => {
            return Err(discord_form_error(
                "nonce",
                "NONCE_TYPE_INVALID",
                "Nonce must be an integer or string.",
            ))
        }
    };
    let enforce_nonce = match body.get("enforce_nonce") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            return Err(discord_form_error(
                "enforce_nonce",
                "BASE_TYPE_BOOLEAN",
                "Must be either true or false.",
            ))
        }
    };
    let reply_to = body
        .get("message_reference")
        .and_then(|reference| reference.get("message_id"))
        .and_then(|id| match id {
            Value::String(text) => Some(text.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
    Ok(Request {
        content,
        reply_to,
        msg_seq: None,
        nonce,
        enforce_nonce,
        feishu: None,
    })
}

/// QQ's send params. Group and C2C (`/v2/...`) need an integer `msg_type`; a group message
/// needs `content`, and a text one (`msg_type` 0) anywhere needs it non-empty. Channel and DM
/// messages need one of content, embed, ark, image or markdown. `msg_seq` is an integer.
pub(super) fn qq_request(target: Target, body: &[u8]) -> Result<Request, Answer> {
    let invalid = || qq_error(400, 12002, "request invalid");
    let empty = || qq_error(400, 50006, "message is empty");
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return Err(invalid());
    };
    let content = match body.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid()),
    };
    let text_empty = content.as_deref().is_none_or(str::is_empty);
    match target {
        Target::Group | Target::User => {
            let msg_type = body.get("msg_type").and_then(Value::as_u64);
            let Some(msg_type) = msg_type else {
                return Err(invalid());
            };
            if target == Target::Group && content.is_none() {
                return Err(empty());
            }
            if msg_type == 0 && text_empty {
                return Err(empty());
            }
        }
        Target::ChatId | Target::OpenId | Target::Reply | Target::Chat | Target::Peer => {
            return Err(invalid())
        }
        Target::Channel | Target::Dm => {
            let other = ["embed", "ark", "image", "markdown"];
            let has_other = other
                .iter()
                .any(|key| body.get(*key).is_some_and(|v| !v.is_null()));
            if text_empty && !has_other {
                return Err(empty());
            }
        }
    }
    let reply_to = match body.get("msg_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if id.is_empty() => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => return Err(invalid()),
    };
    let msg_seq = match body.get("msg_seq") {
        None | Some(Value::Null) => None,
        Some(seq) => Some(seq.as_u64().ok_or_else(invalid)?),
    };
    Ok(Request {
        content: content.unwrap_or_default(),
        reply_to,
        msg_seq,
        nonce: None,
        enforce_nonce: false,
        feishu: None,
    })
}

/// Discord answers Create Message with the message object.
pub(super) fn discord_message(post: &Post, nonce: Option<&Value>) -> Value {
    let mut message = json!({
        "id": post.message_id,
        "type": if post.reply_to.is_some() { 19 } else { 0 },
        "channel_id": post.target_id,
        "author": {"id": "mock-bot", "username": "mock", "discriminator": "0", "avatar": null, "bot": true},
        "content": post.content,
        "timestamp": timestamp(post.received_unix_ms, 0),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "flags": 0,
    });
    if let Some(nonce) = nonce {
        message["nonce"] = nonce.clone();
    }
    if let Some(reply_to) = &post.reply_to {
        message["message_reference"] =
            json!({"type": 0, "message_id": reply_to, "channel_id": post.target_id});
    }
    message
}

/// QQ answers a group or C2C send with `{id, timestamp}` (an integer, per the v2 docs) and a
/// channel or DM send with the Message object (an ISO 8601 timestamp in Beijing time).
pub(super) fn qq_message(post: &Post) -> Value {
    match post.target {
        Target::Group
        | Target::User
        | Target::ChatId
        | Target::OpenId
        | Target::Reply
        | Target::Chat
        | Target::Peer => json!({
            "id": post.message_id,
            "timestamp": post.received_unix_ms / 1000,
        }),
        Target::Channel | Target::Dm => {
            let (channel_id, guild_id) = match post.target {
                Target::Dm => (post.target_id.as_str(), post.target_id.as_str()),
                _ => (post.target_id.as_str(), QQ_GUILD_ID),
            };
            json!({
                "id": post.message_id,
                "channel_id": channel_id,
                "guild_id": guild_id,
                "content": post.content,
                "timestamp": timestamp(post.received_unix_ms, 8),
                "tts": false,
                "mention_everyone": false,
                "author": {"id": "mock-bot", "username": "mock", "avatar": "", "bot": true},
                "pinned": false,
                "type": 0,
                "flags": 0,
            })
        }
    }
}

/// The answer for a post's platform.
pub(super) fn message(post: &Post, nonce: Option<&Value>, feishu: Option<&send::Extra>) -> Value {
    match (post.platform, feishu) {
        (Platform::Discord | Platform::Telegram | Platform::Weixin, _) => {
            discord_message(post, nonce)
        }
        (Platform::Feishu, Some(extra)) => send::message(post, extra),
        (Platform::Qq | Platform::Feishu, _) => qq_message(post),
    }
}

/// RFC 3339 at the given UTC offset in hours; an unrepresentable time falls back to the epoch.
fn timestamp(unix_ms: u64, offset_hours: i32) -> String {
    let utc = i64::try_from(unix_ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default();
    match chrono::FixedOffset::east_opt(offset_hours * 3600) {
        Some(offset) => utc
            .with_timezone(&offset)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
        None => utc.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }
}
