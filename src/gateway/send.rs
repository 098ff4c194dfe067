//! Sending to a platform: where a message goes ([`Target`]), what one attempt carries
//! ([`Outgoing`]), and how the platform answered ([`Answer`]).
//!
//! The outbox decides *whether* to try again; this module only says what the platform said,
//! classified so that the decision is the same for every platform: sent (with the platform's
//! message id), retry later (network trouble, 5xx, 429 with its wait), failed for good (bad
//! target, no permission, too large), or unknown (the request went out and no answer came
//! back, so it may or may not have been posted).
//!
//! `target` parses `--to`; [`Sender`] (`sender`) posts for one adapter through its platform
//! (`qq`, `discord`, `feishu` with its `feishu_token`, `telegram`, `weixin`, or a plain
//! WebSocket's live connection: `websocket`), in pieces where a platform takes less than a
//! long reply (`split`); `exchange` is one
//! HTTP request and what the transport says when no answer came; `classify` is what the
//! platforms' answers share.

mod classify;
mod discord;
mod exchange;
mod feishu;
mod feishu_token;
mod qq;
mod sender;
mod split;
mod target;
mod telegram;
mod websocket;
mod weixin;

pub use sender::Sender;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where a message goes on its adapter's platform, parsed from the part of `--to` after the
/// adapter name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// QQ Bot v2 group chat, by group openid (`group:OPENID`).
    QqGroup(String),
    /// QQ Bot v2 one-to-one chat, by user openid (`user:OPENID`).
    QqUser(String),
    /// QQ guild channel, by channel id (`channel:ID`).
    QqChannel(String),
    /// QQ guild direct message, by the DM session's guild id (`dm:GUILD_ID`).
    QqDm(String),
    /// Discord channel (a DM channel too), by channel id (`channel:ID` or just `ID`).
    DiscordChannel(String),
    /// Whatever a plain WebSocket's peer reads as an address: the frame's `{target}`.
    WebSocket(String),
    /// Feishu/Lark group or one-to-one chat, by chat id (`chat:oc_...`).
    FeishuChat(String),
    /// Feishu/Lark user, by the user's open id for this app (`user:ou_...`).
    FeishuUser(String),
    /// Telegram chat (private, group, supergroup or channel), by `chat_id` (`chat:ID` or
    /// `chat:@channelusername`).
    TelegramChat(String),
    /// Weixin peer, by iLink user id (`user:…@im.wechat`).
    WeixinUser(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("adapter kind {kind:?} cannot send messages yet")]
    CannotSend { kind: String },
    #[error("target {target:?} is not one of {expected} (e.g. {example})")]
    Malformed {
        target: String,
        expected: &'static str,
        example: &'static str,
    },
}

/// One message as one attempt sends it. `id` is the outbox's id for the message, stable
/// across attempts and restarts, so a platform that dedupes by a client key (Discord's
/// `nonce`) sees the same key every time.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub id: String,
    pub target: Target,
    pub text: String,
    /// The platform message this answers (QQ's passive reply `msg_id`, Discord's
    /// `message_reference`, Feishu's `/messages/{message_id}/reply`).
    pub reply_to: Option<String>,
    /// QQ's `msg_seq` for a passive reply: fixed when the message is queued, so a retry
    /// repeats it and the platform drops the duplicate.
    pub seq: Option<u32>,
}

/// What the platform itself said about a request, for the message's state and for logs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformReply {
    /// The HTTP status, when there was a response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The platform's own error code from the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    pub message: String,
}

impl fmt::Display for PlatformReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(status) = self.status {
            write!(f, "HTTP {status}: ")?;
        }
        if let Some(code) = self.code {
            write!(f, "code {code}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Posted; the platform's id for the message, when it gave one (a duplicate the platform
    /// dropped counts as sent: the first attempt posted it).
    Sent { platform_id: Option<String> },
    /// Not posted; trying again may work, no sooner than `after` when the platform said.
    Retry {
        after: Option<Duration>,
        reply: PlatformReply,
    },
    /// Not posted, and retrying will not change that.
    Failed(PlatformReply),
    /// The request may have reached the platform, and no answer came back.
    Unknown(String),
}
