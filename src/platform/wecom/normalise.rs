//! A WeCom AI-bot message callback as a normalised message (`@wecom/aibot-node-sdk`
//! `types/message.d.ts`, the docs' "接收消息回调"): `from.userid` said it; a group message
//! carries `chatid` (and `chattype` `group`), a one-to-one message only the user, whose id is
//! then the chat's (it is what `aibot_send_msg` takes for a one-to-one chat). Text is
//! `text.content`, a voice message's transcript `voice.content`, a mixed message's text
//! items joined; images, files and videos are listed by their URL (encrypted, valid five
//! minutes), each with its `aeskey` in `Media::extra` for the fetcher (`fetch.rs`).
//!
//! The answer goes to the chat, as a reply to the callback's `req_id` (stored beside the
//! body by `receive`): WeCom binds a reply to the callback, not to a message id.
//!
//! A group message reaches an AI bot only when it is mentioned (the docs: "群聊中@机器人"),
//! so every message addresses it.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, type_of, Author, Chat, ChatType, Media, MessageType, Said};

/// The most items listed from one mixed message; the rest are not fetched.
const MAX_ITEMS: usize = 20;

pub(super) fn normalise(kind: &str, e: &Value) -> Option<Said> {
    if kind != "message" {
        return None;
    }
    let sender = text(&e["from"]["userid"])?;
    let group = e["chattype"] == "group";
    let chat_id = if group { text(&e["chatid"])? } else { sender.clone() };
    let (words, media) = content(e);
    Some(Said {
        chat: Chat {
            id: chat_id.clone(),
            chat_type: if group { ChatType::Group } else { ChatType::Dm },
            name: None,
        },
        sender: Author {
            id: sender,
            name: None,
            is_bot: false,
            vouched: true,
        },
        thread_id: None,
        message_id: text(&e["msgid"]),
        reply_to_message_id: None,
        message_type: type_of(&media),
        text: words,
        media,
        answer: Some((Target(chat_id).to_string(), text(&e["req_id"]))),
    })
}

/// The text and media of a message body, by its `msgtype`.
fn content(e: &Value) -> (String, Vec<Media>) {
    match e["msgtype"].as_str().unwrap_or("") {
        "text" => (words(&e["text"]), vec![]),
        "voice" => (words(&e["voice"]), vec![]),
        "mixed" => {
            let items = e["mixed"]["msg_item"].as_array().map_or(&[][..], Vec::as_slice);
            let mut text = vec![];
            let mut media = vec![];
            for item in items.iter().take(MAX_ITEMS) {
                match item["msgtype"].as_str() {
                    Some("text") => text.push(words(&item["text"])),
                    Some("image") => media.extend(medium(MessageType::Photo, &item["image"])),
                    _ => {}
                }
            }
            (text.join("\n"), media)
        }
        "image" => (String::new(), medium(MessageType::Photo, &e["image"]).into_iter().collect()),
        "file" => (String::new(), medium(MessageType::Document, &e["file"]).into_iter().collect()),
        "video" => (String::new(), medium(MessageType::Video, &e["video"]).into_iter().collect()),
        _ => (String::new(), vec![]),
    }
}

fn words(block: &Value) -> String {
    block["content"].as_str().unwrap_or("").to_owned()
}

fn medium(media_type: MessageType, block: &Value) -> Option<Media> {
    Some(Media {
        media_type,
        id: None,
        url: Some(text(&block["url"])?),
        name: None,
        extra: text(&block["aeskey"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_one_to_one_text_answers_the_user_under_the_callback() {
        let e = json!({"msgid": "m1", "chattype": "single", "from": {"userid": "zhangsan"},
            "msgtype": "text", "text": {"content": "hello"}, "req_id": "r1"});
        let s = normalise("message", &e).unwrap();
        assert_eq!((s.chat.id.as_str(), s.chat.chat_type), ("zhangsan", ChatType::Dm));
        assert_eq!(s.text, "hello");
        assert_eq!(s.message_id.as_deref(), Some("m1"));
        assert_eq!(s.answer, Some(("chat:zhangsan".into(), Some("r1".into()))));
    }

    #[test]
    fn group_mixed_and_hostile_bodies() {
        let e = json!({"msgid": "m2", "chattype": "group", "chatid": "wrkG", "from": {"userid": "u"},
            "msgtype": "mixed", "mixed": {"msg_item": [
                {"msgtype": "text", "text": {"content": "look"}},
                {"msgtype": "image", "image": {"url": "https://x/y", "aeskey": "k"}}]}});
        let s = normalise("message", &e).unwrap();
        assert_eq!((s.chat.id.as_str(), s.chat.chat_type), ("wrkG", ChatType::Group));
        assert_eq!((s.text.as_str(), s.media.len()), ("look", 1));
        assert_eq!(s.media[0].extra.as_deref(), Some("k"));
        for bad in [json!({}), json!({"from": 1}), json!({"from": {"userid": "u"}, "chattype": "group"}),
            json!({"from": {"userid": "u"}, "msgtype": "mixed", "mixed": {"msg_item": "x"}})] {
            let _ = normalise("message", &bad);
        }
        assert!(normalise("enter_chat", &e).is_none());
    }
}
