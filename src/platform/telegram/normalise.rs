//! Telegram's message updates as normalised messages (core.telegram.org/bots/api, "Update"
//! and "Message"): `message` and `channel_post` are new messages (an edit is an
//! `edited_message`, not a new one); the chat's `type` is `private`, `group`, `supergroup` or
//! `channel`; a forum topic is `message_thread_id` with `is_topic_message`; a photo comes in
//! several sizes, the largest last.
//!
//! Who said it is `from`, a user, unless the message was sent on behalf of a chat
//! (`sender_chat`: a channel's post, a linked channel's post forwarded into its discussion
//! group, an anonymous group admin): then `from` is, as the Bot API says, "a fake sender user"
//! kept for backward compatibility, and the sender is the chat, which Telegram does not vouch
//! is any one account.
//!
//! Whether a message addresses the bot ([`addressed`]) is read from its entities, never its
//! text: a `mention` entity spelling the bot's `@username`, a `text_mention` naming its user
//! id, a `bot_command` addressed `/command@username`, or a reply to one of the bot's messages.
//! Entity offsets and lengths count UTF-16 code units ("MessageEntity").

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{
    id, text, type_of, Author, Chat, ChatType, Media, MessageType, Said,
};
use crate::platform::BotId;

/// The update types that are a new message, each carrying it under its own name.
const MESSAGES: &[&str] = &["message", "channel_post", "business_message"];

pub(super) fn normalise(kind: &str, update: &Value) -> Option<Said> {
    if !MESSAGES.contains(&kind) {
        return None;
    }
    let m = &update[kind];
    let chat = &m["chat"];
    let chat_id = id(&chat["id"])?;
    let chat_type = match chat["type"].as_str()? {
        "private" => ChatType::Dm,
        "channel" => ChatType::Channel,
        _ => ChatType::Group,
    };
    // Said on behalf of a chat, the chat is the sender and `from` a stand-in; with neither
    // (a channel post of old), the chat itself.
    let sender = if m["sender_chat"].is_object() || !m["from"].is_object() {
        let by = if m["sender_chat"].is_object() {
            &m["sender_chat"]
        } else {
            chat
        };
        Author {
            id: id(&by["id"])?,
            name: text(&by["title"]).or_else(|| full_name(by)),
            is_bot: false,
            vouched: false,
        }
    } else {
        Author {
            id: id(&m["from"]["id"])?,
            name: full_name(&m["from"]),
            is_bot: m["from"]["is_bot"].as_bool().unwrap_or(false),
            vouched: true,
        }
    };
    let media = media(m);
    let message_id = id(&m["message_id"]);
    let thread_id = if m["is_topic_message"].as_bool() == Some(true) {
        id(&m["message_thread_id"])
    } else {
        None
    };
    let message_type = if m["location"].is_object() {
        MessageType::Location
    } else {
        type_of(&media)
    };
    Some(Said {
        chat: Chat {
            id: chat_id.clone(),
            chat_type,
            name: text(&chat["title"]).or_else(|| full_name(chat)),
        },
        sender,
        thread_id,
        reply_to_message_id: id(&m["reply_to_message"]["message_id"]),
        message_type,
        text: text(&m["text"])
            .or_else(|| text(&m["caption"]))
            .unwrap_or_default(),
        media,
        answer: Some((Target(chat_id).to_string(), message_id.clone())),
        message_id,
    })
}

