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
//!
//! A `file_share` message carries `files`, file objects (api.slack.com/types/file): each is
//! listed as an item by its `id`, with `url_private_download` (or `url_private`, which every
//! hosted file has) and its `name`; `fetch.rs` fetches it with the bot token. A file shared
//! into a Slack Connect channel comes as `{"id", "mode": "file_access", "file_access":
//! "check_file_info"}` with no URL: it is listed by its id alone, and the fetcher asks
//! `files.info` for the rest.

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, type_of, Author, Chat, ChatType, Media, MessageType, Said};
use crate::platform::BotId;

/// Subtypes that are still someone saying something in the conversation.
const SAID: &[&str] = &["bot_message", "me_message", "thread_broadcast", "file_share"];

/// The most files listed of one message: Slack's clients attach at most 10 to a message
/// (**inferred**, the file limit of `files.completeUploadExternal` seen in `send/files.rs`);
/// an event is hostile input, and what is over this is not fetched.
const MAX_FILES: usize = 20;

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
    let (media, over) = files(&e["files"]);
    let mut words = e["text"].as_str().unwrap_or("").to_owned();
    if over > 0 {
        let sep = if words.is_empty() { "" } else { "\n\n" };
        words.push_str(&format!(
            "{sep}[{over} more files that were not fetched: over {MAX_FILES} in one message]"
        ));
    }
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
        message_type: type_of(&media),
        text: words,
        media,
        // An answer goes where the message was said: into its thread when it is in one.
        answer: Some((Target(channel).to_string(), thread)),
    })
}

/// A message's `files`, as items to fetch (a file with neither an id nor a URL is nothing to
/// fetch), and how many were over [`MAX_FILES`].
fn files(files: &Value) -> (Vec<Media>, usize) {
    let mut media: Vec<Media> = files
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| Media {
            media_type: kind_of(f),
            id: text(&f["id"]),
            url: text(&f["url_private_download"]).or_else(|| text(&f["url_private"])),
            name: text(&f["name"]).or_else(|| text(&f["title"])),
            extra: None,
        })
        .filter(|m| m.id.is_some() || m.url.is_some())
        .collect();
    let over = media.len().saturating_sub(MAX_FILES);
    media.truncate(MAX_FILES);
    (media, over)
}

/// What a file is, by its `mimetype` (the uploader's word; the store reads the bytes): the
/// four image types a model reads as a photo, a clip recorded in Slack (`subtype`
/// `slack_audio`, **inferred** from the SDKs' `File` types) as a voice note, other audio and
/// video as such, anything else (a Connect file not yet looked up too) as a document.
fn kind_of(f: &Value) -> MessageType {
    let mime = f["mimetype"].as_str().unwrap_or("");
    match mime {
        "image/jpeg" | "image/png" | "image/gif" | "image/webp" => MessageType::Photo,
        _ if mime.starts_with("audio/") && f["subtype"] == "slack_audio" => MessageType::Voice,
        _ if mime.starts_with("audio/") => MessageType::Audio,
        _ if mime.starts_with("video/") => MessageType::Video,
        _ => MessageType::Document,
    }
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
    fn a_file_share_lists_its_files_by_id_and_url_and_a_connect_file_by_id() {
        let e = json!({"type": "message", "subtype": "file_share", "channel": "C1",
            "user": "U1", "text": "the plan", "ts": "7.0", "files": [
            {"id": "F1", "name": "shot.png", "mimetype": "image/png", "filetype": "png",
             "size": 3, "url_private": "https://files.slack.com/files-pri/T1-F1/shot.png",
             "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/shot.png"},
            {"id": "F2", "name": "plan.pdf", "mimetype": "application/pdf",
             "url_private": "https://files.slack.com/files-pri/T1-F2/plan.pdf"},
            {"id": "F3", "mode": "file_access", "file_access": "check_file_info",
             "created": 0, "timestamp": 0, "user": ""},
            {"name": "nothing to fetch it by"}]});
        let said = normalise("message", &e).unwrap();
        assert_eq!(said.text, "the plan");
        assert_eq!(said.message_type, MessageType::Photo);
        let got: Vec<_> = said
            .media
            .iter()
            .map(|m| (m.media_type, m.id.as_deref(), m.url.as_deref(), m.name.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                (MessageType::Photo, Some("F1"),
                 Some("https://files.slack.com/files-pri/T1-F1/download/shot.png"), Some("shot.png")),
                (MessageType::Document, Some("F2"),
                 Some("https://files.slack.com/files-pri/T1-F2/plan.pdf"), Some("plan.pdf")),
                (MessageType::Document, Some("F3"), None, None),
            ]
        );
    }

    #[test]
    fn files_over_the_bound_are_said_in_the_text() {
        let files: Vec<Value> = (0..25).map(|n| json!({"id": format!("F{n}")})).collect();
        let e = json!({"type": "message", "subtype": "file_share", "channel": "C1",
            "user": "U1", "text": "", "ts": "8.0", "files": files});
        let said = normalise("message", &e).unwrap();
        assert_eq!(said.media.len(), MAX_FILES);
        assert!(said.text.starts_with("[5 more files"), "{}", said.text);
        let audio = json!({"mimetype": "audio/webm", "subtype": "slack_audio"});
        assert_eq!(kind_of(&audio), MessageType::Voice);
        assert_eq!(kind_of(&json!({"mimetype": "audio/mpeg"})), MessageType::Audio);
        assert_eq!(kind_of(&json!({"mimetype": "image/svg+xml"})), MessageType::Document);
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
