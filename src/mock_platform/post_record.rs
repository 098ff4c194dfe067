//! The send side's memory: the posts accepted, every answer given, the keys remembered for
//! deduplication, and the send faults armed per platform. Which key a post carries, how its
//! message id looks and what its answer says are the platform's; this only keeps them.
//!
//! Its own mutex, apart from every platform's state: nothing here has to be atomic with a
//! platform's sessions or queues, and a flood of posts must not slow heartbeat acks. "Is this
//! a duplicate?" and "record it" happen under one lock, so two racing retries of one post
//! cannot both be recorded.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::watch;

use super::fault::SendFault;
use super::http::RequestHead;
use super::post::{Platform, Post, SendAttempt};
use super::reply::{Answer, Reply};
use super::side::{at_once, Side};

pub(super) struct PostRecord {
    pub(crate) started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    posts: Vec<Post>,
    attempts: Vec<SendAttempt>,
    faults: HashMap<Platform, Armed>,
    /// Keys remembered for a while, by (author, key): the answer to give a repeat.
    windowed: HashMap<(String, String), Remembered>,
    /// Once-only keys already used, by (key, seq).
    used: HashSet<(String, u64)>,
    next_message: u64,
    /// Typing indicators asked for: `(platform, chat or channel, when)`.
    typing: Vec<(Platform, String, Instant)>,
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
    /// A repeat of `key` by the same author within `window` gets the first post's answer and
    /// records nothing.
    Window {
        author: String,
        key: String,
        window: Duration,
    },
    /// `key` with `seq` may be used once: a repeat is refused.
    Once {
        key: String,
        seq: u64,
    },
}

pub(super) enum Acceptance {
    Created {
        message_id: String,
        answer: Value,
    },
    /// A repeat within a [`Dedupe::Window`]: the earlier message, nothing new recorded.
    Earlier {
        message_id: String,
        answer: Value,
    },
    /// A repeat of a [`Dedupe::Once`] key: refused, nothing recorded.
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

    /// Records `post` unless the platform remembers it. `mint` gives the message id from the
    /// record's running count of posts (all platforms', the new one included); `render` builds
    /// the answer from the post once it has its id.
    pub(crate) fn accept(
        &self,
        mut post: Post,
        dedupe: Dedupe,
        mint: impl FnOnce(u64) -> String,
        render: impl FnOnce(&Post) -> Value,
    ) -> Acceptance {
        let mut inner = self.lock();
        let now = post.received_at;
        match &dedupe {
            Dedupe::None => {}
            Dedupe::Window {
                author,
                key,
                window,
            } => {
                inner
                    .windowed
                    .retain(|_, seen| now.saturating_duration_since(seen.at) < *window);
                if let Some(seen) = inner.windowed.get(&(author.clone(), key.clone())) {
                    return Acceptance::Earlier {
                        message_id: seen.message_id.clone(),
                        answer: seen.answer.clone(),
                    };
                }
            }
            Dedupe::Once { key, seq } => {
                if !inner.used.insert((key.clone(), *seq)) {
                    return Acceptance::Duplicate;
                }
            }
        }
        inner.next_message += 1;
        post.message_id = mint(inner.next_message);
        let answer = render(&post);
        let message_id = post.message_id.clone();
        if let Dedupe::Window { author, key, .. } = dedupe {
            let remembered = Remembered {
                at: now,
                message_id: message_id.clone(),
                answer: answer.clone(),
            };
            inner.windowed.insert((author, key), remembered);
        }
        inner.posts.push(post);
        Acceptance::Created { message_id, answer }
    }

    pub(crate) fn record_attempt(&self, attempt: SendAttempt) {
        self.lock().attempts.push(attempt);
    }

    /// A typing indicator was asked for in `target`.
    pub(crate) fn typing(&self, platform: Platform, target: String) {
        self.lock().typing.push((platform, target, Instant::now()));
    }

    pub(crate) fn typings(&self) -> Vec<(Platform, String, Instant)> {
        self.lock().typing.clone()
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

/// `GET /_posts`: the record as JSON, for a benchmark outside the process to read.
impl Side for PostRecord {
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        _: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        let record = head.method == "GET" && head.path == "/_posts";
        record.then(|| at_once(Reply::Answer(Answer::new(200, self.render()))))
    }
}
