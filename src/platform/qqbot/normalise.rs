//! QQ's message events as normalised messages. The shapes are QQ's (bot.q.qq.com/wiki,
//! "事件" and "消息对象"): a direct message (`C2C_MESSAGE_CREATE`) names its sender by
//! `author.user_openid`, a group @-message (`GROUP_AT_MESSAGE_CREATE`) by
//! `author.member_openid` and the group by `group_openid`; guild messages (`AT_MESSAGE_CREATE`,
//! `MESSAGE_CREATE`) carry the channel and a named author, and a guild direct message
//! (`DIRECT_MESSAGE_CREATE`) is answered through its `guild_id`. Every answer replies to the
//! message, which is what makes it a passive (free) reply on QQ.
//!
//! Whether a message addresses the bot ([`addressed`]) is mostly its event type: QQ sends
//! `GROUP_AT_MESSAGE_CREATE` and `AT_MESSAGE_CREATE` only for a message that @-mentions the bot
//! ("用户发送消息，并且@当前机器人"). `MESSAGE_CREATE` is every message of a private-domain guild
//! ("代表频道内的全部消息，而不只是 at 机器人的消息"): it addresses the bot when its `mentions`
//! ("消息中@的人") hold the bot's user, READY's `user.id`. `GROUP_MESSAGE_CREATE`, every
//! message of a group, names the mentioned by ids of that group that no documented field ties
//! to READY's id: it is never taken for a mention (the @-message itself comes as
//! `GROUP_AT_MESSAGE_CREATE`).

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{
    id, text, type_of, Author, Chat, ChatType, Media, MessageType, Said,
};
use crate::platform::BotId;