/// Whether message update `update` (of type `kind`) addresses `bot`: by an entity of the text
/// or the caption that names it, or as a reply to one of its messages. Nothing addresses a bot
/// whose id is not known yet; a mention by `@username` needs its handle as well.
pub(super) fn addressed(kind: &str, update: &Value, bot: &BotId) -> bool {
    if !MESSAGES.contains(&kind) {
        return false;
    }
    let m = &update[kind];
    let Some(bot_id) = bot.id.as_deref() else {
        return false;
    };
    let is_bot = |user: &Value| id(&user["id"]).as_deref() == Some(bot_id);
    // Every message in a forum topic replies to the topic's service message unless it replies
    // to another: that one is no reply to its author.
    let replied = &m["reply_to_message"];
    if is_bot(&replied["from"]) && !replied["forum_topic_created"].is_object() {
        return true;
    }
    let handle = bot.handle.as_deref().filter(|h| !h.is_empty());
    let names_bot = |said: &str| handle.is_some_and(|h| said.eq_ignore_ascii_case(h));
    [("text", "entities"), ("caption", "caption_entities")]
        .into_iter()
        .any(|(text_key, entities_key)| {
            let text = m[text_key].as_str().unwrap_or("");
            m[entities_key]
                .as_array()
                .into_iter()
                .flatten()
                .any(|entity| match entity["type"].as_str() {
                    Some("text_mention") => is_bot(&entity["user"]),
                    Some("mention") => entity_text(text, entity)
                        .and_then(|said| said.strip_prefix('@'))
                        .is_some_and(names_bot),
                    // `/command@username`: a command meant for this bot among several.
                    Some("bot_command") => entity_text(text, entity)
                        .and_then(|said| said.split_once('@'))
                        .is_some_and(|(_, to)| names_bot(to)),
                    _ => false,
                })
        })
}

/// The part of `text` an entity covers, by its `offset` and `length` in UTF-16 code units;
/// `None` when they do not fall on characters of the text.
fn entity_text<'t>(text: &'t str, entity: &Value) -> Option<&'t str> {
    let offset = usize::try_from(entity["offset"].as_u64()?).ok()?;
    let length = usize::try_from(entity["length"].as_u64()?).ok()?;
    let start = utf16_to_byte(text, offset)?;
    let end = utf16_to_byte(text, offset.checked_add(length)?)?;
    text.get(start..end)
}

/// The byte index of the character at UTF-16 position `unit` (the text's length at its end);
/// `None` inside a character or past the end.
fn utf16_to_byte(text: &str, unit: usize) -> Option<usize> {
    let mut at = 0;
    for (byte, c) in text.char_indices() {
        if at == unit {
            return Some(byte);
        }
        if at > unit {
            return None;
        }
        at += c.len_utf16();
    }
    (at == unit).then_some(text.len())
}

/// `first_name last_name`, or the `username`.
fn full_name(who: &Value) -> Option<String> {
    let name: Vec<&str> = [&who["first_name"], &who["last_name"]]
        .into_iter()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    if name.is_empty() {
        text(&who["username"])
    } else {
        Some(name.join(" "))
    }
}

