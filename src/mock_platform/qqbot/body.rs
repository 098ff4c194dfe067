//! What QQ accepts in a send request's body and what it answers, from its public docs
//! (tencent-connect/bot-docs): `api-v2/server-inter/message/send-receive/send.md`,
//! `post_messages.md`, `dms/post_dms_messages.md` and `api-v2/openapi/error/error.md`.
//! The mock speaks text and media (`msg_type` 7, `media.file_info`): other rich fields are
//! accepted as making a message non-empty but not kept.

use serde_json::{json, Value};

use super::super::post::{rfc3339, Post, Target};
use super::super::reply::Answer;

/// QQ's channel messages carry a guild; the mock has one.
const QQ_GUILD_ID: &str = "mock-guild";

/// A send request QQ would process.
pub(crate) struct Request {
    pub(crate) content: String,
    /// `msg_id`: the message a passive reply answers.
    pub(crate) reply_to: Option<String>,
    pub(crate) msg_seq: Option<u64>,
    /// `media.file_info` of a media message (`msg_type` 7).
    pub(crate) file_info: Option<String>,
}

/// QQ's error body. `err_code` repeats `code` and `trace_id` names the request, as the
/// platform's answers do; the trace id also goes in the `X-Tps-trace-ID` header.
pub(crate) fn qq_error(status: u16, code: u64, message: &str) -> Answer {
    let trace_id = format!("{:032x}", fastrand::u128(..));
    let body = json!({"code": code, "err_code": code, "message": message, "trace_id": trace_id});
    let mut answer = Answer::new(status, body);
    answer.headers.push(("X-Tps-trace-ID", trace_id));
    answer
}

/// QQ's send params. Group and C2C (`/v2/...`) need an integer `msg_type`; a group message
/// needs `content`, and a text one (`msg_type` 0) anywhere needs it non-empty. Channel and DM
/// messages need one of content, embed, ark, image or markdown. `msg_seq` is an integer.
pub(crate) fn qq_request(target: Target, body: &[u8]) -> Result<Request, Answer> {
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
    let mut file_info = None;
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
            if msg_type == 7 {
                file_info = Some(media(&body, text_empty)?);
            }
        }
        Target::ChatId
        | Target::OpenId
        | Target::Reply
        | Target::Chat
        | Target::Peer
        | Target::Room => return Err(invalid()),
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
        file_info,
    })
}

/// A media message's `media.file_info`. Its `content` must hold something ("当 msg_type = 7
/// 时，content 字段需要填入一个值，譬如一个空格", send.md), though the docs give no code
/// for the refusal: the mock answers its empty-message one.
fn media(body: &serde_json::Map<String, Value>, text_empty: bool) -> Result<String, Answer> {
    if text_empty {
        return Err(qq_error(400, 50006, "message is empty"));
    }
    match body.get("media").and_then(|m| m.get("file_info")) {
        Some(Value::String(info)) if !info.is_empty() => Ok(info.clone()),
        _ => Err(qq_error(400, 12002, "request invalid")),
    }
}

/// QQ answers a group or C2C send with `{id, timestamp}` (an integer, per the v2 docs) and a
/// channel or DM send with the Message object (an ISO 8601 timestamp in Beijing time).
pub(crate) fn qq_message(post: &Post) -> Value {
    match post.target {
        Target::Group
        | Target::User
        | Target::ChatId
        | Target::OpenId
        | Target::Reply
        | Target::Chat
        | Target::Peer
        | Target::Room => json!({
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
                "timestamp": rfc3339(post.received_unix_ms, 8),
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
