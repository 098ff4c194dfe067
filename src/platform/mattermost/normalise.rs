//! A stored `posted` event as a normalised message (api.mattermost.com, WebSocket `posted`;
//! the `Post` model of `server/public/model/post.go`). A post with a `type` is the server's
//! own (`system_join_channel`, `system_header_change`, ...), not someone saying something.
//! Channel types: `D` a direct message, `G` a group DM, `O` and `P` open and private
//! channels. Replies live in threads: `root_id` names the thread's first post.
//!
//! The bot's own posts come back as events (`own`), and so do other bots' and webhooks'
//! (`props.from_bot`, `props.from_webhook`): all are marked as a bot's. A webhook posts under
//! whatever `override_username` it chose, so the server vouches for no account behind it.
//!
//! A post addresses the bot ([`addressed`]) when the event's `mentions` (the server's list of
//! the user ids the post mentions, a JSON string on the wire, read when stored) holds the bot.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, type_of, Author, Chat, ChatType, Media, MessageType, Said};
use crate::platform::BotId;

/// The most files listed of one post: the server takes at most 10 (`PostFileidsMaxRunes`
/// holds 10 ids); an event is hostile input.
const MAX_FILES: usize = 10;

pub(super) fn normalise(kind: &str, d: &Value) -> Option<Said> {
    if kind != "posted" {
        return None;
    }
    let p = &d["post"];
    if text(&p["type"]).is_some() {
        return None;
    }
    let channel = text(&p["channel_id"])?;
    let sender = text(&p["user_id"])?;
    let id = text(&p["id"]);
    let root = text(&p["root_id"]);
    let props = &p["props"];
    let webhook = flag(&props["from_webhook"]);
    let media = files(&p["metadata"]["files"], &p["file_ids"]);
    let name = text(&props["override_username"])
        .filter(|_| webhook)
        .or_else(|| text(&d["sender_name"]).map(|n| n.trim_start_matches('@').to_owned()));
    Some(Said {
        chat: Chat {
            id: channel.clone(),
            chat_type: match d["channel_type"].as_str() {
                Some("D") => ChatType::Dm,
                Some("G") => ChatType::Group,
                _ => ChatType::Channel,
            },
            name: text(&d["channel_display_name"]),
        },
        sender: Author {
            id: sender,
            name,
            is_bot: d["own"] == true || flag(&props["from_bot"]) || webhook,
            vouched: !webhook,
        },
        thread_id: root.clone(),
        message_id: id,
        reply_to_message_id: root.clone(),
        message_type: type_of(&media),
        text: p["message"].as_str().unwrap_or("").to_owned(),
        media,
        // An answer goes where the post was: into its thread when it is in one.
        answer: Some((Target(channel).to_string(), root)),
    })
}

/// Props are strings or booleans, as the client that posted chose.
fn flag(v: &Value) -> bool {
    v == true || v == "true"
}

/// A post's files as items to fetch by id (`GET /api/v4/files/{id}`, `fetch.rs`): each of
/// `metadata.files` (`FileInfo`s, with a name and a type), then any of `file_ids` the
/// metadata did not describe (a server sends both; an older one, or a post read back
/// without its metadata, only the ids), as a document named by nothing.
fn files(infos: &Value, ids: &Value) -> Vec<Media> {
    let mut media: Vec<Media> = infos
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let id = text(&f["id"])?;
            Some(Media {
                media_type: kind_of(f["mime_type"].as_str().unwrap_or("")),
                id: Some(id),
                url: None,
                name: text(&f["name"]),
                extra: None,
            })
        })
        .take(MAX_FILES)
        .collect();
    for id in ids.as_array().into_iter().flatten().filter_map(text) {
        if media.len() >= MAX_FILES {
            break;
        }
        if media.iter().all(|m| m.id.as_deref() != Some(id.as_str())) {
            media.push(Media {
                media_type: MessageType::Document,
                id: Some(id),
                url: None,
                name: None,
                extra: None,
            });
        }
    }
    media
}

