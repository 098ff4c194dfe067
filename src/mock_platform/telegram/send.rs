//! `sendMessage` (<https://core.telegram.org/bots/api#sendmessage>) through the telegram send
//! machinery: the armed [`SendFault`](crate::mock_platform::SendFault) in Telegram's shape,
//! the post record and the attempt log. Checked as the server checks it: the text (1-4096
//! characters once leading and trailing whitespace is stripped), then the chat, then the
//! message replied to (`reply_parameters`, or the older `reply_to_message_id`), which may be
//! missing only with `allow_sending_without_reply`. Telegram has no client dedupe key, so
//! nothing is deduplicated.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::super::post::{Platform, Post, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::answers::{self, UNAUTHORIZED};
use super::params::Params;
use super::state::TelegramState;

/// "Text of the message to be sent, 1-4096 characters after entities parsing".
const MAX_TEXT: usize = 4096;

/// The part of `ReplyParameters` the mock reads.
#[derive(Deserialize)]
struct ReplyParameters {
    message_id: i64,
    #[serde(default)]
    allow_sending_without_reply: bool,
}

/// The record of a post to a chat: Telegram has no dedupe key, and the message id is the
/// record's to fill in.
pub(super) fn chat_post(
    attempt: &SendAttempt,
    content: String,
    reply_to: Option<i64>,
    files: Vec<super::super::post::PostedFile>,
) -> Post {
    Post {
        platform: Platform::Telegram,
        target: Target::Chat,
        target_id: attempt.target_id.clone(),
        content,
        reply_to: reply_to.map(|id| id.to_string()),
        msg_seq: None,
        nonce: None,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files,
    }
}

pub(crate) fn handle(
    token_ok: bool,
    params: &Params<'_>,
    state: &TelegramState,
    posts: &PostRecord,
) -> Reply {
    let chat = params.get("chat_id").unwrap_or_default();
    attempted(posts, Platform::Telegram, Target::Chat, chat, |attempt| {
        process(token_ok, params, state, posts, attempt)
    })
}

fn process(
    token_ok: bool,
    params: &Params<'_>,
    state: &TelegramState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
) -> Reply {
    if !token_ok {
        return Reply::Answer(answers::error(401, UNAUTHORIZED));
    }
    if let Some(refused) = struck_before(posts, attempt, &BotApi) {
        return refused;
    }
    let checked = match check(params, state) {
        Ok(checked) => checked,
        Err(answer) => return Reply::Answer(answer),
    };
    attempt.target_id = checked.chat_id.to_string();
    let (message_id, message) = state.bot_message(checked.chat_id, &checked.text, checked.reply_to);
    let post = chat_post(attempt, checked.text, checked.reply_to, vec![]);
    record(posts, attempt, post, message_id, message)
}

/// Records the bot's message (already stored in its chat as `message_id`) and answers it,
/// unless an after-processing fault withholds the answer.
pub(crate) fn record(
    posts: &PostRecord,
    attempt: &mut SendAttempt,
    post: Post,
    message_id: i64,
    message: Value,
) -> Reply {
    // Telegram numbers messages per chat, so the id is the chat's, not the record's count.
    let mint = |_| message_id.to_string();
    let accepted = posts.accept(post, Dedupe::None, mint, |_| message);
    // Without a dedupe key the record has nothing to compare, so this cannot be refused.
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(answers::internal_error());
    };
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(answers::ok(answer))
}

/// The Bot API's answers to the send faults: 500 and 502 in its envelope, and a flood wait
/// in whole seconds.
pub(crate) struct BotApi;

impl Refusals for BotApi {
    fn server_error(&self) -> Answer {
        answers::internal_error()
    }

    fn unavailable(&self) -> Answer {
        answers::bad_gateway()
    }

    fn rate_limited(&self, _: Target, retry_after: Duration) -> (Answer, Option<Duration>) {
        let secs = answers::retry_after_secs(retry_after);
        let answer = answers::too_many_requests(secs);
        (answer, Some(Duration::from_secs(secs)))
    }
}

struct Checked {
    chat_id: i64,
    text: String,
    /// The message replied to, when it exists.
    reply_to: Option<i64>,
}

fn check(params: &Params<'_>, state: &TelegramState) -> Result<Checked, Answer> {
    let text = params.get("text").unwrap_or_default().trim().to_owned();
    if text.is_empty() {
        return Err(answers::bad_request("message text is empty"));
    }
    if text.chars().count() > MAX_TEXT {
        return Err(answers::bad_request("message is too long"));
    }
    let chat_id = chat(params, state)?;
    let reply_to = reply_to(params, state, chat_id)?;
    Ok(Checked {
        chat_id,
        text,
        reply_to,
    })
}

/// The chat `chat_id` names, which the bot must know.
pub(crate) fn chat(params: &Params<'_>, state: &TelegramState) -> Result<i64, Answer> {
    let chat = params.get("chat_id").unwrap_or_default();
    if chat.trim().is_empty() {
        return Err(answers::bad_request("chat_id is empty"));
    }
    state
        .resolve_chat(&chat)
        .ok_or_else(|| answers::bad_request("chat not found"))
}

/// The message replied to (`reply_parameters`, or the older `reply_to_message_id`), when it
/// exists in the chat; a missing one is refused unless `allow_sending_without_reply`.
pub(crate) fn reply_to(
    params: &Params<'_>,
    state: &TelegramState,
    chat_id: i64,
) -> Result<Option<i64>, Answer> {
    let reply = match params.json::<ReplyParameters>("reply_parameters") {
        Some(reply) => Some(reply),
        None => params
            .int("reply_to_message_id")
            .map(|message_id| ReplyParameters {
                message_id,
                allow_sending_without_reply: params.flag("allow_sending_without_reply"),
            }),
    };
    // A `message_id` of 0 names no message: no reply, as the server reads it.
    let reply = reply.filter(|reply| reply.message_id != 0);
    match reply {
        Some(reply) if state.has_message(chat_id, reply.message_id) => Ok(Some(reply.message_id)),
        Some(reply) if reply.allow_sending_without_reply => Ok(None),
        Some(_) => Err(answers::bad_request("message to be replied not found")),
        None => Ok(None),
    }
}

/// sendChatAction (<https://core.telegram.org/bots/api#sendchataction>): `chat_id` and `action`
/// required, `action` one of the documented kinds; answers `true`.
pub(crate) fn chat_action(params: &Params<'_>, posts: &PostRecord) -> Answer {
    const ACTIONS: [&str; 10] = [
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
    ];
    let (Some(chat), Some(action)) = (params.get("chat_id"), params.get("action")) else {
        return answers::error(400, "Bad Request: chat_id and action are required");
    };
    if !ACTIONS.contains(&action.as_str()) {
        return answers::error(400, "Bad Request: wrong parameter action in request");
    }
    if action == "typing" {
        posts.typing(Platform::Telegram, chat.to_string());
    }
    answers::ok(serde_json::json!(true))
}
