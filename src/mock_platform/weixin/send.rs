//! `POST /ilink/bot/sendmessage`: a bot message to a peer, recorded with the other platforms'
//! posts ([`Platform::Weixin`], [`Target::Peer`]).
//!
//! From the sources: the body is `{msg: {from_user_id: "", to_user_id, client_id,
//! message_type: 2, message_state: 2, item_list, context_token?}, base_info}`; success is
//! `{"ret": 0, "errmsg": ""}` (Tencent's protocol doc; hermes-agent reads only `ret` and
//! `errcode`); a reply should echo the peer's latest `context_token`, and on -14 hermes-agent
//! retries once without it, which iLink accepts.
//!
//! The mock's assumptions: a repeated `client_id` within `WeixinConfig.client_id_window`
//! posts nothing new and succeeds again; a `context_token` other than the peer's newest is
//! refused with -14 (a missing one is accepted); only text items are taken, and a text
//! longer than 2000 characters (hermes-agent's `MAX_MESSAGE_LENGTH`) is refused with -1.
//!
//! A media item (2 image, 3 voice, 4 file, 5 video; Tencent's `send.ts`) names a file on the
//! mock's CDN by `media.encrypt_query_param` and its key by `media.aes_key`, which must be
//! base64 of the key's hex (the raw bytes' base64 shows as a grey box on the phones, says
//! hermes-agent): the file is decrypted and recorded as the post's one [`PostedFile`], its
//! field the item's name (`image_item`, ...) and its filename `file_item.file_name`. Each
//! request carries one item (Tencent sends a caption as a text message of its own first).

use std::time::Duration;

use serde_json::Value;

use super::checks::{self, check_post};
use super::state::WeixinState;
use crate::mock_platform::http::RequestHead;
use crate::mock_platform::post::{Platform, Post, PostedFile, SendAttempt, Target};
use crate::mock_platform::post_record::{Dedupe, PostRecord};
use crate::mock_platform::reply::{Answer, Reply};
use crate::mock_platform::send_attempt::{
    attempted, settled, struck_after, struck_before, Refusals,
};

/// The longest text the mock takes, in characters.
pub(crate) const TEXT_MAX: usize = 2000;

/// A send request as the mock reads it.
struct Outgoing {
    text: String,
    file: Option<PostedFile>,
    client_id: Option<String>,
    context_token: Option<String>,
}

pub(crate) fn send_message(
    head: &RequestHead,
    body: &[u8],
    state: &WeixinState,
    posts: &PostRecord,
) -> Reply {
    state.lock().stats.sends += 1;
    let to_user_id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| b.pointer("/msg/to_user_id")?.as_str().map(str::to_owned))
        .unwrap_or_default();
    attempted(
        posts,
        Platform::Weixin,
        Target::Peer,
        to_user_id,
        |attempt| process(head, body, state, posts, attempt),
    )
}

