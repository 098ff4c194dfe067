//! Discord's `MESSAGE_CREATE` as a normalised message (discord.com/developers/docs,
//! "Message Object"): a message without `guild_id` is a direct message; one in a guild is in a
//! channel (a thread is a channel of its own there, with its own id, and the event does not say
//! which it is). The bot's own posts come back as events too, with `author.bot` set.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{
    id, text, type_of, Author, Chat, ChatType, Media, MessageType, Said,
};

pub(super) fn normalise(kind: &str, d: &Value) -> Option<Said> {
    if kind != "MESSAGE_CREATE" {
        return None;
    }
    let channel = id(&d["channel_id"])?;
    let author = &d["author"];
    let mut media: Vec<Media> = d["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(attachment)
        .collect();
    media.extend(
        d["sticker_items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| Media {
                media_type: MessageType::Sticker,
                id: id(&s["id"]),
                url: None,
                name: text(&s["name"]),
            }),
    );
    let message_id = id(&d["id"]);
    Some(Said {
        chat: Chat {
            id: channel.clone(),
            chat_type: if d["guild_id"].is_null() {
                ChatType::Dm
            } else {
                ChatType::Channel
            },
            name: None,
        },
        sender: Author {
            id: id(&author["id"])?,
            name: text(&d["member"]["nick"])
                .or_else(|| text(&author["global_name"]))
                .or_else(|| text(&author["username"])),
            is_bot: author["bot"].as_bool().unwrap_or(false),
            vouched: true,
        },
        thread_id: None,
        reply_to_message_id: id(&d["message_reference"]["message_id"]),
        message_type: type_of(&media),
        text: d["content"].as_str().unwrap_or("").to_owned(),
        media,
        answer: Some((Target(channel).to_string(), message_id.clone())),
        message_id,
    })
}

fn attachment(a: &Value) -> Media {
    let content_type = a["content_type"].as_str().unwrap_or("");
    let media_type = match content_type.split('/').next() {
        Some("image") => MessageType::Photo,
        Some("video") => MessageType::Video,
        Some("audio") if a["duration_secs"].is_number() => MessageType::Voice,
        Some("audio") => MessageType::Audio,
        _ => MessageType::Document,
    };
    Media {
        media_type,
        id: id(&a["id"]),
        url: text(&a["url"]),
        name: text(&a["filename"]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_guild_reply_with_an_attachment() {
        let d = json!({
            "id": "1100000000000000001", "channel_id": "1000000000000000001",
            "guild_id": "900000000000000001",
            "author": {"id": "800000000000000001", "username": "ann", "global_name": "Ann", "bot": false},
            "member": {"nick": null},
            "content": "see this",
            "attachments": [{"id": "77", "filename": "plan.pdf", "content_type": "application/pdf",
                             "url": "https://cdn.discordapp.com/attachments/1/77/plan.pdf"}],
            "message_reference": {"message_id": "1099999999999999999", "channel_id": "1000000000000000001"},
            "type": 19
        });
        let m = normalise("MESSAGE_CREATE", &d).unwrap();
        assert_eq!(
            m.chat,
            Chat {
                id: "1000000000000000001".into(),
                chat_type: ChatType::Channel,
                name: None
            }
        );
        assert_eq!(
            m.sender,
            Author {
                id: "800000000000000001".into(),
                name: Some("Ann".into()),
                vouched: true,
                is_bot: false
            }
        );
        assert_eq!(m.message_id.as_deref(), Some("1100000000000000001"));
        assert_eq!(
            m.reply_to_message_id.as_deref(),
            Some("1099999999999999999")
        );
        assert_eq!(m.text, "see this");
        assert_eq!(m.message_type, MessageType::Document);
        assert_eq!(m.media[0].name.as_deref(), Some("plan.pdf"));
        assert_eq!(
            m.answer,
            Some((
                "channel:1000000000000000001".into(),
                Some("1100000000000000001".into())
            ))
        );
    }

    #[test]
    fn a_direct_message_and_the_bots_own_post() {
        let d = json!({"id": "5", "channel_id": "6", "author": {"id": "7", "username": "me", "bot": true},
                       "content": "hi", "attachments": []});
        let m = normalise("MESSAGE_CREATE", &d).unwrap();
        assert_eq!(m.chat.chat_type, ChatType::Dm);
        assert!(m.sender.is_bot);
        assert!(normalise("GUILD_MEMBER_ADD", &d).is_none());
        assert!(normalise("MESSAGE_REACTION_ADD", &d).is_none());
    }
}
