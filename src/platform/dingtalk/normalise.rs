//! A robot message (the Stream topic `/v1.0/im/bot/messages/get`) as a normalised message.
//! Its fields, as the SDKs' `ChatbotMessage` reads them: `conversationType` `"1"` (1:1) or
//! `"2"` (group), `conversationId`, `conversationTitle`, `senderStaffId` (the staff id the
//! robot API sends 1:1 messages to; absent for people outside the organisation), `senderId`
//! (an encrypted per-robot id), `senderNick`, `msgId`, `msgtype` with its body (`text.content`,
//! `content.richText`, `content.downloadCode` of a picture, file, audio or video), `isInAtList`.
//! A file's media id is its `downloadCode`, what the fetcher takes.
//!
//! An answer goes where the message was said: a group by its conversation id, a 1:1 chat to
//! the sender's staff id. The session webhook a message carries is not used: it is a URL the
//! event names, and the gateway posts only to the API base it was configured with.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, Author, Chat, ChatType, Media, MessageType, Said};

/// The kind the spool stores robot messages under.
pub(crate) const KIND: &str = "chatbot_message";

pub(super) fn normalise(kind: &str, m: &Value) -> Option<Said> {
    if kind != KIND {
        return None;
    }
    let conversation = text(&m["conversationId"])?;
    let group = m["conversationType"] == "2";
    let staff = text(&m["senderStaffId"]);
    let sender = staff.clone().or_else(|| text(&m["senderId"]))?;
    let answer = if group {
        Some(Target::Group(conversation.clone()).to_string())
    } else {
        staff.map(|s| Target::User(s).to_string())
    };
    let msg_id = text(&m["msgId"]);
    let (words, media) = read(m);
    Some(Said {
        chat: Chat {
            id: conversation,
            chat_type: if group { ChatType::Group } else { ChatType::Dm },
            name: text(&m["conversationTitle"]).filter(|_| group),
        },
        sender: Author {
            id: sender,
            name: text(&m["senderNick"]),
            is_bot: false,
            // DingTalk signs the Stream connection, not the message; the sender is the
            // platform's, as it says.
            vouched: true,
        },
        thread_id: None,
        message_id: msg_id,
        reply_to_message_id: None,
        message_type: media.first().map_or(MessageType::Text, |f| f.media_type),
        text: words,
        media,
        answer: answer.map(|a| (a, None)),
    })
}

