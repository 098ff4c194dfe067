//! Telegram's message updates as normalised messages (core.telegram.org/bots/api, "Update"
//! and "Message"): `message` and `channel_post` are new messages (an edit is an
//! `edited_message`, not a new one); the chat's `type` is `private`, `group`, `supergroup` or
//! `channel`; a forum topic is `message_thread_id` with `is_topic_message`; a photo comes in
//! several sizes, the largest last.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{
    id, text, type_of, Author, Chat, ChatType, Media, MessageType, Said,
};

pub(super) fn normalise(kind: &str, update: &Value) -> Option<Said> {
    if !matches!(kind, "message" | "channel_post" | "business_message") {
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
    // A channel post is said by the channel (`sender_chat`), not by a user.
    let sender = if m["from"].is_object() {
        Author {
            id: id(&m["from"]["id"])?,
            name: full_name(&m["from"]),
            is_bot: m["from"]["is_bot"].as_bool().unwrap_or(false),
            vouched: true,
        }
    } else {
        let by = if m["sender_chat"].is_object() {
            &m["sender_chat"]
        } else {
            chat
        };
        Author {
            id: id(&by["id"])?,
            name: text(&by["title"]).or_else(|| full_name(by)),
            vouched: true,
            is_bot: false,
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