fn process(
    head: &RequestHead,
    body: &[u8],
    state: &WeixinState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
) -> Reply {
    let body = match check_post(head, body, state) {
        Ok(body) => body,
        Err(expired) => return Reply::Answer(expired),
    };
    if let Some(refused) = struck_before(posts, attempt, state) {
        return refused;
    }
    if attempt.target_id.is_empty() {
        return Reply::Answer(checks::invalid("msg.to_user_id is required"));
    }
    let outgoing = match read(&body, state) {
        Ok(outgoing) => outgoing,
        Err(answer) => return Reply::Answer(answer),
    };
    if let Some(given) = &outgoing.context_token {
        let mut inner = state.lock();
        if inner.context_tokens.get(&attempt.target_id) != Some(given) {
            inner.stats.stale_context_tokens += 1;
            inner.stats.expired_answers += 1;
            return Reply::Answer(checks::session_expired());
        }
    }
    let dedupe = match &outgoing.client_id {
        Some(client_id) => Dedupe::Window {
            author: state.config.bot_id.clone(),
            key: client_id.clone(),
            window: state.config.client_id_window,
        },
        None => Dedupe::None,
    };
    let post = Post {
        platform: Platform::Weixin,
        target: Target::Peer,
        target_id: attempt.target_id.clone(),
        content: outgoing.text,
        reply_to: None,
        msg_seq: None,
        nonce: outgoing.client_id,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files: outgoing.file.into_iter().collect(),
    };
    let mint = |n| format!("wx_mock_{n:012}");
    let accepted = posts.accept(post, dedupe, mint, |_| checks::ok());
    // Only a once-only key is refused; a `client_id` repeat is answered as the first was.
    let answer = settled(accepted, attempt).unwrap_or_else(checks::ok);
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// iLink's answers to the send faults, each counted: an HTTP error from the gateway in front
/// of it, or its frequency limit (which tells no wait).
impl Refusals for WeixinState {
    fn server_error(&self) -> Answer {
        self.lock().stats.server_errors += 1;
        checks::http_error(500)
    }

    fn unavailable(&self) -> Answer {
        self.lock().stats.server_errors += 1;
        checks::http_error(502)
    }

    fn rate_limited(&self, _: Target, _: Duration) -> (Answer, Option<Duration>) {
        self.lock().stats.rate_limited += 1;
        (checks::frequency_limit(), None)
    }
}

/// The text or file and the keys of a send; `Err` is the refusal.
fn read(body: &Value, state: &WeixinState) -> Result<Outgoing, Answer> {
    let Some(msg) = body.get("msg").filter(|msg| msg.is_object()) else {
        return Err(checks::invalid("msg is required"));
    };
    let items = msg
        .get("item_list")
        .and_then(Value::as_array)
        .ok_or_else(|| checks::invalid("msg.item_list is required"))?;
    if items.len() != 1 {
        return Err(checks::invalid("msg.item_list must hold exactly one item"));
    }
    let item = &items[0];
    let (text, file) = match item.get("type").and_then(Value::as_i64) {
        Some(1) => (read_text(item)?, None),
        Some(kind @ 2..=5) => (String::new(), Some(read_file(item, kind, state)?)),
        _ => return Err(checks::invalid("an item's type must be 1 to 5")),
    };
    let string = |field: &str| {
        msg.get(field)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    Ok(Outgoing {
        text,
        file,
        client_id: string("client_id"),
        context_token: string("context_token"),
    })
}

fn read_text(item: &Value) -> Result<String, Answer> {
    let text = item
        .pointer("/text_item/text")
        .and_then(Value::as_str)
        .ok_or_else(|| checks::invalid("text_item.text is required"))?;
    if text.trim().is_empty() {
        return Err(checks::invalid("text_item.text is empty"));
    }
    if text.chars().count() > TEXT_MAX {
        return Err(checks::invalid(
            "text_item.text is longer than 2000 characters",
        ));
    }
    Ok(text.to_owned())
}

/// A media item's file, read back from the CDN and decrypted.
fn read_file(item: &Value, kind: i64, state: &WeixinState) -> Result<PostedFile, Answer> {
    let field = match kind {
        2 => "image_item",
        3 => "voice_item",
        4 => "file_item",
        _ => "video_item",
    };
    let body = &item[field];
    let media = &body["media"];
    let string = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    if media["encrypt_type"].as_i64() != Some(1) {
        return Err(checks::invalid("media.encrypt_type must be 1"));
    }
    let plain = state
        .lock()
        .cdn
        .open(
            &string(&media["encrypt_query_param"]),
            &string(&media["aes_key"]),
        )
        .map_err(checks::invalid)?;
    let name = body["file_name"].as_str();
    // An image's `mid_size` and a video's `video_size` are the ciphertext's size (`send.ts`).
    let size_field = match kind {
        2 => Some("mid_size"),
        5 => Some("video_size"),
        _ => None,
    };
    if let Some(field) = size_field {
        let ciphertext = (plain.len() / 16 + 1) * 16;
        if body[field].as_u64() != Some(ciphertext as u64) {
            return Err(checks::invalid(
                "mid_size / video_size must be the ciphertext's size",
            ));
        }
    }
    if kind == 4 {
        let len = body["len"].as_str().and_then(|l| l.parse::<usize>().ok());
        if name.is_none_or(str::is_empty) || len != Some(plain.len()) {
            return Err(checks::invalid(
                "file_item needs file_name and len, the plaintext's size as a string",
            ));
        }
    }
    Ok(PostedFile::of(field, name, None, &plain))
}
