//! The platform's session start limit, shared by every adapter of a gateway that uses the
//! same credential.
//!
//! The op-code dialect allows one Identify per bucket every 5 s (bucket = shard id modulo
//! `max_concurrency`) and a daily budget of `total` session starts; going over the budget
//! resets the bot's token. `GET /gateway/bot` reports both as `session_start_limit` (the
//! dialect's "Session Start Limit" and "Identifying"; the platforms that speak it answer with
//! the same object). Like twilight's in-memory queue, each request books the earliest slot it may use, so waiters are served in
//! the order they asked and no slot is ever handed out twice. Resumes do not count against
//! the limit and never come here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::gateway::platform_number::{self, START_LIMIT_RESET};
use tokio::time::Instant;

/// One Identify per bucket per this long: the platform's 5 s, plus a margin so that an
/// Identify delayed on its way out (a busy host, a slow link) still reaches the platform 5 s
/// after the one before it, as the platform counts.
pub(crate) const IDENTIFY_SPACING: Duration = Duration::from_millis(5_250);

/// How long a fresh budget lasts when the platform has not said (the dialect's is a day).
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// `session_start_limit` as the platform reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionStartLimit {
    pub total: u32,
    pub remaining: u32,
    pub reset_after: Duration,
    pub max_concurrency: u32,
}

impl SessionStartLimit {
    /// Read it from a `/gateway/bot` answer; `None` when absent or malformed.
    pub(crate) fn from_json(v: &serde_json::Value) -> Option<Self> {
        let l = v.get("session_start_limit")?;
        let n = |k: &str| l.get(k)?.as_u64();
        Some(Self {
            total: n("total")?.try_into().ok()?,
            remaining: n("remaining")?.try_into().ok()?,
            reset_after: platform_number::millis(n("reset_after")?, START_LIMIT_RESET),
            max_concurrency: n("max_concurrency").unwrap_or(1).clamp(1, 1024) as u32,
        })
    }
}

/// The booking state of one credential. Pure: driven by explicit instants.
#[derive(Debug)]
struct Slots {
    /// When each bucket may next identify.
    buckets: Vec<Instant>,
    /// Session starts left before `reset_at`; `None` while the platform has not told us.
    remaining: Option<u32>,
    total: u32,
    reset_at: Instant,
}

impl Slots {
    fn new(now: Instant) -> Self {
        Self {
            buckets: vec![now],
            remaining: None,
            total: 1000,
            reset_at: now + DAY,
        }
    }

    fn update(&mut self, now: Instant, limit: SessionStartLimit) {
        let n = limit.max_concurrency as usize;
        if self.buckets.len() != n {
            let latest = self.buckets.iter().copied().max().unwrap_or(now);
            self.buckets = vec![latest.max(now); n];
        }
        self.total = limit.total.max(1);
        self.remaining = Some(limit.remaining);
        self.reset_at = now + limit.reset_after;
    }

    /// When `shard` could identify, without booking it.
    fn earliest(&self, now: Instant, shard: u32) -> Instant {
        let at = self.buckets[shard as usize % self.buckets.len()].max(now);
        if self.remaining == Some(0) && at < self.reset_at {
            self.reset_at
        } else {
            at
        }
    }

    /// Book the earliest instant at which `shard` may identify.
    fn book(&mut self, now: Instant, shard: u32) -> Instant {
        let bucket = shard as usize % self.buckets.len();
        let mut at = self.buckets[bucket].max(now);
        if at >= self.reset_at {
            self.remaining = self.remaining.map(|_| self.total);
            self.reset_at = at + DAY;
        }
        if self.remaining == Some(0) {
            // The budget is spent: wait for it to refill rather than get the token reset.
            at = at.max(self.reset_at);
            self.remaining = Some(self.total);
            self.reset_at = at + DAY;
        }
        self.remaining = self.remaining.map(|r| r.saturating_sub(1));
        self.buckets[bucket] = at + IDENTIFY_SPACING;
        at
    }
}