/// The text and the files of a message, by its `msgtype`: `text.content`; a rich text's text
/// parts and its pictures; a picture, a file (`fileName`), a voice note (`audio`, with
/// DingTalk's transcript `recognition` as its text) or a video, each by its `content`'s
/// `downloadCode`, which is what the fetcher exchanges for a link (`fetch.rs`); or a note of
/// a kind of message the gateway does not read.
fn read(m: &Value) -> (String, Vec<Media>) {
    let c = &m["content"];
    let one = |media_type| media(media_type, c).into_iter().collect();
    match m["msgtype"].as_str() {
        Some("text") | None => (
            m["text"]["content"].as_str().unwrap_or("").trim().to_owned(),
            vec![],
        ),
        Some("richText") => {
            let parts = c["richText"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            let words = parts.iter().filter_map(|p| p["text"].as_str());
            let files = parts.iter().filter_map(|p| {
                let kind = match p["type"].as_str() {
                    Some("picture") | None => MessageType::Photo,
                    Some("video") => MessageType::Video,
                    Some("voice" | "audio") => MessageType::Voice,
                    Some(_) => MessageType::Document,
                };
                media(kind, p)
            });
            (words.collect::<Vec<_>>().join(""), files.collect())
        }
        Some("picture") => (String::new(), one(MessageType::Photo)),
        Some("file") => (String::new(), one(MessageType::Document)),
        Some("audio") => (
            c["recognition"].as_str().unwrap_or("").trim().to_owned(),
            one(MessageType::Voice),
        ),
        Some("video") => (String::new(), one(MessageType::Video)),
        Some(other) => (
            format!("[a DingTalk {} message]", crate::safe_text::clip(other, 32)),
            vec![],
        ),
    }
}

/// The file `c` names by its download code (a picture may carry only `pictureDownloadCode`).
fn media(media_type: MessageType, c: &Value) -> Option<Media> {
    let id = text(&c["downloadCode"]).or_else(|| text(&c["pictureDownloadCode"]))?;
    Some(Media {
        media_type,
        id: Some(id),
        url: None,
        name: text(&c["fileName"]),
        extra: None,
    })
}

/// DingTalk's own word that the robot was @-mentioned; a 1:1 message is always to it.
pub(super) fn addressed(kind: &str, m: &Value) -> bool {
    kind == KIND && (m["isInAtList"] == true || m["conversationType"] == "1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_group_message_answers_the_group_and_a_dm_the_staff_id() {
        let g = json!({"conversationId": "cidG==", "conversationType": "2", "senderStaffId": "s1",
            "senderId": "$:LWCP:x", "senderNick": "Ann", "msgId": "msgA", "msgtype": "text",
            "text": {"content": " hi "}, "isInAtList": true, "conversationTitle": "ops"});
        let said = normalise(KIND, &g).unwrap();
        assert_eq!(said.answer.as_ref().unwrap().0, "group:cidG==");
        assert_eq!((said.sender.id.as_str(), said.text.as_str()), ("s1", "hi"));
        assert_eq!(said.chat.chat_type, ChatType::Group);
        assert!(addressed(KIND, &g));
        let d = json!({"conversationId": "cidD", "conversationType": "1", "senderId": "$:x",
            "senderStaffId": "s2", "msgtype": "richText",
            "content": {"richText": [{"text": "a"}, {"downloadCode": "d"}, {"text": "b"}]}});
        let said = normalise(KIND, &d).unwrap();
        assert_eq!(said.answer.as_ref().unwrap().0, "user:s2");
        assert_eq!(said.text, "ab");
        assert_eq!(said.message_type, MessageType::Photo);
        assert_eq!(said.media[0].id.as_deref(), Some("d"));
        // Without a staff id there is no 1:1 target, and the sender is its senderId.
        let outsider = json!({"conversationId": "cidD", "conversationType": "1", "senderId": "$:x"});
        let said = normalise(KIND, &outsider).unwrap();
        assert_eq!((said.sender.id.as_str(), said.answer), ("$:x", None));
        assert!(normalise("other", &g).is_none());
        assert!(normalise(KIND, &json!({"conversationType": "2"})).is_none());
    }

    #[test]
    fn a_file_s_media_id_is_its_download_code() {
        let base = |msgtype: &str, content: Value| {
            json!({"conversationId": "cidD", "conversationType": "1", "senderStaffId": "s2",
                "msgtype": msgtype, "content": content})
        };
        let said = |v: Value| normalise(KIND, &v).unwrap();
        let p = said(base("picture", json!({"downloadCode": "dc+1/=", "pictureDownloadCode": "p"})));
        assert_eq!((p.message_type, p.text.as_str()), (MessageType::Photo, ""));
        assert_eq!(p.media[0].id.as_deref(), Some("dc+1/="));
        let only_picture_code = said(base("picture", json!({"pictureDownloadCode": "p"})));
        assert_eq!(only_picture_code.media[0].id.as_deref(), Some("p"));
        let f = said(base("file", json!({"downloadCode": "f1", "fileName": "a.pdf", "spaceId": "1"})));
        assert_eq!(f.message_type, MessageType::Document);
        assert_eq!(f.media[0].name.as_deref(), Some("a.pdf"));
        let a = said(base("audio", json!({"downloadCode": "a1", "recognition": " 你好 "})));
        assert_eq!((a.message_type, a.text.as_str()), (MessageType::Voice, "你好"));
        let v = said(base("video", json!({"downloadCode": "v1", "videoType": "mp4"})));
        assert_eq!(v.message_type, MessageType::Video);
        // A picture without a code has nothing to fetch, and says nothing.
        let none = said(base("picture", json!({})));
        assert!(none.media.is_empty() && none.message_type == MessageType::Text);
        let card = said(base("interactiveCard", json!({})));
        assert_eq!(card.text, "[a DingTalk interactiveCard message]");
    }
}
