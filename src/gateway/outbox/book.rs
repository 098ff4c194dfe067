//! The outbox in memory: every retained message, its idempotency key, and the order in which
//! each adapter's messages wait. Pure: the journal's records are applied here both when they
//! are written and when they are read back after a restart, so the two can never disagree.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::journal::Record;
use super::message::{Message, State, Stats};

/// Finished messages kept (for `GET /v1/messages/{id}` and for their idempotency keys) when
/// the journal is compacted; older ones are forgotten, oldest first.
pub(super) const RETAIN_FINISHED: usize = 10_000;

struct Entry {
    message: Message,
    ordinal: u64,
    /// Not before this instant (a 429's wait, or backoff). In memory only: after a restart
    /// every waiting message is tried again at once.
    not_before: Option<Instant>,
    /// The part of that wait the platform asked for (a 429's `retry_after`), which a
    /// reconnect does not cut short ([`Book::retry_now`]).
    asked: Option<Instant>,
}

/// One adapter's messages not yet final: a lane per target, in the order they were
/// submitted, and each lane's head by ordinal. A worker only ever looks at heads (a target's
/// later messages wait behind its first), so choosing the next message costs one step per
/// target, not per message: with 10,000 queued for one channel during an outage, a submit
/// that wakes the worker costs the same as with one.
#[derive(Default)]
struct Lanes {
    lanes: HashMap<String, VecDeque<u64>>,
    /// The ordinal of each lane's first message, and its target.
    heads: BTreeMap<u64, String>,
    len: usize,
}

impl Lanes {
    fn push(&mut self, target: &str, ordinal: u64) {
        let lane = self.lanes.entry(target.to_owned()).or_default();
        if lane.is_empty() {
            self.heads.insert(ordinal, target.to_owned());
        }
        lane.push_back(ordinal);
        self.len += 1;
    }

    fn remove(&mut self, target: &str, ordinal: u64) {
        let Some(lane) = self.lanes.get_mut(target) else {
            return;
        };
        let Some(at) = lane.iter().position(|o| *o == ordinal) else {
            return;
        };
        lane.remove(at);
        self.len -= 1;
        if at == 0 {
            self.heads.remove(&ordinal);
            match lane.front() {
                Some(next) => {
                    self.heads.insert(*next, target.to_owned());
                }
                None => {
                    self.lanes.remove(target);
                }
            }
        }
    }
}

#[derive(Default)]
pub(super) struct Book {
    entries: HashMap<String, Entry>,
    keys: HashMap<String, String>,
    /// Messages not yet final, per adapter.
    pending: HashMap<String, Lanes>,
    /// Every retained message by submit order, for compaction.
    order: BTreeMap<u64, String>,
    next_ordinal: u64,
    /// The highest QQ `msg_seq` handed out (a message with files holds one per file,
    /// [`Message::last_seq`]); the next one is one more, so no two retained messages share
    /// one.
    last_seq: u32,
    finished: Stats,
}

impl Book {
    pub(super) fn get(&self, id: &str) -> Option<&Message> {
        self.entries.get(id).map(|e| &e.message)
    }

    pub(super) fn by_key(&self, key: &str) -> Option<&Message> {
        self.keys.get(key).and_then(|id| self.get(id))
    }

    pub(super) fn latest_with_key_prefix(&self, prefix: &str) -> Option<&Message> {
        self.order
            .values()
            .rev()
            .map(|id| &self.entries[id].message)
            .find(|m| m.idempotency_key.starts_with(prefix))
    }

    pub(super) fn next_seq(&self) -> u32 {
        self.last_seq.wrapping_add(1).max(1)
    }

    /// Apply one journal record. A record for a message the book does not hold (its `put`
    /// was lost with a torn line, or compacted away) is ignored.
    pub(super) fn apply(&mut self, record: &Record) {
        match record {
            Record::Put { message } => self.put((**message).clone()),
            Record::Sending { id, at } => self.update(id, at, |m| {
                m.state = State::Sending;
                m.attempts += 1;
            }),
            Record::Sent {
                id,
                at,
                platform_id,
            } => self.update(id, at, |m| {
                m.state = State::Sent;
                m.platform_id.clone_from(platform_id);
            }),
            Record::Retry { id, at, error } => self.update(id, at, |m| {
                m.state = State::Queued;
                m.last_error = Some(error.clone());
            }),
            Record::Failed { id, at, error } => self.update(id, at, |m| {
                m.state = State::Failed;
                m.last_error = Some(error.clone());
            }),
            Record::Unknown { id, at, error } => self.update(id, at, |m| {
                m.state = State::Unknown;
                m.last_error = Some(error.clone());
            }),
        }
    }

    fn put(&mut self, message: Message) {
        if let Some(last) = message.last_seq() {
            self.last_seq = self.last_seq.max(last);
        }
        let ordinal = self.next_ordinal;
        self.next_ordinal += 1;
        if let Some(old) = self.entries.remove(&message.id) {
            self.forget_order(&old);
        }
        self.keys
            .insert(message.idempotency_key.clone(), message.id.clone());
        self.order.insert(ordinal, message.id.clone());
        if message.state.is_final() {
            count(&mut self.finished, message.state, 1);
        } else {
            self.pending
                .entry(message.adapter.clone())
                .or_default()
                .push(&message.target, ordinal);
        }
        self.entries.insert(
            message.id.clone(),
            Entry {
                message,
                ordinal,
                not_before: None,
                asked: None,
            },
        );
    }

