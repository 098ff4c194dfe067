//! A message in the outbox, as the API, `status` and the journal see it.

use serde::{Deserialize, Serialize};

use super::files::{Attachment, NewFile};
use crate::gateway::send::PlatformReply;

/// What to do with a send whose outcome is unknown on a platform that cannot dedupe it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Never post twice; a lost answer leaves the message `unknown`.
    #[default]
    AtMostOnce,
    /// Never lose it; a lost answer means sending again, which may post twice.
    AtLeastOnce,
}

/// Where a message is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Queued,
    /// A request is (or was, at a crash) on its way.
    Sending,
    Sent,
    Failed,
    /// The request went out and no answer came back, on a platform that cannot dedupe it,
    /// under at-most-once: it may or may not have been posted, and it is not sent again.
    Unknown,
}

impl State {
    pub fn is_final(self) -> bool {
        matches!(self, State::Sent | State::Failed | State::Unknown)
    }
}

/// What a caller asks to send. Validated by [`super::Outbox::submit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub adapter: String,
    /// The platform target, as its platform spells one, e.g. `group:OPENID` or `chat:ID`.
    pub target: String,
    pub text: String,
    pub reply_to: Option<String>,
    /// Chosen by the caller; the same key is accepted once.
    pub idempotency_key: String,
    pub policy: Policy,
    /// Files to post with the text (then their caption, and it may be empty), in order.
    pub files: Vec<NewFile>,
}

/// One message and its state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub idempotency_key: String,
    pub adapter: String,
    pub target: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// QQ's `msg_seq` for a passive reply, fixed at submit so that every attempt repeats it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u32>,
    pub policy: Policy,
    /// The files it posts, the outbox's own copies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    pub state: State,
    pub attempts: u32,
    /// RFC 3339, UTC.
    pub queued_at: String,
    pub updated_at: String,
    /// The platform's id for the posted message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_id: Option<String>,
    /// The last thing the platform said (or why no answer came), for `failed`, `unknown`
    /// and a message waiting to be retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<PlatformReply>,
}

impl Message {
    /// The last reply number the message holds: a message with files posts each file as a
    /// message of its own, file `n` under `seq + n` ([`Post::numbers_replies`]), so that no
    /// two of its posts, and no other message's, repeat a number the platform would drop.
    ///
    /// [`Post::numbers_replies`]: crate::gateway::send::Post::numbers_replies
    pub fn last_seq(&self) -> Option<u32> {
        let extra = u32::try_from(self.attachments.len().saturating_sub(1)).unwrap_or(u32::MAX);
        self.seq.map(|seq| seq.saturating_add(extra))
    }
}

/// The outbox at a glance, for `status`, the state file and `/v1/health`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Messages not yet in a final state.
    pub depth: u64,
    /// Age in seconds of the oldest message not yet in a final state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_queued_secs: Option<u64>,
    pub sent: u64,
    pub failed: u64,
    /// Messages whose outcome is unknown (see [`State::Unknown`]).
    pub unknown: u64,
    /// Why the outbox could not be opened this run, with the fix: nothing is sent, and the
    /// API answers 503 `outbox_unavailable`. Receiving goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl Stats {
    pub fn unavailable(why: String) -> Self {
        Self {
            unavailable: Some(why),
            ..Self::default()
        }
    }
}
