//! Weixin's iLink messages as normalised messages (the iLink bot API as the openclaw-weixin
//! plugin and Hermes's `weixin.py` read it): the peer is `from_user_id`, a room message names
//! its `room_id`, and the content is an `item_list` of typed items (1 text, 2 image, 3 voice,
//! 4 file, 5 video). Media are encrypted on the CDN: an item's `encrypt_query_param` is the id to
//! fetch one by. The bot posts to peers only, with the peer's context token, and iLink has no
//! reply threading: a room message has no answer here.

use serde_json::Value;

use super::cdn_cipher::Key;
use super::target::Target;
use crate::platform::message::{
    id, text, type_of, Author, Chat, ChatType, Media, MessageType, Said,
};

const TEXT: i64 = 1;
const VOICE: i64 = 3;

pub(super) fn normalise(kind: &str, m: &Value) -> Option<Said> {
    if kind != "message" {
        return None;
    }
    let from = text(&m["from_user_id"])?;
    let room = text(&m["room_id"]).or_else(|| text(&m["chat_room_id"]));
    let items: &[Value] = m["item_list"].as_array().map_or(&[], Vec::as_slice);
    let media: Vec<Media> = items.iter().filter_map(media).collect();
    let (chat, answer) = match room {
        Some(room) => (
            Chat {
                id: room,
                chat_type: ChatType::Group,
                name: None,
            },
            None,
        ),
        None => (
            Chat {
                id: from.clone(),
                chat_type: ChatType::Dm,
                name: None,
            },
            Some((Target(from.clone()).to_string(), None)),
        ),
    };
    Some(Said {
        chat,
        sender: Author {
            id: from,
            name: None,
            is_bot: false,
            vouched: true,
        },
        thread_id: None,
        message_id: id(&m["message_id"]),
        reply_to_message_id: None,
        message_type: type_of(&media),
        text: item_text(items),
        media,
        answer,
    })
}

/// The first text item's text; for a voice message, what the platform heard.
fn item_text(items: &[Value]) -> String {
    let of = |kind, key: &str| {
        items
            .iter()
            .find(|i| i["type"].as_i64() == Some(kind))
            .and_then(|i| text(&i[key]["text"]))
    };
    of(TEXT, "text_item")
        .or_else(|| of(VOICE, "voice_item"))
        .unwrap_or_default()
}

fn media(item: &Value) -> Option<Media> {
    let (media_type, key) = match item["type"].as_i64()? {
        2 => (MessageType::Photo, "image_item"),
        3 => (MessageType::Voice, "voice_item"),
        4 => (MessageType::Document, "file_item"),
        5 => (MessageType::Video, "video_item"),
        _ => return None,
    };
    let body = &item[key];
    // A voice note is SILK, WeChat's codec, which its bytes do not tell the store.
    let name = match media_type {
        MessageType::Voice => Some("voice.silk".to_owned()),
        _ => text(&body["file_name"]),
    };
    Some(Media {
        media_type,
        id: text(&body["media"]["encrypt_query_param"]),
        url: text(&body["media"]["full_url"]),
        name,
        extra: file_key(body, media_type == MessageType::Photo),
    })
}

/// What the fetcher is told of an item's key ([`Media::extra`]): its 32 hex characters,
/// [`BAD_KEY`] when the platform sent one that is not 16 bytes, `None` when it sent none.
/// An image's `image_item.aeskey` (hex) comes first, as Tencent's plugin reads it
/// (`src/media/media-download.ts`); else `media.aes_key`, base64 of either form.
fn file_key(body: &Value, image: bool) -> Option<String> {
    let parsed = match (image.then(|| text(&body["aeskey"])).flatten(), text(&body["media"]["aes_key"])) {
        (Some(hex), _) => Key::from_hex(&hex),
        (None, Some(b64)) => Key::from_aes_key(&b64),
        (None, None) => return None,
    };
    Some(parsed.map_or_else(|_| BAD_KEY.to_owned(), |k| k.hex()))
}

/// What [`file_key`] says of a key that is not one.
pub(super) const BAD_KEY: &str = "bad-key";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_peers_text_message() {
        let m = json!({
            "message_id": 7423456789012345678u64, "from_user_id": "o9cq80zL8rVhWxG4zz2ZeZ1M@im.wechat",
            "to_user_id": "bot@im.bot", "create_time_ms": 1700000000000u64, "message_type": 1,
            "message_state": 2, "context_token": "AARzJWAFAAABAAAAAAAp",
            "item_list": [{"type": 1, "text_item": {"text": "你好"}}]
        });
        let r = normalise("message", &m).unwrap();
        let peer = "o9cq80zL8rVhWxG4zz2ZeZ1M@im.wechat";
        assert_eq!(
            r.chat,
            Chat {
                id: peer.into(),
                chat_type: ChatType::Dm,
                name: None
            }
        );
        assert_eq!(
            r.sender,
            Author {
                id: peer.into(),
                name: None,
                vouched: true,
                is_bot: false
            }
        );
        assert_eq!(r.message_id.as_deref(), Some("7423456789012345678"));
        assert_eq!(
            (r.message_type, r.text.as_str()),
            (MessageType::Text, "你好")
        );
        assert_eq!(r.answer, Some((format!("user:{peer}"), None)));
    }

    #[test]
    fn an_image_and_a_room_message() {
        let m = json!({"message_id": 1, "from_user_id": "a@im.wechat", "room_id": "r1@chatroom",
            "item_list": [{"type": 2, "image_item": {"media": {"encrypt_query_param": "eqp", "aes_key": "k"}}}]});
        let r = normalise("message", &m).unwrap();
        assert_eq!(r.chat.chat_type, ChatType::Group);
        assert_eq!(r.message_type, MessageType::Photo);
        assert_eq!(r.media[0].id.as_deref(), Some("eqp"));
        // "k" is no key: the fetcher is told so, and says it.
        assert_eq!(r.media[0].extra.as_deref(), Some(BAD_KEY));
        assert_eq!(r.answer, None);
        assert!(normalise("unreadable", &m).is_none());
    }

    #[test]
    fn both_spellings_of_a_key_are_kept_and_a_voice_note_is_silk() {
        let hex = "00112233445566778899aabbccddeeff";
        let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
        let m = json!({"message_id": 2, "from_user_id": "a@im.wechat", "item_list": [
            {"type": 2, "image_item": {"aeskey": hex, "media": {"encrypt_query_param": "e1", "aes_key": b64(b"ignored")}}},
            {"type": 4, "file_item": {"file_name": "a.pdf", "media": {"encrypt_query_param": "e2", "aes_key": b64(hex.as_bytes()), "full_url": "https://novac2c.cdn.weixin.qq.com/c2c/download?x"}}},
            {"type": 3, "voice_item": {"text": "hello there", "media": {"encrypt_query_param": "e3"}}},
        ]});
        let r = normalise("message", &m).unwrap();
        let keys: Vec<_> = r.media.iter().map(|m| m.extra.as_deref()).collect();
        assert_eq!(keys, [Some(hex), Some(hex), None]);
        assert_eq!(r.media[1].name.as_deref(), Some("a.pdf"));
        assert!(r.media[1].url.is_some());
        assert_eq!(r.media[2].name.as_deref(), Some("voice.silk"));
        assert_eq!(r.text, "hello there", "the transcript is the text");
    }
}