fn media(m: &Value) -> Vec<Media> {
    let file = |media_type, v: &Value| Media {
        media_type,
        id: text(&v["file_id"]),
        url: None,
        name: text(&v["file_name"]).or_else(|| text(&v["mime_type"])),
        extra: None,
    };
    let mut out = vec![];
    if let Some(largest) = m["photo"].as_array().and_then(|sizes| sizes.last()) {
        out.push(file(MessageType::Photo, largest));
    }
    for (key, media_type) in [
        ("video", MessageType::Video),
        ("animation", MessageType::Video),
        ("audio", MessageType::Audio),
        ("voice", MessageType::Voice),
        ("document", MessageType::Document),
        ("sticker", MessageType::Sticker),
    ] {
        // An animation is also sent as a document; keep one.
        if m[key].is_object() && !(key == "document" && m["animation"].is_object()) {
            out.push(file(media_type, &m[key]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_reply_in_a_forum_topic() {
        let update = json!({"update_id": 10, "message": {
            "message_id": 77, "message_thread_id": 5, "is_topic_message": true,
            "from": {"id": 42, "is_bot": false, "first_name": "Ann", "last_name": "Lee", "username": "ann"},
            "chat": {"id": -1001234567890i64, "title": "Team", "type": "supergroup", "is_forum": true},
            "date": 1700000000, "text": "ship it",
            "reply_to_message": {"message_id": 70, "date": 1699999999,
                                 "chat": {"id": -1001234567890i64, "type": "supergroup"}}
        }});
        let m = normalise("message", &update).unwrap();
        assert_eq!(
            m.chat,
            Chat {
                id: "-1001234567890".into(),
                chat_type: ChatType::Group,
                name: Some("Team".into())
            }
        );
        assert_eq!(
            m.sender,
            Author {
                id: "42".into(),
                vouched: true,
                name: Some("Ann Lee".into()),
                is_bot: false
            }
        );
        assert_eq!(m.thread_id.as_deref(), Some("5"));
        assert_eq!(m.message_id.as_deref(), Some("77"));
        assert_eq!(m.reply_to_message_id.as_deref(), Some("70"));
        assert_eq!(
            (m.message_type, m.text.as_str()),
            (MessageType::Text, "ship it")
        );
        assert_eq!(
            m.answer,
            Some(("chat:-1001234567890".into(), Some("77".into())))
        );
    }

    #[test]
    fn a_private_photo_with_a_caption_and_a_channel_post() {
        let update = json!({"update_id": 11, "message": {
            "message_id": 3, "from": {"id": 9, "is_bot": false, "first_name": "Bo"},
            "chat": {"id": 9, "first_name": "Bo", "type": "private"}, "date": 1,
            "photo": [{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90},
                      {"file_id": "large", "file_unique_id": "l", "width": 1280, "height": 1280}],
            "caption": "cat"
        }});
        let m = normalise("message", &update).unwrap();
        assert_eq!(
            (m.chat.chat_type, m.chat.name.as_deref()),
            (ChatType::Dm, Some("Bo"))
        );
        assert_eq!(
            (m.message_type, m.text.as_str()),
            (MessageType::Photo, "cat")
        );
        assert_eq!(m.media[0].id.as_deref(), Some("large"));
        let post = json!({"update_id": 12, "channel_post": {
            "message_id": 4, "sender_chat": {"id": -100555, "title": "News", "type": "channel"},
            "chat": {"id": -100555, "title": "News", "type": "channel"}, "date": 1, "text": "out now"}});
        let m = normalise("channel_post", &post).unwrap();
        assert_eq!(m.chat.chat_type, ChatType::Channel);
        assert_eq!(
            (m.sender.id.as_str(), m.sender.name.as_deref()),
            ("-100555", Some("News"))
        );
        assert!(!m.sender.vouched, "a channel's post is no one account's");
    }

    #[test]
    fn a_post_on_behalf_of_a_chat_is_the_chats_and_not_vouched() {
        // An anonymous admin: `from` is the stand-in GroupAnonymousBot, `sender_chat` the group.
        let anonymous = json!({"update_id": 20, "message": {
            "message_id": 8, "date": 1, "text": "from the admins",
            "from": {"id": 1087968824, "is_bot": true, "first_name": "Group",
                     "username": "GroupAnonymousBot"},
            "sender_chat": {"id": -1001234567890i64, "title": "Team", "type": "supergroup"},
            "chat": {"id": -1001234567890i64, "title": "Team", "type": "supergroup"}}});
        let m = normalise("message", &anonymous).unwrap();
        assert_eq!(
            m.sender,
            Author {
                id: "-1001234567890".into(),
                name: Some("Team".into()),
                is_bot: false,
                vouched: false
            }
        );
        // A linked channel's post, forwarded into its discussion group by "Telegram" (777000).
        let linked = json!({"update_id": 21, "message": {
            "message_id": 9, "date": 1, "text": "new post", "is_automatic_forward": true,
            "from": {"id": 777000, "is_bot": false, "first_name": "Telegram"},
            "sender_chat": {"id": -100555, "title": "News", "type": "channel"},
            "chat": {"id": -1001234567890i64, "title": "Team", "type": "supergroup"}}});
        let m = normalise("message", &linked).unwrap();
        assert_eq!((m.sender.id.as_str(), m.sender.vouched), ("-100555", false));
        // A user in the same group is vouched for.
        let user = json!({"update_id": 22, "message": {
            "message_id": 10, "date": 1, "text": "hi",
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": -1001234567890i64, "title": "Team", "type": "supergroup"}}});
        assert!(normalise("message", &user).unwrap().sender.vouched);
    }

    const BOT_ID: i64 = 123456;

    fn bot() -> BotId {
        BotId {
            id: Some(BOT_ID.to_string()),
            handle: Some("hermes_bot".into()),
        }
    }

    /// A user's message in a supergroup, with `text` and these `entities`.
    fn group_message(text: &str, entities: Value) -> Value {
        json!({"update_id": 30, "message": {
            "message_id": 11, "date": 1, "text": text, "entities": entities,
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": -1001234567890i64, "title": "Team", "type": "supergroup"}}})
    }

    #[test]
    fn a_mention_entity_of_the_bots_username_addresses_it_in_any_case() {
        let said = group_message(
            "@Hermes_Bot what now?",
            json!([{"type": "mention", "offset": 0, "length": 11}]),
        );
        assert!(addressed("message", &said, &bot()));
        // Offsets count UTF-16 code units: the emoji before the mention is two of them, so
        // the mention starts at 9 (its char offset, 8, is the space before it).
        let text = "héllo 😀 @hermes_bot";
        let said = group_message(text, json!([{"type": "mention", "offset": 9, "length": 11}]));
        assert!(addressed("message", &said, &bot()));
        let wrong = group_message(text, json!([{"type": "mention", "offset": 8, "length": 11}]));
        assert!(!addressed("message", &wrong, &bot()));
    }

    #[test]
    fn the_bots_name_in_the_text_without_an_entity_is_no_mention() {
        let said = group_message("hey @hermes_bot, and hermes_bot too", json!([]));
        assert!(!addressed("message", &said, &bot()));
        let none = json!({"update_id": 31, "message": {"message_id": 12, "date": 1,
            "text": "@hermes_bot", "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": -1, "title": "T", "type": "group"}}});
        assert!(!addressed("message", &none, &bot()));
    }

    #[test]
    fn a_mention_of_someone_else_or_a_look_alike_is_not_the_bot() {
        let other = group_message(
            "@alice look",
            json!([{"type": "mention", "offset": 0, "length": 6}]),
        );
        assert!(!addressed("message", &other, &bot()));
        let longer = group_message(
            "@hermes_bot2 look",
            json!([{"type": "mention", "offset": 0, "length": 12}]),
        );
        assert!(!addressed("message", &longer, &bot()));
        let shorter = group_message(
            "@hermes_bo look",
            json!([{"type": "mention", "offset": 0, "length": 10}]),
        );
        assert!(!addressed("message", &shorter, &bot()));
        // A text mention of another user, even one shown as the bot's name.
        let text_mention = group_message(
            "Hermes look",
            json!([{"type": "text_mention", "offset": 0, "length": 6,
                    "user": {"id": 99, "is_bot": false, "first_name": "Hermes"}}]),
        );
        assert!(!addressed("message", &text_mention, &bot()));
        // A hashtag or a link spelling the handle is no mention.
        let hashtag = group_message(
            "#hermes_bot",
            json!([{"type": "hashtag", "offset": 0, "length": 11}]),
        );
        assert!(!addressed("message", &hashtag, &bot()));
    }

    #[test]
    fn a_text_mention_of_the_bots_id_a_command_for_it_and_a_caption_mention_address_it() {
        let text_mention = group_message(
            "Hermes look",
            json!([{"type": "text_mention", "offset": 0, "length": 6,
                    "user": {"id": BOT_ID, "is_bot": true, "first_name": "Hermes"}}]),
        );
        assert!(addressed("message", &text_mention, &bot()));
        let command = group_message(
            "/help@hermes_bot",
            json!([{"type": "bot_command", "offset": 0, "length": 16}]),
        );
        assert!(addressed("message", &command, &bot()));
        let other_bots = group_message(
            "/help@other_bot",
            json!([{"type": "bot_command", "offset": 0, "length": 15}]),
        );
        assert!(!addressed("message", &other_bots, &bot()));
        let bare = group_message("/help", json!([{"type": "bot_command", "offset": 0, "length": 5}]));
        assert!(!addressed("message", &bare, &bot()));
        let photo = json!({"update_id": 32, "message": {"message_id": 13, "date": 1,
            "photo": [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}],
            "caption": "look @hermes_bot",
            "caption_entities": [{"type": "mention", "offset": 5, "length": 11}],
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": -1, "title": "T", "type": "group"}}});
        assert!(addressed("message", &photo, &bot()));
    }

    #[test]
    fn a_reply_to_the_bots_message_addresses_it_and_a_reply_to_anyone_else_does_not() {
        let reply = |from: Value, extra: Value| {
            let mut replied = json!({"message_id": 5, "date": 1, "from": from,
                "chat": {"id": -1, "title": "T", "type": "group"}, "text": "earlier"});
            if let (Some(r), Some(e)) = (replied.as_object_mut(), extra.as_object()) {
                r.extend(e.clone());
            }
            json!({"update_id": 33, "message": {"message_id": 14, "date": 1, "text": "yes",
                "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
                "chat": {"id": -1, "title": "T", "type": "group"},
                "reply_to_message": replied}})
        };
        let to_bot = json!({"id": BOT_ID, "is_bot": true, "first_name": "Hermes",
                            "username": "hermes_bot"});
        assert!(addressed("message", &reply(to_bot.clone(), json!({})), &bot()));
        let to_ann = json!({"id": 7, "is_bot": false, "first_name": "Hermes"});
        assert!(!addressed("message", &reply(to_ann, json!({})), &bot()));
        // In a forum topic the bot opened, a message "replies" to the topic's service message.
        let topic = json!({"forum_topic_created": {"name": "Ideas", "icon_color": 7322096}});
        assert!(!addressed("message", &reply(to_bot, topic), &bot()));
    }

    #[test]
    fn nothing_addresses_a_bot_not_known_yet_and_only_ids_without_a_handle() {
        let mention = group_message(
            "@hermes_bot hi",
            json!([{"type": "mention", "offset": 0, "length": 11}]),
        );
        assert!(!addressed("message", &mention, &BotId::default()));
        let id_only = BotId {
            id: Some(BOT_ID.to_string()),
            handle: None,
        };
        assert!(!addressed("message", &mention, &id_only));
        let text_mention = group_message(
            "Hermes",
            json!([{"type": "text_mention", "offset": 0, "length": 6,
                    "user": {"id": BOT_ID, "is_bot": true, "first_name": "Hermes"}}]),
        );
        assert!(addressed("message", &text_mention, &id_only));
        assert!(!addressed("edited_message", &text_mention, &id_only));
    }

    #[test]
    fn entity_offsets_that_split_a_character_or_run_past_the_end_cover_nothing() {
        let text = "😀@hermes_bot";
        assert_eq!(
            entity_text(text, &json!({"offset": 2, "length": 11})),
            Some("@hermes_bot")
        );
        assert_eq!(entity_text(text, &json!({"offset": 1, "length": 5})), None);
        assert_eq!(entity_text(text, &json!({"offset": 2, "length": 12})), None);
        assert_eq!(entity_text(text, &json!({"offset": -1, "length": 2})), None);
    }

    #[test]
    fn edits_and_other_updates_are_not_messages() {
        let update = json!({"update_id": 13, "edited_message": {"message_id": 1,
            "chat": {"id": 1, "type": "private"}, "from": {"id": 1, "is_bot": false, "first_name": "A"}}});
        assert!(normalise("edited_message", &update).is_none());
        assert!(normalise(
            "my_chat_member",
            &json!({"update_id": 14, "my_chat_member": {}})
        )
        .is_none());
    }
}
