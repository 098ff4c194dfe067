//! A robot message (the Stream topic `/v1.0/im/bot/messages/get`) as a normalised message.
//! Its fields, as the SDKs' `ChatbotMessage` reads them: `conversationType` `"1"` (1:1) or
//! `"2"` (group), `conversationId`, `conversationTitle`, `senderStaffId` (the staff id the
//! robot API sends 1:1 messages to; absent for people outside the organisation), `senderId`
//! (an encrypted per-robot id), `senderNick`, `msgId`, `msgtype` with its body (`text.content`,
//! `content.richText`), `isInAtList`.
//!
//! An answer goes where the message was said: a group by its conversation id, a 1:1 chat to
//! the sender's staff id. The session webhook a message carries is not used: it is a URL the
//! event names, and the gateway posts only to the API base it was configured with.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, Author, Chat, ChatType, MessageType, Said};

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
        message_type: MessageType::Text,
        text: words(m),
        media: vec![],
        answer: answer.map(|a| (a, None)),
    })
}

/// The text of a message: `text.content`, a rich text's text parts, or a note of the kind
/// of message that has none (a picture, a voice note, a file: not fetched).
fn words(m: &Value) -> String {
    match m["msgtype"].as_str() {
        Some("text") | None => m["text"]["content"].as_str().unwrap_or("").trim().to_owned(),
        Some("richText") => m["content"]["richText"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        Some(other) => format!("[a DingTalk {} message]", crate::safe_text::clip(other, 32)),
    }
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
        // Without a staff id there is no 1:1 target, and the sender is its senderId.
        let outsider = json!({"conversationId": "cidD", "conversationType": "1", "senderId": "$:x"});
        let said = normalise(KIND, &outsider).unwrap();
        assert_eq!((said.sender.id.as_str(), said.answer), ("$:x", None));
        assert!(normalise("other", &g).is_none());
        assert!(normalise(KIND, &json!({"conversationType": "2"})).is_none());
    }
}
