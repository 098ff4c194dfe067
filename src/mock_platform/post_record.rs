//! The send side's memory: the posts accepted, every answer given, what the platforms remember
//! for deduplication, and the send faults armed per platform.
//!
//! Its own mutex, apart from the gateway state: nothing here has to be atomic with sessions,
//! and a flood of posts must not slow heartbeat acks. "Is this a duplicate?" and "record it"
//! happen under one lock, so two racing retries of one post cannot both be recorded.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::fault::SendFault;
use super::post::{Platform, Post, SendAttempt};

/// Discord's snowflake epoch (2015-01-01T00:00:00Z) in Unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

pub(super) struct PostRecord {
    pub(crate) started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    posts: Vec<Post>,
    attempts: Vec<SendAttempt>,
    faults: HashMap<Platform, Armed>,
    /// Discord, by (author token, nonce): the answer to give a retry with `enforce_nonce`.
    nonces: HashMap<(String, String), Remembered>,
    /// QQ passive replies already sent, by (msg_id, msg_seq).
    replies: HashSet<(String, u64)>,
    next_message: u64,
}

struct Armed {
    fault: SendFault,
    /// Only for `Down`: when the outage ends.
    until: Option<Instant>,
}

struct Remembered {
    at: Instant,
    message_id: String,
    answer: Value,
}

/// How a post is checked against what the platform remembers.
pub(super) enum Dedupe {
    None,
    /// Discord `enforce_nonce`: same author, same nonce, within `window`.
    Nonce {
        author: String,
        nonce: String,
        window: Duration,
    },
    /// QQ passive reply: the same `msg_id` + `msg_seq` fails.
    Reply {
        msg_id: String,
        msg_seq: u64,
    },
}

pub(super) enum Acceptance {
    Created {
        message_id: String,
        answer: Value,
    },
    /// Discord's answer to a repeated nonce: the earlier message, nothing new recorded.
    Earlier {
        message_id: String,
        answer: Value,
    },
    /// QQ's answer to a repeated passive reply: refused, nothing recorded.
    Duplicate,
}

impl PostRecord {
    pub(crate) fn new() -> PostRecord {
        PostRecord {
            started: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// A panic elsewhere must not poison the record for every later test assertion.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_fault(&self, platform: Platform, fault: Option<SendFault>) {
        let mut inner = self.lock();
        match fault {
            Some(fault) => {
                let until = match fault {
                    SendFault::Down(duration) => Instant::now().checked_add(duration),
                    _ => None,
                };
                inner.faults.insert(platform, Armed { fault, until });
            }
            None => {
                inner.faults.remove(&platform);
            }
        }
        tracing::info!(platform = platform.name(), ?fault, "mock send fault set");
    }

    /// One strike of the platform's fault if it acts before processing, used up as it is
    /// taken; `None` when the post should be processed normally.
    pub(crate) fn strike_before(&self, platform: Platform) -> Option<SendFault> {
        self.strike(platform, false)
    }

    /// One strike of the platform's fault if it acts after processing.
    pub(crate) fn strike_after(&self, platform: Platform) -> Option<SendFault> {
        self.strike(platform, true)
    }

    fn strike(&self, platform: Platform, after_processing: bool) -> Option<SendFault> {
        let mut inner = self.lock();
        let armed = inner.faults.get_mut(&platform)?;
        if armed.fault.after_processing() != after_processing {
            return None;
        }
        let struck = armed.fault;
        let (strikes, stays) = match &mut armed.fault {
            SendFault::Down(_) => {
                let live = armed.until.is_none_or(|until| Instant::now() < until);
                (live, live)
            }
            SendFault::ServerError(n)
            | SendFault::RateLimited { posts: n, .. }
            | SendFault::Hang(n)
            | SendFault::ResetAfterProcessing(n)
            | SendFault::HangAfterProcessing(n) => {
                let live = *n > 0;
                *n = n.saturating_sub(1);
                (live, *n > 0)
            }
        };
        if !stays {
            inner.faults.remove(&platform);
        }
        strikes.then_some(struck)
    }

    /// Records `post` unless the platform remembers it; `render` builds the answer from the
    /// post once its message id is assigned.
    pub(crate) fn accept(
        &self,
        mut post: Post,
        dedupe: Dedupe,
        render: impl FnOnce(&Post) -> Value,
    ) -> Acceptance {
        let mut inner = self.lock();
        let now = post.received_at;
        match &dedupe {
            Dedupe::None => {}
            Dedupe::Nonce {
                author,
                nonce,
                window,
            } => {
                inner
                    .nonces
                    .retain(|_, seen| now.saturating_duration_since(seen.at) < *window);
                if let Some(seen) = inner.nonces.get(&(author.clone(), nonce.clone())) {
                    return Acceptance::Earlier {
                        message_id: seen.message_id.clone(),
                        answer: seen.answer.clone(),
                    };
                }
            }
            Dedupe::Reply { msg_id, msg_seq } => {
                if !inner.replies.insert((msg_id.clone(), *msg_seq)) {
                    return Acceptance::Duplicate;
                }
            }
        }
        inner.next_message += 1;
        // A platform whose ids the record cannot mint (Telegram counts per chat) sets its own.
        if post.message_id.is_empty() {
            post.message_id = message_id(post.platform, inner.next_message, post.received_unix_ms);
        }
        let answer = render(&post);
        let message_id = post.message_id.clone();
        if let Dedupe::Nonce { author, nonce, .. } = dedupe {
            let remembered = Remembered {
                at: now,
                message_id: message_id.clone(),
                answer: answer.clone(),
            };
            inner.nonces.insert((author, nonce), remembered);
        }
        inner.posts.push(post);
        Acceptance::Created { message_id, answer }
    }

    pub(crate) fn record_attempt(&self, attempt: SendAttempt) {
        self.lock().attempts.push(attempt);
    }

    pub(crate) fn posts(&self) -> Vec<Post> {
        self.lock().posts.clone()
    }

    pub(crate) fn attempts(&self) -> Vec<SendAttempt> {
        self.lock().attempts.clone()
    }

    pub(crate) fn render(&self) -> Value {
        let inner = self.lock();
        super::post::render_record(&inner.posts, &inner.attempts, self.started)
    }
}

/// Discord ids are snowflakes (milliseconds since its epoch above 22 bits of sequence), so a
/// client that reads the time out of an id gets the time of the post. QQ's are opaque strings;
/// Feishu's are `om_` and 32 hex digits.
fn message_id(platform: Platform, n: u64, unix_ms: u64) -> String {
    match platform {
        Platform::Discord => {
            let ms = unix_ms.saturating_sub(DISCORD_EPOCH_MS);
            ((ms << 22) | (n & 0x3F_FFFF)).to_string()
        }
        Platform::Qq => format!("ROBOT1.0_mock{n:012}"),
        Platform::Feishu => format!("om_{n:032x}"),
        // Telegram's posts come with their per-chat id already set; this is a fallback.
        Platform::Telegram => n.to_string(),
        Platform::Weixin => format!("wx_mock_{n:012}"),
    }
}
