//! A Telegram message as Hermes's own Telegram adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/telegram/adapter.py`, `_effective_message_thread_id` and
//! `_build_message_event`): its session key is made of these, so a chat Hermes's adapter held
//! goes on behind the gateway only if they are the same.
//!
//! Two differ from the wing's reading. The thread: in a forum supergroup (`chat.is_forum`)
//! every message is in a topic, and one with no `message_thread_id` is in the General topic,
//! which Telegram addresses as thread 1; outside a forum only a topic message of a private
//! chat has one. The sender: Hermes takes `from`, the stand-in user Telegram puts beside a
//! `sender_chat` too, where the wing names the chat.

use serde_json::Value;

use crate::platform::message::{id, HermesSource, Said};

/// Telegram's id for a forum's General topic.
const GENERAL_TOPIC: &str = "1";

pub(super) fn source(said: &Said, kind: &str, update: &Value) -> HermesSource {
    let m = &update[kind];
    let chat = &m["chat"];
    let chat_type = chat["type"].as_str().unwrap_or("");
    let group = matches!(chat_type, "group" | "supergroup");
    let forum = group && chat["is_forum"] == true;
    let topic = m["is_topic_message"] == true;
    let thread_id = match id(&m["message_thread_id"]) {
        Some(raw) if forum || (group && topic) || (chat_type == "private" && topic) => Some(raw),
        Some(_) => None,
        None if forum => Some(GENERAL_TOPIC.to_owned()),
        None => None,
    };
    let mut ids = HermesSource::of(said);
    ids.thread_id = thread_id;
    ids.user_id = match id(&m["from"]["id"]) {
        Some(user) => Some(user),
        None if matches!(said.chat.chat_type.as_str(), "dm" | "channel") => {
            Some(said.chat.id.clone())
        }
        None => None,
    };
    ids
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ids(update: Value) -> HermesSource {
        let said = super::super::normalise::normalise("message", &update).unwrap();
        source(&said, "message", &update)
    }

    #[test]
    fn a_forum_topic_and_its_general_topic_are_threads_a_reply_is_not() {
        let forum = json!({"id": -1001, "type": "supergroup", "title": "f", "is_forum": true});
        let from = json!({"id": 7, "first_name": "a"});
        let general = ids(json!({"message": {"message_id": 1, "chat": forum, "from": from}}));
        assert_eq!(general.thread_id.as_deref(), Some("1"));
        assert_eq!(general.chat_type, "group");
        assert_eq!(general.user_id.as_deref(), Some("7"));
        let topic = ids(json!({"message": {"message_id": 2, "chat": forum, "from": from,
            "message_thread_id": 5, "is_topic_message": true}}));
        assert_eq!(topic.thread_id.as_deref(), Some("5"));
        let group = json!({"id": -1002, "type": "supergroup", "title": "g"});
        let reply = ids(json!({"message": {"message_id": 3, "chat": group, "from": from,
            "message_thread_id": 2}}));
        assert_eq!(reply.thread_id, None);
        assert_eq!(reply.chat_id, "-1002");
    }

    #[test]
    fn a_post_on_behalf_of_a_chat_is_from_its_stand_in_user() {
        let group = json!({"id": -1002, "type": "supergroup", "title": "g"});
        let anon = ids(json!({"message": {"message_id": 1, "chat": group,
            "from": {"id": 1087968824, "is_bot": true, "first_name": "Group"},
            "sender_chat": group}}));
        assert_eq!(anon.user_id.as_deref(), Some("1087968824"));
        let channel = json!({"id": -1003, "type": "channel", "title": "c"});
        let post = ids(json!({"message": {"message_id": 1, "chat": channel}}));
        assert_eq!(post.chat_type, "channel");
        assert_eq!(post.user_id.as_deref(), Some("-1003"));
        let dm = ids(json!({"message": {"message_id": 1,
            "chat": {"id": 42, "type": "private", "first_name": "a"},
            "from": {"id": 42, "first_name": "a"}}}));
        assert_eq!((dm.chat_id.as_str(), dm.chat_type), ("42", "dm"));
    }
}
