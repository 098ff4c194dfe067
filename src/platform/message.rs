//! The normalised message: one shape for a chat message on every platform, read from the
//! platform's own payload by its wing ([`super::Platform::normalise`]).
//!
//! The spool keeps what the platform sent, as it sent it; this is a view of it, computed when
//! an event is read (by the API, `events --json`, the agent bridges), so that every event
//! already stored gains it too and a better reading of a payload applies to the past as well.
//! An agent needs three things from a message to answer it: what was said, by whom, and where
//! to send the answer. The last comes ready-made in [`Message::reply`], in the form `POST
//! /v1/messages` takes, so no agent needs to know how a platform spells its targets.
//!
//! Field names follow the Hermes agent's `SessionSource` and `MessageEvent`
//! (`gateway/session.py`, `gateway/platforms/base.py`) where they mean the same thing.

use serde::{Deserialize, Serialize};

/// A chat message, read from one platform's event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The adapter's `kind` (`telegram`, `qqbot`, ...).
    pub platform: String,
    /// The adapter's name in `gateway.toml`.
    pub adapter: String,
    #[serde(flatten)]
    pub said: Said,
    /// How to answer: the body of `POST /v1/messages` but for the text and key. `None` when
    /// this adapter cannot post into that chat.
    pub reply: Option<Reply>,
}

/// What a wing reads from one of its payloads: who said what, where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Said {
    pub chat: Chat,
    pub sender: Author,
    /// The thread or topic inside the chat, where the platform has them.
    pub thread_id: Option<String>,
    /// The platform's id of this message.
    pub message_id: Option<String>,
    /// The platform's id of the message this one answers.
    pub reply_to_message_id: Option<String>,
    /// What kind of message: `text`, `photo`, `video`, `audio`, `voice`, `document`,
    /// `sticker`, `location` (Hermes's `MessageType`).
    pub message_type: MessageType,
    /// The text, or a media item's caption; empty when there is none.
    pub text: String,
    /// Media attached, as the platform names them: an id to fetch them by, a URL, or both.
    pub media: Vec<Media>,
    /// The target to answer at (its display form), or `None` when the adapter cannot post
    /// there; and the message an answer should reply to. [`Said::into_message`] makes it the
    /// message's `reply`.
    #[serde(skip)]
    pub answer: Option<(String, Option<String>)>,
}

/// Where a message was said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chat {
    /// The platform's id of the chat (a user's id for a direct message).
    pub id: String,
    #[serde(rename = "type")]
    pub chat_type: ChatType,
    pub name: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    Dm,
    Group,
    Channel,
    Thread,
}

impl ChatType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatType::Dm => "dm",
            ChatType::Group => "group",
            ChatType::Channel => "channel",
            ChatType::Thread => "thread",
        }
    }
}

/// Who said it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    pub id: String,
    pub name: Option<String>,
    /// A bot (this one included, on platforms that echo its own posts): an agent that
    /// answers bots can talk to itself forever.
    pub is_bot: bool,
    /// The platform vouches that `id` is the account that said it. False where it does not:
    /// a post on behalf of a chat or a channel (Telegram's `sender_chat`, its anonymous
    /// group admins), a webhook's made-up author. Such a sender is never taken for a user:
    /// no allow-list entry and no pairing admits it. A reader of an older gateway's events,
    /// which did not say, takes it as not vouched.
    #[serde(default)]
    pub vouched: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    Text,
    Photo,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
    Location,
}

impl MessageType {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Text => "text",
            MessageType::Photo => "photo",
            MessageType::Video => "video",
            MessageType::Audio => "audio",
            MessageType::Voice => "voice",
            MessageType::Document => "document",
            MessageType::Sticker => "sticker",
            MessageType::Location => "location",
        }
    }
}

/// One attachment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    #[serde(rename = "type")]
    pub media_type: MessageType,
    /// The platform's id for it (Telegram's `file_id`, Feishu's `image_key`, ...).
    pub id: Option<String>,
    pub url: Option<String>,
    /// A file name or MIME type, when the platform gives one.
    pub name: Option<String>,
    /// What else the platform's wing needs to fetch it, opaque to everyone else (Weixin: the
    /// file's AES key). Never serialised: messages are normalised from the spooled event
    /// whenever they are read, so it never reaches the API or the agent.
    #[serde(skip)]
    pub extra: Option<String>,
}

/// Where an answer goes: `adapter`, `target` and `reply_to` of `POST /v1/messages`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub adapter: String,
    /// The target as the adapter's platform writes it (`chat:ID`, `group:OPENID`, ...).
    pub target: String,
    /// The message to answer, where the platform threads answers.
    pub reply_to: Option<String>,
}

impl Said {
    /// The message, for adapter `adapter` of platform `platform`.
    pub fn into_message(mut self, platform: &str, adapter: &str) -> Message {
        let reply = self.answer.take().map(|(target, reply_to)| Reply {
            adapter: adapter.to_owned(),
            target,
            reply_to,
        });
        Message {
            platform: platform.to_owned(),
            adapter: adapter.to_owned(),
            said: self,
            reply,
        }
    }
}

/// The message type a message with these attachments is: its first attachment's, or text.
pub fn type_of(media: &[Media]) -> MessageType {
    media.first().map_or(MessageType::Text, |m| m.media_type)
}

/// A JSON value as an id: platforms send ids as strings or numbers.
pub fn id(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A JSON value as a non-empty string.
pub fn text(value: &serde_json::Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// How the Hermes agent's own adapter for a platform names it, and its chats: what the Relay
/// bridge sends under `[agent] platform-ids = true`, so that a chat Hermes's own gateway held
/// keeps its session key (`agent:main:<platform>:<chat_type>:<chat_id>[...]`) behind the
/// gateway (docs/agent.md, "A chat's conversation after the switch").
#[derive(Clone, Copy)]
pub struct HermesPlatform {
    /// Hermes's name for the platform (`Platform` in its `gateway/config.py`).
    pub name: &'static str,
    /// The ids Hermes's adapter would give the message `said`, read from event `kind` with
    /// payload `data`.
    pub source: fn(said: &Said, kind: &str, data: &serde_json::Value) -> HermesSource,
}

impl std::fmt::Debug for HermesPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HermesPlatform({})", self.name)
    }
}

/// The ids of Hermes's `SessionSource` its session key is made of, as Hermes's own adapter
/// for the platform fills them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HermesSource {
    pub chat_id: String,
    /// `dm`, `group`, `channel` or `thread`.
    pub chat_type: &'static str,
    pub thread_id: Option<String>,
    pub user_id: Option<String>,
    /// A second id of the sender, which Hermes prefers to `user_id` for a member's own session
    /// in a group (Feishu's `union_id`).
    pub user_id_alt: Option<String>,
}

impl HermesSource {
    /// The normalised message's own ids: where a platform's Hermes adapter reads a message as
    /// its wing does.
    pub fn of(said: &Said) -> Self {
        HermesSource {
            chat_id: said.chat.id.clone(),
            chat_type: said.chat.chat_type.as_str(),
            thread_id: said.thread_id.clone(),
            user_id: Some(said.sender.id.clone()),
            user_id_alt: None,
        }
    }

    /// [`HermesSource::of`], as a [`HermesPlatform::source`]: for a platform whose Hermes adapter
    /// reads a message as its wing does (Weixin).
    pub fn same(said: &Said, _kind: &str, _data: &serde_json::Value) -> Self {
        Self::of(said)
    }
}
