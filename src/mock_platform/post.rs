//! What the send endpoints keep for a test to read: every accepted post and every answer they
//! gave. A leaf vocabulary, so the record, the endpoints and the handle can all name it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Platform {
    Qq,
    Discord,
    Feishu,
    Telegram,
    Weixin,
    Slack,
    Matrix,
    Mattermost,
    DingTalk,
}

impl Platform {
    pub fn name(&self) -> &'static str {
        match self {
            Platform::Qq => "qq",
            Platform::Discord => "discord",
            Platform::Feishu => "feishu",
            Platform::Telegram => "telegram",
            Platform::Weixin => "weixin",
            Platform::Slack => "slack",
            Platform::Matrix => "matrix",
            Platform::Mattermost => "mattermost",
            Platform::DingTalk => "dingtalk",
        }
    }
}

/// Where a post went. QQ has four send endpoints, one per kind of conversation; Discord has
/// one, for every channel (DM channels included); Feishu has create (to a chat or a user) and
/// reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// QQ `POST /v2/groups/{group_openid}/messages`.
    Group,
    /// QQ `POST /v2/users/{openid}/messages` (C2C).
    User,
    /// QQ `POST /channels/{channel_id}/messages`, Discord `POST /channels/{channel.id}/messages`,
    /// Slack `chat.postMessage` to a `channel`.
    Channel,
    /// QQ `POST /dms/{guild_id}/messages`.
    Dm,
    /// Feishu `POST /open-apis/im/v1/messages?receive_id_type=chat_id`.
    ChatId,
    /// Feishu `POST /open-apis/im/v1/messages?receive_id_type=open_id`.
    OpenId,
    /// Feishu `POST /open-apis/im/v1/messages/{message_id}/reply`.
    Reply,
    /// Telegram `sendMessage` to a `chat_id`.
    Chat,
    /// Weixin `ilink/bot/sendmessage` to a `to_user_id`.
    Peer,
    /// Matrix `PUT /_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}`.
    Room,
}

impl Target {
    pub fn name(&self) -> &'static str {
        match self {
            Target::Group => "group",
            Target::User => "user",
            Target::Channel => "channel",
            Target::Dm => "dm",
            Target::ChatId => "chat_id",
            Target::OpenId => "open_id",
            Target::Reply => "reply",
            Target::Chat => "chat",
            Target::Peer => "peer",
            Target::Room => "room",
        }
    }
}

/// One message the platform accepted and would have delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct Post {
    pub platform: Platform,
    pub target: Target,
    /// The id in the path: group openid, user openid, channel id or DM guild id; Feishu's
    /// `receive_id` (chat_id or open_id), or for a reply the message replied to; Matrix's
    /// room id.
    pub target_id: String,
    /// The text; for a Feishu message that is not text, its `content` JSON as sent.
    pub content: String,
    /// QQ `msg_id` (which makes the post a passive reply); Discord
    /// `message_reference.message_id`; the message a Feishu reply answers; Matrix's
    /// `m.relates_to.m.in_reply_to.event_id`.
    pub reply_to: Option<String>,
    /// QQ `msg_seq` as sent (the platform reads a missing one as 1).
    pub msg_seq: Option<u64>,
    /// Discord `nonce` as sent, integers in their decimal form; Feishu `uuid`; Matrix's
    /// transaction id (`txnId` in the path).
    pub nonce: Option<String>,
    /// The id the mock gave the message, as its answer carried it.
    pub message_id: String,
    /// When the request was read, for latency measurements against the client's clock.
    pub received_at: Instant,
    pub received_unix_ms: u64,
    /// The files the post carried, in the order of their parts: Telegram's one file of a
    /// `sendPhoto` (or `sendDocument`, ...), Discord's `files[n]`, the content a Matrix file
    /// event's `url` names, the files a Slack `files.completeUploadExternal` shares. Empty for
    /// a text post.
    pub files: Vec<PostedFile>,
}

