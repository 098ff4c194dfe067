//! Feishu's `im.message.receive_v1` as a normalised message (open.feishu.cn, "接收消息" and
//! "消息内容结构"): the sender by `open_id`, the chat by `chat_id` (`p2p` or `group`), the
//! topic by `thread_id`, the message it answers by `parent_id`, and a `content` that is JSON in
//! a string, shaped by `message_type`. An answer replies to the message, which keeps it in the
//! message's thread. A sender of `sender_type` `user` named by its `open_id` is an account
//! Feishu vouches for.
//!
//! A message addresses the bot ([`addressed`]) when its `mentions`, the @-mentions Feishu
//! resolved (each an `@_user_N` placeholder in the text and an `id` with the `open_id`), hold
//! the bot's `open_id`, which `GET /open-apis/bot/v3/info` names.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{id, text, Author, Chat, ChatType, Media, MessageType, Said};
use crate::platform::BotId;

pub(super) fn normalise(kind: &str, data: &Value) -> Option<Said> {
    if kind != "im.message.receive_v1" {
        return None;
    }
    let event = &data["event"];
    let message = &event["message"];
    let chat = text(&message["chat_id"])?;
    let sender = &event["sender"];
    let content: Value = message["content"]
        .as_str()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(Value::Null);
    let (message_type, body, media) = read_content(message["message_type"].as_str()?, &content);
    let message_id = text(&message["message_id"]);
    Some(Said {
        chat: Chat {
            id: chat.clone(),
            chat_type: match message["chat_type"].as_str() {
                Some("p2p") => ChatType::Dm,
                _ => ChatType::Group,
            },
            name: None,
        },
        sender: Author {
            id: id(&sender["sender_id"]["open_id"])
                .or_else(|| id(&sender["sender_id"]["user_id"]))?,
            name: None,
            is_bot: sender["sender_type"].as_str() == Some("app"),
            vouched: sender["sender_type"] == "user"
                && id(&sender["sender_id"]["open_id"]).is_some(),
        },
        thread_id: text(&message["thread_id"]),
        reply_to_message_id: text(&message["parent_id"]),
        message_type,
        text: with_mentions(&body, &message["mentions"]),
        media,
        answer: Some((Target::Chat(chat).to_string(), message_id.clone())),
        message_id,
    })
}

/// Whether event `data` of type `kind` @-mentions `bot` (its `open_id`).
pub(super) fn addressed(kind: &str, data: &Value, bot: &BotId) -> bool {
    if kind != "im.message.receive_v1" {
        return false;
    }
    let Some(bot_id) = bot.id.as_deref() else {
        return false;
    };
    data["event"]["message"]["mentions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| id(&m["id"]["open_id"]).as_deref() == Some(bot_id))
}

/// The text and the media of a `content`, by its `message_type`.
fn read_content(message_type: &str, c: &Value) -> (MessageType, String, Vec<Media>) {
    let media = |media_type, key: &str| Media {
        media_type,
        id: text(&c[key]),
        url: None,
        name: text(&c["file_name"]),
        extra: None,
    };
    match message_type {
        "text" => (
            MessageType::Text,
            c["text"].as_str().unwrap_or("").to_owned(),
            vec![],
        ),
        "post" => (MessageType::Text, post_text(c), vec![]),
        "image" => (
            MessageType::Photo,
            String::new(),
            vec![media(MessageType::Photo, "image_key")],
        ),
        "file" => (
            MessageType::Document,
            String::new(),
            vec![media(MessageType::Document, "file_key")],
        ),
        "audio" => (
            MessageType::Voice,
            String::new(),
            vec![media(MessageType::Voice, "file_key")],
        ),
        "media" => (
            MessageType::Video,
            String::new(),
            vec![media(MessageType::Video, "file_key")],
        ),
        "sticker" => (
            MessageType::Sticker,
            String::new(),
            vec![media(MessageType::Sticker, "file_key")],
        ),
        _ => (MessageType::Text, String::new(), vec![]),
    }
}

/// A rich-text post's title and text runs, one line per paragraph.
fn post_text(c: &Value) -> String {
    // A received post is `{title, content}`; one with a language is `{zh_cn: {title, content}}`.
    let post = if c["content"].is_array() {
        c
    } else {
        c.as_object()
            .and_then(|o| o.values().next())
            .unwrap_or(&Value::Null)
    };
    let mut lines: Vec<String> = text(&post["title"]).into_iter().collect();
    for paragraph in post["content"].as_array().into_iter().flatten() {
        let line: String = paragraph
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|run| run["text"].as_str())
            .collect();
        lines.push(line);
    }
    lines.join("\n")
}

