//! Slack's `message` event as a normalised message (docs.slack.dev, "message event"): a
//! plain message has no `subtype`; edits, deletions and joins have one and are not chat.
//! The bot's own posts come back as events with its `bot_id`, and so does any other app's
//! (`bot_message`): they are marked as a bot's, so an agent can leave them be. A `bot_message`
//! without a `user` was posted by an integration under whatever `username` it chose: Slack
//! vouches for no account behind it.
//!
//! A message addresses the bot ([`addressed`]) when its text holds Slack's mention markup for
//! the bot's user id, `<@U…>` or `<@U…|name>` (Slack's own encoding of a mention: a `<` typed
//! by a person reaches the API escaped as `&lt;`, "Formatting text for app surfaces"), or when
//! it is a reply in a thread the bot started (`parent_user_id`). An `app_mention` event is
//! Slack's word that the app was mentioned.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, Author, Chat, ChatType, MessageType, Said};
use crate::platform::BotId;

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
            vouched: !(e["subtype"] == "bot_message" && text(&e["user"]).is_none()),
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

/// Whether event `e` of type `kind` mentions `bot` (its user id) or replies in its thread.
pub(super) fn addressed(kind: &str, e: &Value, bot: &BotId) -> bool {
    if kind == "app_mention" {
        return true;
    }
    if kind != "message" {
        return false;
    }
    let Some(bot_id) = bot.id.as_deref() else {
        return false;
    };
    text(&e["parent_user_id"]).as_deref() == Some(bot_id)
        || user_mentions(e["text"].as_str().unwrap_or("")).any(|id| id == bot_id)
}

/// The user ids of the `<@U…>` and `<@U…|name>` mentions in `text`.
fn user_mentions(text: &str) -> impl Iterator<Item = &str> {
    text.split("<@").skip(1).filter_map(|rest| {
        let inside = &rest[..rest.find('>')?];
        let id = inside.split_once('|').map_or(inside, |(id, _)| id);
        (!id.is_empty()).then_some(id)
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

    #[test]
    fn an_integrations_post_without_a_user_is_not_vouched_for() {
        let hook = json!({"type": "message", "subtype": "bot_message", "channel": "C1",
            "bot_id": "B2", "username": "Ann (really)", "text": "deploy", "ts": "4.0"});
        let said = normalise("message", &hook).unwrap();
        assert_eq!((said.sender.id.as_str(), said.sender.vouched), ("B2", false));
        let app = json!({"type": "message", "subtype": "bot_message", "channel": "C1",
            "bot_id": "B3", "user": "U3", "text": "hi", "ts": "5.0"});
        assert!(normalise("message", &app).unwrap().sender.vouched);
        let person = json!({"type": "message", "channel": "C1", "user": "U1", "text": "hi",
            "ts": "6.0"});
        assert!(normalise("message", &person).unwrap().sender.vouched);
    }

    fn bot() -> BotId {
        BotId {
            id: Some("U0LAN0Z89".into()),
            handle: Some("hermes".into()),
        }
    }

    fn said(text: &str) -> Value {
        json!({"type": "message", "channel": "C123ABC456", "channel_type": "channel",
            "user": "U061F7AUR", "text": text, "ts": "1515449522.000016"})
    }

    #[test]
    fn slacks_mention_markup_for_the_bots_user_id_addresses_it() {
        assert!(addressed("message", &said("<@U0LAN0Z89> is it everything a river should be?"), &bot()));
        assert!(addressed("message", &said("so, <@U0LAN0Z89|hermes>?"), &bot()));
        assert!(addressed("message", &said("<@U1> and <@U0LAN0Z89>"), &bot()));
        // The docs' app_mention event is one, whatever its text.
        assert!(addressed("app_mention", &said("<@U0LAN0Z89> hi"), &bot()));
    }

    #[test]
    fn the_bots_name_or_id_as_plain_text_is_no_mention() {
        for text in ["hermes, look", "@hermes look", "U0LAN0Z89", "&lt;@U0LAN0Z89&gt;", "<@U0LAN0Z89"] {
            assert!(!addressed("message", &said(text), &bot()), "{text}");
        }
    }

    #[test]
    fn a_mention_of_someone_else_or_a_look_alike_is_not_the_bot() {
        for text in ["<@U061F7AUR> look", "<@U0LAN0Z890>", "<@U0LAN0Z8>", "<@W0LAN0Z89|hermes>",
                     "<!here> all", "<#C0LAN0Z89>"] {
            assert!(!addressed("message", &said(text), &bot()), "{text}");
        }
        assert!(!addressed("message", &said("<@U0LAN0Z89>"), &BotId::default()));
        assert!(!addressed("reaction_added", &said("<@U0LAN0Z89>"), &bot()));
    }

    #[test]
    fn a_reply_in_a_thread_the_bot_started_addresses_it() {
        let mut reply = said("thanks");
        reply["thread_ts"] = json!("1515449500.000001");
        reply["parent_user_id"] = json!("U0LAN0Z89");
        assert!(addressed("message", &reply, &bot()));
        reply["parent_user_id"] = json!("U061F7AUR");
        assert!(!addressed("message", &reply, &bot()));
    }
}