/// One file a post uploaded, as the mock received it: enough for a test to check that the
/// file arrived whole and once (its digest and size) without the record keeping the bytes of
/// every upload alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedFile {
    /// The multipart form field that carried it: `photo`, `document`, ... for Telegram,
    /// `files[0]`, `files[1]`, ... for Discord; the event's `msgtype` (`m.image`, `m.file`,
    /// ...) for Matrix; the file id (`F…`) for Slack.
    pub field: String,
    /// The part's `Content-Disposition` `filename`, as sent.
    pub filename: Option<String>,
    /// The part's `Content-Type`, as sent.
    pub content_type: Option<String>,
    pub bytes: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
}

impl PostedFile {
    pub(super) fn of(
        field: &str,
        filename: Option<&str>,
        content_type: Option<&str>,
        bytes: &[u8],
    ) -> PostedFile {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(bytes);
        PostedFile {
            field: field.to_owned(),
            filename: filename.map(str::to_owned),
            content_type: content_type.map(str::to_owned),
            bytes: bytes.len() as u64,
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// One request to a send endpoint and how it was answered, accepted or not: what a test reads
/// to check a client's retry timing (say, that nothing came before a 429's wait was over).
#[derive(Clone, Debug, PartialEq)]
pub struct SendAttempt {
    pub platform: Platform,
    pub target: Target,
    pub target_id: String,
    pub received_at: Instant,
    pub received_unix_ms: u64,
    /// The HTTP status answered; `None` when the mock never answered (a hang or reset fault).
    pub status: Option<u16>,
    /// Whether this request added a post (a dedupe hit, a refusal or a fault did not, except
    /// the after-processing faults, which did).
    pub recorded: bool,
    /// The message id the answer carried, or would have: the new post's, or on a Discord
    /// nonce hit the earlier one's.
    pub message_id: Option<String>,
    /// What a 429 told the client to wait.
    pub retry_after: Option<Duration>,
    /// Which send fault, if any, shaped the answer (its [`name`](super::SendFault::name)).
    pub fault: Option<&'static str>,
}

/// Milliseconds since the Unix epoch, 0 if the clock is before it.
pub(super) fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// RFC 3339 at the given UTC offset in hours; an unrepresentable time falls back to the epoch.
pub(super) fn rfc3339(unix_ms: u64, offset_hours: i32) -> String {
    let utc = i64::try_from(unix_ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default();
    match chrono::FixedOffset::east_opt(offset_hours * 3600) {
        Some(offset) => utc
            .with_timezone(&offset)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
        None => utc.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }
}

/// The posts and attempts as the `GET /_posts` route shows them. `received_ms` counts from
/// the mock's start, so a benchmark outside the process can line posts up with attempts.
pub(super) fn render_record(posts: &[Post], attempts: &[SendAttempt], started: Instant) -> Value {
    let since = |at: Instant| u64::try_from(at.saturating_duration_since(started).as_millis());
    let posts: Vec<Value> = posts
        .iter()
        .map(|p| {
            json!({
                "platform": p.platform.name(),
                "target": p.target.name(),
                "target_id": p.target_id,
                "content": p.content,
                "reply_to": p.reply_to,
                "msg_seq": p.msg_seq,
                "nonce": p.nonce,
                "message_id": p.message_id,
                "received_unix_ms": p.received_unix_ms,
                "received_ms": since(p.received_at).ok(),
                "files": p.files.iter().map(|f| json!({
                    "field": f.field,
                    "filename": f.filename,
                    "content_type": f.content_type,
                    "bytes": f.bytes,
                    "sha256": f.sha256,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let attempts: Vec<Value> = attempts
        .iter()
        .map(|a| {
            json!({
                "platform": a.platform.name(),
                "target": a.target.name(),
                "target_id": a.target_id,
                "status": a.status,
                "recorded": a.recorded,
                "message_id": a.message_id,
                "retry_after": a.retry_after.map(|d| d.as_secs_f64()),
                "fault": a.fault,
                "received_unix_ms": a.received_unix_ms,
                "received_ms": since(a.received_at).ok(),
            })
        })
        .collect();
    json!({"posts": posts, "attempts": attempts})
}
