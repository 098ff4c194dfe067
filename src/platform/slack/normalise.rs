//! Slack's `message` event as a normalised message (docs.slack.dev, "message event"): a
//! plain message has no `subtype`; edits, deletions and joins have one and are not chat.
//! The bot's own posts come back as events with its `bot_id`, and so does any other app's
//! (`bot_message`): they are marked as a bot's, so an agent can leave them be.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, Author, Chat, ChatType, MessageType, Said};

/// Subtypes that are still someone saying something in the conversation.
const SAID: &[&str] = &["bot_message", "me_message", "thread_broadcast", "file_share"];

pub(super) fn normalise(kind: &str, e: &Value) -> Option<Said> {
    if kind != "message" {
        return None;
    }
    if let Some(subtype) = e["subtype"].as_str() {
        if !SAID.contains(&subtype) {
            return None;
        }
    }
    let channel = text(&e["channel"])?;
    let ts = text(&e["ts"]);
    let thread = text(&e["thread_ts"]);
    let is_bot = !e["bot_id"].is_null() || e["subtype"] == "bot_message";
    let sender = text(&e["user"]).or_else(|| text(&e["bot_id"]))?;
    Some(Said {
        chat: Chat {
            id: channel.clone(),
            chat_type: match e["channel_type"].as_str() {
                Some("im") => ChatType::Dm,
                Some("mpim" | "group") => ChatType::Group,
                _ => ChatType::Channel,
            },
            name: None,
        },
        sender: Author {
            id: sender,
            name: text(&e["username"]),
            is_bot,
            vouched: true,
        },
        thread_id: thread.clone(),
        message_id: ts.clone(),
        reply_to_message_id: thread.clone().filter(|t| Some(t) != ts.as_ref()),
        message_type: MessageType::Text,
        text: e["text"].as_str().unwrap_or("").to_owned(),
        media: Vec::new(),
        // An answer goes where the message was said: into its thread when it is in one.
        answer: Some((Target(channel).to_string(), thread)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_in_a_thread_is_answered_in_it_and_a_bots_own_post_is_marked() {
        let e = json!({"type": "message", "channel": "C1", "channel_type": "channel",
            "user": "U1", "text": "hi", "ts": "2.0", "thread_ts": "1.0"});
        let said = normalise("message", &e).unwrap();
        assert_eq!(said.text, "hi");
        assert_eq!(said.answer, Some(("channel:C1".into(), Some("1.0".into()))));
        assert_eq!(said.reply_to_message_id.as_deref(), Some("1.0"));
        assert!(!said.sender.is_bot);
        let own = json!({"type": "message", "channel": "C1", "user": "UBOT", "bot_id": "B1",
            "text": "answer", "ts": "3.0"});
        let said = normalise("message", &own).unwrap();
        assert!(said.sender.is_bot);
        assert_eq!(said.answer, Some(("channel:C1".into(), None)));
        let edited = json!({"type": "message", "subtype": "message_changed", "channel": "C1"});
        assert!(normalise("message", &edited).is_none());
        assert!(normalise("app_mention", &e).is_none());
    }
}
