//! What Discord accepts in a Create Message body and what it answers, from its public docs:
//! `resources/message.mdx` ("Create Message") and `topics/rate-limits.md`. The mock speaks
//! text: rich fields are accepted as making a message non-empty but not kept.

use serde_json::{json, Map, Value};

use super::super::post::{rfc3339, Post};
use super::super::reply::Answer;
use super::upload::Upload;

/// "Message contents (up to 2000 characters)".
const MAX_CONTENT: usize = 2000;
/// A nonce "up to 25 characters".
const MAX_NONCE: usize = 25;

/// A Create Message request Discord would process.
pub(crate) struct Request {
    pub(crate) content: String,
    /// `message_reference.message_id`.
    pub(crate) reply_to: Option<String>,
    /// The nonce as sent (string or integer), echoed in the answer.
    pub(crate) nonce: Option<Value>,
    pub(crate) enforce_nonce: bool,
    /// The `files[n]` of a `multipart/form-data` request.
    pub(crate) uploads: Vec<Upload>,
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
pub(crate) fn discord_error(status: u16, code: u64, message: &str) -> Answer {
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

/// JSON error 50109, for a body (or a `payload_json`) that is not a JSON object.
pub(crate) fn invalid_json() -> Answer {
    discord_error(400, 50109, "The request body contains invalid JSON.")
}

/// A Create Message request with a JSON body.
pub(crate) fn discord_request(body: &[u8]) -> Result<Request, Answer> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(body)) => request_from(body, Vec::new()),
        _ => Err(invalid_json()),
    }
}

/// Create Message's JSON params and the files uploaded with them. At least one of content,
/// embeds, sticker_ids, components, files or poll; content at most 2000 characters; a nonce
/// at most 25.
pub(crate) fn request_from(
    body: Map<String, Value>,
    uploads: Vec<Upload>,
) -> Result<Request, Answer> {
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
    if content.chars().count() > MAX_CONTENT {
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
    if content.is_empty() && !has_other && uploads.is_empty() {
        return Err(discord_error(400, 50006, "Cannot send an empty message"));
    }
    let nonce = match body.get("nonce") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.chars().count() > MAX_NONCE => {
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
        nonce,
        enforce_nonce,
        uploads,
    })
}

/// Discord answers Create Message with the message object; `attachments` are its uploaded
/// files as Attachment objects.
pub(crate) fn discord_message(
    post: &Post,
    nonce: Option<&Value>,
    attachments: Vec<Value>,
) -> Value {
    let mut message = json!({
        "id": post.message_id,
        "type": if post.reply_to.is_some() { 19 } else { 0 },
        "channel_id": post.target_id,
        "author": {"id": "mock-bot", "username": "mock", "discriminator": "0", "avatar": null, "bot": true},
        "content": post.content,
        "timestamp": rfc3339(post.received_unix_ms, 0),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": attachments,
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