/// The queue key of a `platform`'s credential `identity`, hashed, so the key never holds a
/// secret.
pub(crate) fn key(platform: &str, identity: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{platform}\0{identity}"));
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Every credential's slots, for one gateway process.
#[derive(Clone, Debug, Default)]
pub(crate) struct IdentifyQueues {
    by_key: Arc<Mutex<HashMap<String, Arc<Mutex<Slots>>>>>,
}

/// One credential's queue.
#[derive(Clone, Debug)]
pub(crate) struct IdentifyQueue(Arc<Mutex<Slots>>);

impl IdentifyQueues {
    /// The queue for `key`, an identity of the credential (a hash, never the secret itself).
    pub(crate) fn queue(&self, key: &str) -> IdentifyQueue {
        let mut map = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        let slots = map
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(Slots::new(Instant::now()))));
        IdentifyQueue(slots.clone())
    }
}

impl IdentifyQueue {
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the platform just said about the limit.
    pub(crate) fn update(&self, limit: SessionStartLimit) {
        self.slots().update(Instant::now(), limit);
    }

    /// When `shard` could identify if it asked now (nothing is booked).
    pub(crate) fn earliest(&self, shard: u32) -> Instant {
        self.slots().earliest(Instant::now(), shard)
    }

    /// Book a slot for `shard`; the caller waits until the returned instant, then identifies.
    pub(crate) fn book(&self, shard: u32) -> Instant {
        self.slots().book(Instant::now(), shard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(remaining: u32, reset_after_s: u64, max_concurrency: u32) -> SessionStartLimit {
        SessionStartLimit {
            total: 1000,
            remaining,
            reset_after: Duration::from_secs(reset_after_s),
            max_concurrency,
        }
    }

    #[test]
    fn one_identify_per_bucket_every_five_seconds() {
        let t0 = Instant::now();
        let mut s = Slots::new(t0);
        s.update(t0, limit(1000, 3600, 1));
        let at: Vec<_> = (0..5).map(|_| s.book(t0, 0) - t0).collect();
        assert_eq!(at, (0..5).map(|i| IDENTIFY_SPACING * i).collect::<Vec<_>>());
        // Two buckets: shards 0 and 1 identify together, then wait their turn.
        let mut s = Slots::new(t0);
        s.update(t0, limit(1000, 3600, 2));
        assert_eq!(s.book(t0, 0), t0);
        assert_eq!(s.book(t0, 1), t0);
        assert_eq!(s.book(t0, 2), t0 + IDENTIFY_SPACING);
        // A later request is not held back by an old booking.
        assert_eq!(
            s.book(t0 + Duration::from_secs(60), 3),
            t0 + Duration::from_secs(60)
        );
    }

    #[test]
    fn a_spent_budget_waits_for_the_reset() {
        let t0 = Instant::now();
        let mut s = Slots::new(t0);
        s.update(t0, limit(1, 120, 1));
        assert_eq!(s.book(t0, 0), t0);
        assert_eq!(s.book(t0, 0), t0 + Duration::from_secs(120));
        // After the reset the budget is full again: spacing only.
        assert_eq!(
            s.book(t0, 0),
            t0 + Duration::from_secs(120) + IDENTIFY_SPACING
        );
        let mut s = Slots::new(t0);
        s.update(t0, limit(0, 30, 1));
        assert_eq!(s.earliest(t0, 0), t0 + Duration::from_secs(30));
        assert_eq!(s.book(t0, 0), t0 + Duration::from_secs(30));
        assert_eq!(
            s.earliest(t0, 0),
            t0 + Duration::from_secs(30) + IDENTIFY_SPACING
        );
    }

    #[test]
    fn an_unknown_limit_only_spaces() {
        let t0 = Instant::now();
        let mut s = Slots::new(t0);
        assert_eq!(s.book(t0, 0), t0);
        assert_eq!(s.book(t0, 0), t0 + IDENTIFY_SPACING);
    }

    #[test]
    fn parses_the_session_start_limit_object() {
        let v = serde_json::json!({"url": "wss://x", "session_start_limit":
            {"total": 1000, "remaining": 998, "reset_after": 14400000, "max_concurrency": 1}});
        assert_eq!(
            SessionStartLimit::from_json(&v),
            Some(limit(998, 14_400, 1))
        );
        assert_eq!(
            SessionStartLimit::from_json(&serde_json::json!({"url": "x"})),
            None
        );
    }
}
