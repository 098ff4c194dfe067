//! Matrix's `m.room.message` as a normalised message (spec, "m.room.message" and the rich
//! replies and threading modules). Only message events are chat; state, membership and
//! encrypted events are not. The bot's own messages come back through `/sync` too: the
//! adapter stores them marked [`OWN`], and they are said as a bot's, so an agent can leave
//! them be.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, Author, Chat, ChatType, Media, MessageType, Said};

/// Set on a stored event whose sender is the adapter's own user id (namespaced, as the spec
/// asks of keys it does not define).
pub(super) const OWN: &str = "hermes_svc.own";

pub(super) fn normalise(kind: &str, e: &Value) -> Option<Said> {
    if kind != "m.room.message" {
        return None;
    }
    let room = text(&e["room_id"])?;
    let event_id = text(&e["event_id"]);
    let content = &e["content"];
    let relates = &content["m.relates_to"];
    let thread = (relates["rel_type"] == "m.thread")
        .then(|| text(&relates["event_id"]))
        .flatten();
    let message_type = match content["msgtype"].as_str() {
        Some("m.image") => MessageType::Photo,
        Some("m.video") => MessageType::Video,
        Some("m.audio") => MessageType::Audio,
        Some("m.file") => MessageType::Document,
        Some("m.location") => MessageType::Location,
        _ => MessageType::Text,
    };
    let media = match (message_type, text(&content["url"])) {
        (MessageType::Text | MessageType::Location, _) | (_, None) => Vec::new(),
        (media_type, url) => vec![Media {
            media_type,
            id: None,
            url,
            name: text(&content["body"]),
        }],
    };
    Some(Said {
        chat: Chat {
            id: room.clone(),
            chat_type: if thread.is_some() {
                ChatType::Thread
            } else {
                ChatType::Group
            },
            name: None,
        },
        sender: Author {
            id: text(&e["sender"])?,
            name: None,
            is_bot: e[OWN] == true,
            vouched: true,
        },
        thread_id: thread,
        message_id: event_id.clone(),
        reply_to_message_id: text(&relates["m.in_reply_to"]["event_id"]),
        message_type,
        text: without_fallback(content["body"].as_str().unwrap_or("")).to_owned(),
        media,
        // An answer is a rich reply to the message it answers.
        answer: Some((Target(room).to_string(), event_id)),
    })
}

/// The body less a reply's quoted fallback (`> <@user> …` lines and the blank line after
/// them), which older clients still send and MSC2781 says to strip when reading.
fn without_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body;
    }
    let mut rest = body;
    while let Some(line_end) = rest.strip_prefix("> ").map(|r| r.find('\n')) {
        match line_end {
            Some(i) => rest = &rest[2 + i + 1..],
            None => return "",
        }
    }
    rest.strip_prefix('\n').unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_is_answered_as_a_reply_and_the_bots_own_is_marked() {
        let e = json!({"room_id": "!r:hs", "event_id": "$2", "sender": "@alice:hs",
            "type": "m.room.message", "content": {"msgtype": "m.text",
            "body": "> <@bob:hs> earlier\n> more\n\nhi",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$1"}}}});
        let said = normalise("m.room.message", &e).unwrap();
        assert_eq!(said.text, "hi");
        assert_eq!(said.answer, Some(("room:!r:hs".into(), Some("$2".into()))));
        assert_eq!(said.reply_to_message_id.as_deref(), Some("$1"));
        assert!(!said.sender.is_bot);
        let mut own = e.clone();
        own[OWN] = json!(true);
        assert!(normalise("m.room.message", &own).unwrap().sender.is_bot);
        let thread = json!({"room_id": "!r:hs", "event_id": "$3", "sender": "@a:hs",
            "content": {"msgtype": "m.text", "body": "in thread",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}}});
        let said = normalise("m.room.message", &thread).unwrap();
        assert_eq!(said.thread_id.as_deref(), Some("$root"));
        assert!(normalise("m.room.encrypted", &e).is_none());
        assert!(normalise("m.room.message", &json!({"content": {}})).is_none());
    }

    #[test]
    fn fallbacks_are_stripped_only_where_they_are() {
        assert_eq!(without_fallback("plain"), "plain");
        assert_eq!(without_fallback("> only quote"), "");
        assert_eq!(without_fallback("> q\n\nanswer"), "answer");
        assert_eq!(without_fallback("> q\nanswer"), "answer");
        assert_eq!(without_fallback(">not a quote"), ">not a quote");
    }
}
