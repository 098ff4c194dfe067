//! What Feishu accepts in a create or reply request and what it answers, from the docs:
//! "发送消息" and "回复消息" with their error tables (230001 invalid parameter, 230025 content
//! too long) and the field-validation error 99992402 with `error.field_violations`. Errors
//! come as HTTP 400 with the code in the body unless noted. The mock takes `chat_id` and
//! `open_id` targets only.

use serde_json::{json, Map, Value};

use super::super::http::RequestHead;
use super::super::post::{Post, Target};
use super::super::reply::Answer;
use super::state::FeishuState;

/// "文本消息请求体最大不能超过 150 KB".
const TEXT_MAX: usize = 150 * 1024;
/// "卡片及富文本消息请求体最大不能超过 30 KB".
const RICH_MAX: usize = 30 * 1024;
/// `uuid`: "最大长度：50 字符".
const UUID_MAX: usize = 50;
const MSG_TYPES: [&str; 10] = [
    "text",
    "post",
    "image",
    "file",
    "audio",
    "media",
    "sticker",
    "interactive",
    "share_chat",
    "share_user",
];

/// A create or reply request Feishu would process.
pub(crate) struct Request {
    /// A text message's text, or any other type's `content` as sent.
    pub(crate) content: String,
    /// The message a reply answers.
    pub(crate) reply_to: Option<String>,
    /// The client's dedupe key.
    pub(crate) uuid: Option<String>,
    pub(crate) extra: Extra,
}

/// What only a Feishu request carries, kept for the answer.
pub(crate) struct Extra {
    /// `receive_id` for a create; `None` for a reply (its target is in the path).
    pub(crate) receive_id: Option<String>,
    pub(crate) chat_id: String,
    pub(crate) msg_type: String,
    /// `content` as sent: the JSON string the answer's `body.content` repeats.
    pub(crate) raw_content: String,
    pub(crate) app_id: String,
    pub(crate) tenant_key: String,
}

pub(crate) fn error(status: u16, code: u64, msg: &str) -> Answer {
    Answer::new(status, json!({"code": code, "msg": msg}))
}

fn invalid(detail: &str) -> Answer {
    error(
        400,
        230001,
        &format!("Your request contains an invalid request parameter, {detail}."),
    )
}

fn violation(field: &str, description: &str) -> Answer {
    Answer::new(
        400,
        json!({
            "code": 99992402,
            "msg": "field validation failed",
            "error": {"field_violations": [{"field": field, "description": description}]},
        }),
    )
}

/// A create or reply request as the platform checks it.
pub(crate) fn request(
    target: Target,
    path_id: &str,
    head: &RequestHead,
    body: &[u8],
    state: &FeishuState,
) -> Result<Request, Answer> {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return Err(violation("body", "the request body is not a JSON object"));
    };
    let (receive_id, chat_id, reply_to) = match target {
        Target::Reply => {
            let chat = state
                .chat_of(path_id)
                .ok_or_else(|| invalid("message_id is not a message of this app"))?;
            (None, chat, Some(path_id.to_owned()))
        }
        _ => {
            let id = receiver(target, head, &body)?;
            let chat = match id.strip_prefix("ou_") {
                Some(user) => format!("oc_p2p_{user}"),
                None => id.clone(),
            };
            (Some(id), chat, None)
        }
    };
    let msg_type = string_field(&body, "msg_type")?;
    if !MSG_TYPES.contains(&msg_type.as_str()) {
        return Err(invalid("unknown msg_type"));
    }
    let raw_content = string_field(&body, "content")?;
    let content = content(&msg_type, &raw_content)?;
    let uuid = match body.get("uuid") {
        None | Some(Value::Null) => None,
        Some(Value::String(uuid)) if uuid.chars().count() > UUID_MAX => {
            return Err(violation("uuid", "the max len is 50"))
        }
        Some(Value::String(uuid)) if uuid.is_empty() => None,
        Some(Value::String(uuid)) => Some(uuid.clone()),
        Some(_) => return Err(violation("uuid", "uuid must be a string")),
    };
    let config = &state.config;
    Ok(Request {
        content,
        reply_to,
        uuid,
        extra: Extra {
            receive_id,
            chat_id,
            msg_type,
            raw_content,
            app_id: config.app_id.clone(),
            tenant_key: config.tenant_key.clone(),
        },
    })
}

/// `receive_id_type` from the query and a `receive_id` of that kind from the body.
fn receiver(
    target: Target,
    head: &RequestHead,
    body: &Map<String, Value>,
) -> Result<String, Answer> {
    let kind = head.query_param("receive_id_type");
    match kind.as_deref() {
        None | Some("") => return Err(violation("receive_id_type", "receive_id_type is required")),
        Some("chat_id" | "open_id") => {}
        Some(_) => return Err(violation(
            "receive_id_type",
            "receive_id_type is optional, options: [chat_id,open_id] (the mock takes no others)",
        )),
    }
    let id = string_field(body, "receive_id")?;
    let prefix = if target == Target::OpenId {
        "ou_"
    } else {
        "oc_"
    };
    if !id.starts_with(prefix) || id.len() == prefix.len() {
        return Err(invalid("receive_id does not match receive_id_type"));
    }
    Ok(id)
}

fn string_field(body: &Map<String, Value>, field: &str) -> Result<String, Answer> {
    match body.get(field) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        _ => Err(violation(field, &format!("{field} is required"))),
    }
}

/// What the post records: a text message's text, or any other type's content as sent.
fn content(msg_type: &str, raw: &str) -> Result<String, Answer> {
    let limit = if msg_type == "text" {
        TEXT_MAX
    } else {
        RICH_MAX
    };
    if raw.len() > limit {
        return Err(error(
            400,
            230025,
            "The length of the message content reaches its limit.",
        ));
    }
    let Ok(Value::Object(parsed)) = serde_json::from_str::<Value>(raw) else {
        return Err(invalid("content is not a JSON object"));
    };
    if msg_type != "text" {
        return Ok(raw.to_owned());
    }
    match parsed.get("text") {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        _ => Err(invalid("a text message needs a non-empty content.text")),
    }
}

/// The answer to an accepted create or reply: `{code, msg, data: message}`.
pub(crate) fn message(post: &Post, extra: &Extra) -> Value {
    let ms = post.received_unix_ms.to_string();
    let mut data = json!({
        "message_id": post.message_id,
        "msg_type": extra.msg_type,
        "create_time": ms,
        "update_time": ms,
        "deleted": false,
        "updated": false,
        "chat_id": extra.chat_id,
        "sender": {
            "id": extra.app_id,
            "id_type": "app_id",
            "sender_type": "app",
            "tenant_key": extra.tenant_key,
        },
        "body": {"content": extra.raw_content},
    });
    if let Some(parent) = &post.reply_to {
        data["root_id"] = json!(parent);
        data["parent_id"] = json!(parent);
    }
    json!({"code": 0, "msg": "success", "data": data})
}