fn kind_of(mime: &str) -> MessageType {
    match mime {
        "image/jpeg" | "image/png" | "image/gif" | "image/webp" => MessageType::Photo,
        _ if mime.starts_with("audio/") => MessageType::Audio,
        _ if mime.starts_with("video/") => MessageType::Video,
        _ => MessageType::Document,
    }
}

/// Whether the stored event's `mentions` names the bot's user id.
pub(super) fn addressed(kind: &str, d: &Value, bot: &BotId) -> bool {
    let Some(id) = bot.id.as_deref() else {
        return false;
    };
    kind == "posted"
        && d["mentions"]
            .as_array()
            .is_some_and(|m| m.iter().any(|u| u.as_str() == Some(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CHAN: &str = "cccccccccccccccccccccccccc";

    fn event(post: Value, channel_type: &str) -> Value {
        json!({"post": post, "channel_type": channel_type, "sender_name": "@alice",
               "mentions": ["bbbbbbbbbbbbbbbbbbbbbbbbbb"], "own": false})
    }

    #[test]
    fn a_post_is_a_message_in_its_channel_and_thread() {
        let post = json!({"id": "p1", "user_id": "u1", "channel_id": CHAN, "root_id": "r1",
                          "message": "hello", "type": ""});
        let said = normalise("posted", &event(post, "D")).unwrap();
        assert_eq!(said.chat.chat_type, ChatType::Dm);
        assert_eq!(said.sender.name.as_deref(), Some("alice"));
        assert!(said.sender.vouched && !said.sender.is_bot);
        assert_eq!(said.thread_id.as_deref(), Some("r1"));
        assert_eq!(said.answer, Some((format!("channel:{CHAN}"), Some("r1".into()))));
        let system = json!({"id": "p2", "user_id": "u1", "channel_id": CHAN, "type": "system_join_channel"});
        assert!(normalise("posted", &event(system, "O")).is_none());
        assert!(normalise("typing", &json!({})).is_none());
    }

    #[test]
    fn a_webhooks_post_is_a_bots_and_vouched_for_by_nobody() {
        let post = json!({"id": "p1", "user_id": "u1", "channel_id": CHAN, "message": "x",
                          "props": {"from_webhook": "true", "override_username": "ci"}});
        let said = normalise("posted", &event(post, "O")).unwrap();
        assert!(said.sender.is_bot && !said.sender.vouched);
        assert_eq!(said.sender.name.as_deref(), Some("ci"));
    }

    #[test]
    fn a_posts_files_are_its_infos_then_the_ids_they_did_not_describe() {
        let post = json!({"id": "p1", "user_id": "u1", "channel_id": CHAN, "message": "",
            "file_ids": ["f1", "f2", 7],
            "metadata": {"files": [{"id": "f1", "name": "shot.png", "mime_type": "image/png"}]}});
        let said = normalise("posted", &event(post, "O")).unwrap();
        let ids: Vec<_> = said.media.iter().map(|m| m.id.as_deref().unwrap()).collect();
        assert_eq!(ids, ["f1", "f2"]);
        assert_eq!(said.media[0].media_type, MessageType::Photo);
        assert_eq!(said.media[0].name.as_deref(), Some("shot.png"));
        assert_eq!(said.media[1].media_type, MessageType::Document);
        let many: Vec<String> = (0..30).map(|i| format!("f{i}")).collect();
        let post = json!({"id": "p2", "user_id": "u1", "channel_id": CHAN, "file_ids": many});
        assert_eq!(normalise("posted", &event(post, "O")).unwrap().media.len(), MAX_FILES);
    }

    #[test]
    fn the_bot_is_addressed_by_the_servers_mentions() {
        let bot = BotId { id: Some("bbbbbbbbbbbbbbbbbbbbbbbbbb".into()), handle: None };
        let d = event(json!({}), "O");
        assert!(addressed("posted", &d, &bot));
        assert!(!addressed("posted", &json!({"mentions": []}), &bot));
        assert!(!addressed("posted", &d, &BotId::default()));
    }
}
