//! The Bot API objects the mock hands out (`User`, `Chat`, `Message`, `Update` in
//! <https://core.telegram.org/bots/api#available-types>), trimmed to the fields a text chat has.

use serde_json::{json, Value};

use super::config::TelegramConfig;

/// The mock's user, who writes every generated message: in a private chat the user's id is
/// the chat's, elsewhere this one.
const GROUP_AUTHOR: i64 = 1001;

/// Telegram's id ranges: users (and so private chats) are positive, basic groups negative,
/// supergroups and channels below -10^12.
pub(crate) fn chat_type(chat_id: i64) -> &'static str {
    if chat_id > 0 {
        "private"
    } else if chat_id <= -1_000_000_000_000 {
        "supergroup"
    } else {
        "group"
    }
}

pub(crate) fn chat(chat_id: i64, username: Option<&str>) -> Value {
    let mut chat = json!({"id": chat_id, "type": chat_type(chat_id)});
    if chat_id > 0 {
        chat["first_name"] = json!(format!("User {chat_id}"));
    } else {
        chat["title"] = json!(format!("Chat {chat_id}"));
    }
    if let Some(username) = username {
        chat["username"] = json!(username);
    }
    chat
}

pub(crate) fn user_author(chat_id: i64) -> Value {
    let id = if chat_id > 0 { chat_id } else { GROUP_AUTHOR };
    json!({"id": id, "is_bot": false, "first_name": format!("User {id}"), "language_code": "en"})
}

/// The bot as `getMe` and its own messages' `from` show it.
pub(crate) fn bot_user(config: &TelegramConfig) -> Value {
    json!({
        "id": config.bot_id(),
        "is_bot": true,
        "first_name": config.bot_name,
        "username": config.bot_username,
    })
}

/// `getMe`: the bot and its capabilities.
pub(crate) fn me(config: &TelegramConfig) -> Value {
    let mut me = bot_user(config);
    me["can_join_groups"] = json!(true);
    me["can_read_all_group_messages"] = json!(false);
    me["supports_inline_queries"] = json!(false);
    me["can_connect_to_business"] = json!(false);
    me["has_main_web_app"] = json!(false);
    me
}

/// A message with no content yet; `date` in Unix seconds.
pub(crate) fn message(message_id: i64, from: Value, chat: Value, date: u64) -> Value {
    json!({"message_id": message_id, "from": from, "chat": chat, "date": date})
}

/// Unix seconds now.
pub(crate) fn unix_now() -> u64 {
    super::super::post::unix_ms_now() / 1000
}