    fn forget_order(&mut self, old: &Entry) {
        self.order.remove(&old.ordinal);
        if let Some(q) = self.pending.get_mut(&old.message.adapter) {
            q.remove(&old.message.target, old.ordinal);
        }
        if old.message.state.is_final() {
            count(&mut self.finished, old.message.state, -1);
        }
    }

    fn update(&mut self, id: &str, at: &str, change: impl FnOnce(&mut Message)) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let was_final = entry.message.state.is_final();
        change(&mut entry.message);
        entry.message.updated_at = at.to_owned();
        entry.not_before = None;
        entry.asked = None;
        let state = entry.message.state;
        if !was_final && state.is_final() {
            count(&mut self.finished, state, 1);
            if let Some(q) = self.pending.get_mut(&entry.message.adapter) {
                q.remove(&entry.message.target, entry.ordinal);
            }
        }
    }

    /// Hold a message back until `until` (it stays queued), of which the platform asked for
    /// the wait until `asked`.
    pub(super) fn defer(&mut self, id: &str, until: Instant, asked: Option<Instant>) {
        if let Some(e) = self.entries.get_mut(id) {
            e.not_before = Some(until);
            e.asked = asked;
        }
    }

    /// `adapter`'s connection is back: every message of its waiting out a backoff may go
    /// now, and one the platform asked to wait still waits for that. True if any changed.
    pub(super) fn retry_now(&mut self, adapter: &str, now: Instant) -> bool {
        let Some(queue) = self.pending.get(adapter) else {
            return false;
        };
        let mut changed = false;
        for ordinal in queue.heads.keys() {
            let Some(entry) = self.entries.get_mut(&self.order[ordinal]) else {
                continue;
            };
            if entry.not_before.is_some_and(|t| t > now) {
                entry.not_before = entry.asked.filter(|t| *t > now);
                changed = true;
            }
        }
        changed
    }

    /// The next message of `adapter` to send at `now`: the oldest one whose target has no
    /// older message still waiting (so each target gets its messages in order) and whose
    /// wait is over. Otherwise, when the earliest wait ends.
    pub(super) fn next(&self, adapter: &str, now: Instant) -> Next {
        let Some(queue) = self.pending.get(adapter) else {
            return Next::Idle;
        };
        let mut wake: Option<Instant> = None;
        for ordinal in queue.heads.keys() {
            let entry = &self.entries[&self.order[ordinal]];
            match entry.not_before {
                Some(t) if t > now => wake = Some(wake.map_or(t, |w| w.min(t))),
                _ => return Next::Send(Box::new(entry.message.clone())),
            }
        }
        wake.map_or(Next::Idle, Next::Wait)
    }

    pub(super) fn stats(&self, now: SystemTime) -> Stats {
        let mut stats = self.finished.clone();
        stats.depth = self.pending.values().map(|q| q.len as u64).sum();
        stats.oldest_queued_secs = self
            .pending
            .values()
            .filter_map(|q| q.heads.keys().next())
            .map(|ordinal| &self.entries[&self.order[ordinal]].message)
            .filter_map(|m| humantime::parse_rfc3339(&m.queued_at).ok())
            .min()
            .map(|oldest| {
                now.duration_since(oldest)
                    .unwrap_or(Duration::ZERO)
                    .as_secs()
            });
        stats
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// What a compacted journal holds: every message not yet final, and the newest
    /// [`RETAIN_FINISHED`] finished ones, in submit order. Drops the rest from memory too.
    pub(super) fn retain_for_compaction(&mut self) -> (Vec<Message>, Vec<Message>) {
        let finished: Vec<u64> = self
            .order
            .iter()
            .filter(|(_, id)| self.entries[*id].message.state.is_final())
            .map(|(o, _)| *o)
            .collect();
        let drop_count = finished.len().saturating_sub(RETAIN_FINISHED);
        let mut forgotten = Vec::with_capacity(drop_count);
        for ordinal in &finished[..drop_count] {
            if let Some(id) = self.order.remove(ordinal) {
                if let Some(e) = self.entries.remove(&id) {
                    self.keys.remove(&e.message.idempotency_key);
                    count(&mut self.finished, e.message.state, -1);
                    forgotten.push(e.message);
                }
            }
        }
        let kept = self
            .order
            .values()
            .map(|id| self.entries[id].message.clone())
            .collect();
        (kept, forgotten)
    }

    /// Every message not yet final.
    pub(super) fn pending(&self) -> impl Iterator<Item = &Message> {
        self.order
            .values()
            .map(|id| &self.entries[id].message)
            .filter(|m| !m.state.is_final())
    }
}

/// What a delivery worker does next.
#[derive(Debug, PartialEq)]
pub(crate) enum Next {
    Send(Box<Message>),
    /// Nothing to send before this instant.
    Wait(Instant),
    Idle,
}

fn count(stats: &mut Stats, state: State, by: i64) {
    let field = match state {
        State::Sent => &mut stats.sent,
        State::Failed => &mut stats.failed,
        State::Unknown => &mut stats.unknown,
        State::Queued | State::Sending => return,
    };
    *field = field.saturating_add_signed(by);
}