/// The text with each mention's placeholder (`@_user_1`) replaced by `@` and the name, and
/// the bot's own mention at the start dropped.
fn with_mentions(body: &str, mentions: &Value) -> String {
    let mut out = body.to_owned();
    for m in mentions.as_array().into_iter().flatten() {
        let (Some(key), name) = (m["key"].as_str(), m["name"].as_str().unwrap_or("")) else {
            continue;
        };
        if !key.is_empty() {
            out = out.replace(key, &format!("@{name}"));
        }
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn receive(message: Value) -> Value {
        json!({
            "schema": "2.0",
            "header": {"event_id": "5e3702a84e847582be8db7fb73283c02", "event_type": "im.message.receive_v1",
                       "create_time": "1608725989000", "token": "rvaYgkNyvZ", "app_id": "cli_9f5343c580712544",
                       "tenant_key": "2ca1d211f64f6438"},
            "event": {
                "sender": {"sender_id": {"union_id": "on_8ed6aa67826108097d9ee143816345", "user_id": "e33ggbyz",
                                         "open_id": "ou_84aad35d084aa403a838cf73ee18467"},
                           "sender_type": "user", "tenant_key": "736588c9260f175e"},
                "message": message
            }
        })
    }

    #[test]
    fn a_group_text_message_from_the_docs() {
        let data = receive(json!({
            "message_id": "om_5ce6d572455d361153b7cb51da133945", "root_id": "om_5ce6d572455d361153b7cb5xxfsdfsdfdsf",
            "parent_id": "om_5ce6d572455d361153b7cb5xxfsdfsdfdsf", "create_time": "1609073151345",
            "chat_id": "oc_5ce6d572455d361153b7xx51da133945", "thread_id": "omt_d4be107c616",
            "chat_type": "group", "message_type": "text",
            "content": "{\"text\":\"@_user_1 hello\"}",
            "mentions": [{"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "Tom", "tenant_key": "x"}]
        }));
        let m = normalise("im.message.receive_v1", &data).unwrap();
        assert_eq!(m.chat.id, "oc_5ce6d572455d361153b7xx51da133945");
        assert_eq!(m.chat.chat_type, ChatType::Group);
        assert_eq!(m.sender.id, "ou_84aad35d084aa403a838cf73ee18467");
        assert!(!m.sender.is_bot);
        assert_eq!(m.thread_id.as_deref(), Some("omt_d4be107c616"));
        assert_eq!(
            m.message_id.as_deref(),
            Some("om_5ce6d572455d361153b7cb51da133945")
        );
        assert_eq!(
            m.reply_to_message_id.as_deref(),
            Some("om_5ce6d572455d361153b7cb5xxfsdfsdfdsf")
        );
        assert_eq!(m.text, "@Tom hello");
        assert_eq!(
            m.answer,
            Some((
                "chat:oc_5ce6d572455d361153b7xx51da133945".into(),
                Some("om_5ce6d572455d361153b7cb51da133945".into())
            ))
        );
    }

    #[test]
    fn an_image_in_a_direct_chat_and_a_post() {
        let data = receive(
            json!({"message_id": "om_1", "chat_id": "oc_1", "chat_type": "p2p",
                                  "message_type": "image", "content": "{\"image_key\":\"img_v2_041b\"}"}),
        );
        let m = normalise("im.message.receive_v1", &data).unwrap();
        assert_eq!(m.chat.chat_type, ChatType::Dm);
        assert_eq!(m.message_type, MessageType::Photo);
        assert_eq!(m.media[0].id.as_deref(), Some("img_v2_041b"));
        let post = receive(
            json!({"message_id": "om_2", "chat_id": "oc_1", "chat_type": "p2p",
            "message_type": "post",
            "content": "{\"title\":\"Plan\",\"content\":[[{\"tag\":\"text\",\"text\":\"step \"},{\"tag\":\"a\",\"text\":\"one\",\"href\":\"x\"}]]}"}),
        );
        assert_eq!(
            normalise("im.message.receive_v1", &post).unwrap().text,
            "Plan\nstep one"
        );
    }

    const BOT: &str = "ou_e6e14f667cfe239d7b129b521dce0569";

    fn bot() -> BotId {
        BotId {
            id: Some(BOT.into()),
            handle: Some("Hermes".into()),
        }
    }

    fn mention(key: &str, open_id: &str, name: &str) -> Value {
        json!({"key": key, "id": {"union_id": "on_1", "user_id": "u1", "open_id": open_id},
            "name": name, "tenant_key": "736588c9260f175e"})
    }

    fn group_text(text: &str, mentions: Value) -> Value {
        receive(json!({"message_id": "om_3", "chat_id": "oc_1", "chat_type": "group",
            "message_type": "text", "content": json!({"text": text}).to_string(),
            "mentions": mentions}))
    }

    #[test]
    fn a_mention_of_the_bots_open_id_addresses_it() {
        let data = group_text("@_user_1 hello", json!([mention("@_user_1", BOT, "Hermes")]));
        assert!(addressed("im.message.receive_v1", &data, &bot()));
        let second = group_text(
            "@_user_1 @_user_2 hi",
            json!([mention("@_user_1", "ou_alice", "Alice"), mention("@_user_2", BOT, "Hermes")]),
        );
        assert!(addressed("im.message.receive_v1", &second, &bot()));
        assert!(!addressed("im.chat.member.bot.added_v1", &data, &bot()));
    }

    #[test]
    fn the_bots_name_in_the_text_or_someone_elses_mention_is_not_the_bot() {
        let plain = group_text("@Hermes hello Hermes", json!([]));
        assert!(!addressed("im.message.receive_v1", &plain, &bot()));
        // Someone else shown with the bot's name, and an open_id that only starts like it.
        let other = group_text("@_user_1 hi", json!([mention("@_user_1", "ou_alice", "Hermes")]));
        assert!(!addressed("im.message.receive_v1", &other, &bot()));
        let longer = format!("{BOT}0");
        let look_alike = group_text("@_user_1 hi", json!([mention("@_user_1", &longer, "Hermes")]));
        assert!(!addressed("im.message.receive_v1", &look_alike, &bot()));
        let data = group_text("@_user_1 hello", json!([mention("@_user_1", BOT, "Hermes")]));
        assert!(!addressed("im.message.receive_v1", &data, &BotId::default()));
    }

    #[test]
    fn a_user_named_by_open_id_is_vouched_for_and_nothing_else() {
        let data = group_text("hi", json!([]));
        assert!(normalise("im.message.receive_v1", &data).unwrap().sender.vouched);
        let mut app = data.clone();
        app["event"]["sender"]["sender_type"] = json!("app");
        assert!(!normalise("im.message.receive_v1", &app).unwrap().sender.vouched);
        let mut no_open_id = data;
        no_open_id["event"]["sender"]["sender_id"]["open_id"] = json!("");
        let said = normalise("im.message.receive_v1", &no_open_id).unwrap();
        assert_eq!((said.sender.id.as_str(), said.sender.vouched), ("e33ggbyz", false));
    }

    #[test]
    fn other_events_are_not_messages() {
        let data = receive(json!({}));
        assert!(normalise("im.chat.member.bot.added_v1", &data).is_none());
        assert!(normalise("im.message.receive_v1", &data).is_none());
    }
}