pub(super) fn normalise(kind: &str, d: &Value) -> Option<Said> {
    let (chat_type, chat_id, target, sender_id) = match kind {
        "C2C_MESSAGE_CREATE" => {
            let user = id(&d["author"]["user_openid"]).or_else(|| id(&d["author"]["id"]))?;
            (ChatType::Dm, user.clone(), Target::User(user.clone()), user)
        }
        "GROUP_AT_MESSAGE_CREATE" | "GROUP_MESSAGE_CREATE" => {
            let group = id(&d["group_openid"]).or_else(|| id(&d["group_id"]))?;
            let member = id(&d["author"]["member_openid"]).or_else(|| id(&d["author"]["id"]))?;
            (ChatType::Group, group.clone(), Target::Group(group), member)
        }
        "AT_MESSAGE_CREATE" | "MESSAGE_CREATE" => {
            let channel = id(&d["channel_id"])?;
            let author = id(&d["author"]["id"])?;
            (
                ChatType::Channel,
                channel.clone(),
                Target::Channel(channel),
                author,
            )
        }
        "DIRECT_MESSAGE_CREATE" => {
            let guild = id(&d["guild_id"])?;
            let author = id(&d["author"]["id"])?;
            (ChatType::Dm, guild.clone(), Target::Dm(guild), author)
        }
        _ => return None,
    };
    let message_id = id(&d["id"]);
    let media: Vec<Media> = d["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(attachment)
        .collect();
    let name = text(&d["member"]["nick"]).or_else(|| text(&d["author"]["username"]));
    Some(Said {
        chat: Chat {
            id: chat_id,
            chat_type,
            name: None,
        },
        sender: Author {
            id: sender_id,
            name,
            is_bot: d["author"]["bot"].as_bool().unwrap_or(false),
            vouched: true,
        },
        thread_id: None,
        reply_to_message_id: id(&d["message_reference"]["message_id"]),
        message_type: type_of(&media),
        text: without_mentions(d["content"].as_str().unwrap_or("")),
        media,
        answer: Some((target.to_string(), message_id.clone())),
        message_id,
    })
}

/// Whether message event `d` of type `kind` @-mentions `bot`.
pub(super) fn addressed(kind: &str, d: &Value, bot: &BotId) -> bool {
    match kind {
        "GROUP_AT_MESSAGE_CREATE" | "AT_MESSAGE_CREATE" => true,
        "MESSAGE_CREATE" => bot.id.as_deref().is_some_and(|bot_id| {
            d["mentions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|user| id(&user["id"]).as_deref() == Some(bot_id))
        }),
        _ => false,
    }
}

/// QQ's attachment: a `content_type` (`image/jpeg`, `voice`, `video/mp4`, `file`), a URL and
/// a file name.
fn attachment(a: &Value) -> Media {
    let content_type = a["content_type"].as_str().unwrap_or("");
    let media_type = if content_type.starts_with("image") {
        MessageType::Photo
    } else if content_type.starts_with("video") {
        MessageType::Video
    } else if content_type.starts_with("voice") || content_type.starts_with("audio") {
        MessageType::Voice
    } else {
        MessageType::Document
    };
    Media {
        media_type,
        id: None,
        url: text(&a["url"]),
        name: text(&a["filename"]).or_else(|| text(&a["content_type"])),
        extra: None,
    }
}

/// The text without the bot's @-mention: a group @-message comes with the mention removed and
/// the space before it left, a guild one with `<@!ID>` in place.
fn without_mentions(content: &str) -> String {
    let mut rest = content.trim_start();
    while let Some(after) = rest.strip_prefix("<@") {
        match after.find('>') {
            Some(end) => rest = after[end + 1..].trim_start(),
            None => break,
        }
    }
    rest.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_group_at_message_from_the_docs() {
        let d = json!({
            "author": {"member_openid": "E4F4AEA33253A2797FB897C50B81D7ED"},
            "content": " 123",
            "group_openid": "C9F778FE6ADF9D1D1DBE395BF744A33A",
            "id": "ROBOT1.0_veoihefFB.Ii9ehM0gNDA-yWnhOtJtUGDN9kz0mPbOG0C6gd2JP4Qp3kj8Cv7BREtYfTSXbBCgpdk2UMzS1Ng!!",
            "timestamp": "2023-11-06T13:37:18+08:00"
        });
        let m = normalise("GROUP_AT_MESSAGE_CREATE", &d).unwrap();
        assert_eq!(m.chat.chat_type, ChatType::Group);
        assert_eq!(m.chat.id, "C9F778FE6ADF9D1D1DBE395BF744A33A");
        assert_eq!(m.sender.id, "E4F4AEA33253A2797FB897C50B81D7ED");
        assert_eq!(m.sender.name, None);
        assert!(!m.sender.is_bot);
        assert_eq!(m.text, "123");
        assert_eq!(m.message_type, MessageType::Text);
        let id = d["id"].as_str().unwrap();
        assert_eq!(m.message_id.as_deref(), Some(id));
        assert_eq!(
            m.answer,
            Some((
                "group:C9F778FE6ADF9D1D1DBE395BF744A33A".into(),
                Some(id.into())
            ))
        );
    }

    #[test]
    fn a_c2c_message_with_a_picture() {
        let d = json!({
            "author": {"user_openid": "U1"},
            "content": "look",
            "id": "ROBOT1.0_m1",
            "attachments": [{"content_type": "image/jpeg", "filename": "a.jpg",
                             "url": "https://multimedia.nt.qq.com.cn/download?x=1"}]
        });
        let m = normalise("C2C_MESSAGE_CREATE", &d).unwrap();
        assert_eq!((m.chat.chat_type, m.chat.id.as_str()), (ChatType::Dm, "U1"));
        assert_eq!(m.message_type, MessageType::Photo);
        assert_eq!(
            m.media[0].url.as_deref(),
            Some("https://multimedia.nt.qq.com.cn/download?x=1")
        );
        assert_eq!(m.answer.unwrap().0, "user:U1");
    }

    #[test]
    fn guild_messages_name_their_author_and_lose_the_mention() {
        let d = json!({
            "author": {"bot": false, "id": "1234", "username": "ann"},
            "channel_id": "100", "guild_id": "200", "content": "<@!999> hello there ",
            "id": "08e0", "member": {"nick": "Ann"},
            "message_reference": {"message_id": "07aa"}
        });
        let m = normalise("AT_MESSAGE_CREATE", &d).unwrap();
        assert_eq!(
            (m.chat.chat_type, m.chat.id.as_str()),
            (ChatType::Channel, "100")
        );
        assert_eq!(m.sender.name.as_deref(), Some("Ann"));
        assert_eq!(m.text, "hello there");
        assert_eq!(m.reply_to_message_id.as_deref(), Some("07aa"));
        assert_eq!(
            m.answer.unwrap(),
            ("channel:100".into(), Some("08e0".into()))
        );
        let dm = normalise("DIRECT_MESSAGE_CREATE", &d).unwrap();
        assert_eq!(dm.answer.unwrap().0, "dm:200");
    }

    fn bot() -> BotId {
        BotId {
            id: Some("6158788878435714165".into()),
            handle: Some("群pro测试机器人".into()),
        }
    }

    #[test]
    fn an_at_message_addresses_the_bot_by_its_event_type() {
        let group = json!({"author": {"member_openid": "E4F4"}, "content": " 123",
            "group_openid": "C9F7", "id": "ROBOT1.0_x", "timestamp": "2023-11-06T13:37:18+08:00"});
        assert!(addressed("GROUP_AT_MESSAGE_CREATE", &group, &bot()));
        // Known or not, the bot is who QQ sent an @-message to.
        assert!(addressed("GROUP_AT_MESSAGE_CREATE", &group, &BotId::default()));
        let guild = json!({"author": {"bot": false, "id": "1234", "username": "abc"},
            "channel_id": "100010", "content": "<@!6158788878435714165> ndnnd",
            "guild_id": "18700000000001", "id": "0812345677890abcdef"});
        assert!(addressed("AT_MESSAGE_CREATE", &guild, &bot()));
        assert!(!addressed("C2C_MESSAGE_CREATE", &group, &bot()));
        assert!(!addressed("DIRECT_MESSAGE_CREATE", &guild, &bot()));
    }

    #[test]
    fn a_guild_message_addresses_the_bot_only_when_its_mentions_hold_it() {
        let message = |content: &str, mentions: Value| {
            json!({"author": {"bot": false, "id": "1234", "username": "abc"},
                "channel_id": "100010", "guild_id": "18700000000001", "id": "08e0",
                "content": content, "mentions": mentions})
        };
        let me = json!([{"id": "6158788878435714165", "username": "群pro测试机器人", "bot": true}]);
        assert!(addressed(
            "MESSAGE_CREATE",
            &message("<@!6158788878435714165> hi", me),
            &bot()
        ));
        // The bot's id or name in the text, without a mention, is not one.
        let plain = message("<@!6158788878435714165> 群pro测试机器人", json!([]));
        assert!(!addressed("MESSAGE_CREATE", &plain, &bot()));
        let no_list = json!({"author": {"id": "1234"}, "channel_id": "1",
            "content": "<@!6158788878435714165>", "id": "1"});
        assert!(!addressed("MESSAGE_CREATE", &no_list, &bot()));
        let other = json!([{"id": "6158788878435714166", "username": "群pro测试机器人", "bot": true}]);
        assert!(!addressed(
            "MESSAGE_CREATE",
            &message("<@!6158788878435714166> hi", other),
            &bot()
        ));
        let me = json!([{"id": "6158788878435714165"}]);
        assert!(!addressed("MESSAGE_CREATE", &message("x", me.clone()), &BotId::default()));
        assert!(!addressed("GROUP_MESSAGE_CREATE", &message("x", me), &bot()));
    }

    #[test]
    fn other_events_are_not_messages() {
        assert!(normalise("GROUP_ADD_ROBOT", &json!({"group_openid": "G"})).is_none());
        assert!(normalise("READY", &json!({})).is_none());
        // A message without the ids to answer it is not one either.
        assert!(normalise("C2C_MESSAGE_CREATE", &json!({"content": "x"})).is_none());
    }
}
