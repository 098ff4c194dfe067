//! Split events put back together. The server sends a large event as `sum` data frames that
//! share one `message_id`, numbered by `seq` from 0; the event is their payloads in order.
//!
//! The SDKs keep the parts in a cache that forgets a message 5 s after its last part
//! (oapi-sdk-go `combine`, node-sdk `data-cache.ts`). So does this one, and it is bounded too,
//! in messages and in bytes, so that a server (or a peer pretending to be one) that starts
//! many split messages and finishes none cannot grow it without end. A message that is
//! forgotten was never acknowledged, so the server delivers it again.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// How long a split message may wait for its next part (the SDKs' cache lifetime).
pub(crate) const PART_TIMEOUT: Duration = Duration::from_secs(5);
/// Split messages waiting at once.
const MAX_MESSAGES: usize = 64;
/// Bytes of parts waiting at once, over every message.
const MAX_BYTES: usize = 32 << 20;
/// The most parts a message may be split into.
const MAX_PARTS: u32 = 1024;

/// What one part did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// The message is whole: its payload.
    Whole(Vec<u8>),
    /// More parts are due.
    Waiting,
    /// Not a part that can be placed (`seq` past `sum`, too many parts): dropped.
    Refused(&'static str),
}

struct Pending {
    parts: Vec<Option<Vec<u8>>>,
    bytes: usize,
    last: Instant,
}

/// The split messages waiting for parts, on one connection.
pub(crate) struct Reassembly {
    pending: HashMap<String, Pending>,
    bytes: usize,
    timeout: Duration,
}

impl Reassembly {
    pub(crate) fn new() -> Self {
        Self::with_timeout(PART_TIMEOUT)
    }

    pub(crate) fn with_timeout(timeout: Duration) -> Self {
        Self {
            pending: HashMap::new(),
            bytes: 0,
            timeout,
        }
    }

    /// Place part `seq` of `sum` of message `id`. A message that is not split (`sum` ≤ 1) is
    /// whole at once.
    pub(crate) fn add(
        &mut self,
        now: Instant,
        id: &str,
        sum: u32,
        seq: u32,
        payload: Vec<u8>,
    ) -> Part {
        if sum <= 1 {
            return Part::Whole(payload);
        }
        if sum > MAX_PARTS {
            return Part::Refused("split into more parts than are taken");
        }
        if seq >= sum {
            return Part::Refused("a part numbered past the message's last");
        }
        if payload.len() > MAX_BYTES {
            return Part::Refused("a part larger than all parts may be together");
        }
        self.expire(now);
        if let Some(p) = self.pending.get(id) {
            if p.parts.len() != sum as usize {
                // The same id with another count: start again with what this part says.
                self.forget(id);
            }
        }
        if !self.pending.contains_key(id) {
            while self.pending.len() >= MAX_MESSAGES {
                self.forget_oldest();
            }
            self.pending.insert(
                id.to_owned(),
                Pending {
                    parts: vec![None; sum as usize],
                    bytes: 0,
                    last: now,
                },
            );
        }
        while self.bytes + payload.len() > MAX_BYTES && self.pending.len() > 1 {
            self.forget_oldest_but(id);
        }
        if self.bytes + payload.len() > MAX_BYTES {
            self.forget(id);
            return Part::Refused("a split message larger than the cache takes");
        }
        let Some(p) = self.pending.get_mut(id) else {
            return Part::Refused("no room");
        };
        let len = payload.len();
        if let Some(old) = p.parts[seq as usize].replace(payload) {
            p.bytes -= old.len();
            self.bytes -= old.len();
        }
        p.bytes += len;
        self.bytes += len;
        p.last = now;
        if p.parts.iter().any(Option::is_none) {
            return Part::Waiting;
        }
        let p = self.pending.remove(id).expect("present");
        self.bytes -= p.bytes;
        Part::Whole(p.parts.into_iter().flatten().flatten().collect())
    }

    /// Forget every message that has waited past the timeout for its next part.
    pub(crate) fn expire(&mut self, now: Instant) {
        let timeout = self.timeout;
        let mut freed = 0;
        self.pending.retain(|_, p| {
            let keep = now.saturating_duration_since(p.last) < timeout;
            if !keep {
                freed += p.bytes;
            }
            keep
        });
        self.bytes -= freed;
    }

    /// Split messages waiting for parts.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.pending.len()
    }

    fn forget(&mut self, id: &str) {
        if let Some(p) = self.pending.remove(id) {
            self.bytes -= p.bytes;
        }
    }

    fn forget_oldest(&mut self) {
        self.forget_oldest_but("");
    }

    /// Forget the message whose last part is oldest, other than `keep`.
    fn forget_oldest_but(&mut self, keep: &str) {
        let oldest = self
            .pending
            .iter()
            .filter(|(id, _)| id.as_str() != keep || keep.is_empty())
            .min_by_key(|(_, p)| p.last)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            tracing::debug!(message_id = %id, "dropping a split message to make room");
            self.forget(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(r: &mut Reassembly, now: Instant, id: &str, sum: u32, seq: u32, p: &str) -> Part {
        r.add(now, id, sum, seq, p.as_bytes().to_vec())
    }

    #[test]
    fn parts_in_any_order_make_one_message() {
        let t = Instant::now();
        let mut r = Reassembly::new();
        assert_eq!(
            part(&mut r, t, "m", 1, 0, "{}"),
            Part::Whole(b"{}".to_vec())
        );
        assert_eq!(part(&mut r, t, "m", 3, 2, "c"), Part::Waiting);
        assert_eq!(part(&mut r, t, "m", 3, 0, "a"), Part::Waiting);
        // A part sent again replaces itself.
        assert_eq!(part(&mut r, t, "m", 3, 0, "a"), Part::Waiting);
        assert_eq!(
            part(&mut r, t, "m", 3, 1, "b"),
            Part::Whole(b"abc".to_vec())
        );
        assert_eq!((r.waiting(), r.bytes), (0, 0));
        // Interleaved messages do not mix.
        assert_eq!(part(&mut r, t, "x", 2, 0, "x0"), Part::Waiting);
        assert_eq!(part(&mut r, t, "y", 2, 1, "y1"), Part::Waiting);
        assert_eq!(
            part(&mut r, t, "x", 2, 1, "x1"),
            Part::Whole(b"x0x1".to_vec())
        );
        assert_eq!(
            part(&mut r, t, "y", 2, 0, "y0"),
            Part::Whole(b"y0y1".to_vec())
        );
    }

    #[test]
    fn a_message_whose_parts_stop_coming_is_forgotten() {
        let t = Instant::now();
        let mut r = Reassembly::new();
        assert_eq!(part(&mut r, t, "m", 2, 0, "a"), Part::Waiting);
        // Each part restarts the wait; past it, what came is gone.
        let later = t + PART_TIMEOUT - Duration::from_millis(1);
        r.expire(later);
        assert_eq!(r.waiting(), 1);
        r.expire(t + PART_TIMEOUT);
        assert_eq!((r.waiting(), r.bytes), (0, 0));
        // The late part alone is not the message.
        assert_eq!(
            part(&mut r, t + PART_TIMEOUT, "m", 2, 1, "b"),
            Part::Waiting
        );
    }

    #[test]
    fn parts_that_cannot_be_placed_are_refused() {
        let t = Instant::now();
        let mut r = Reassembly::new();
        assert!(matches!(part(&mut r, t, "m", 2, 2, "a"), Part::Refused(_)));
        assert!(matches!(
            part(&mut r, t, "m", MAX_PARTS + 1, 0, "a"),
            Part::Refused(_)
        ));
        assert_eq!(r.waiting(), 0);
        // A new count for the same id starts over.
        assert_eq!(part(&mut r, t, "m", 3, 0, "a"), Part::Waiting);
        assert_eq!(part(&mut r, t, "m", 2, 1, "b"), Part::Waiting);
        assert_eq!(part(&mut r, t, "m", 2, 0, "a"), Part::Whole(b"ab".to_vec()));
    }

    #[test]
    fn the_cache_is_bounded_in_messages_and_bytes() {
        let t = Instant::now();
        let mut r = Reassembly::new();
        for i in 0..(MAX_MESSAGES as u32 * 3) {
            let now = t + Duration::from_millis(u64::from(i));
            assert_eq!(
                part(&mut r, now, &format!("m{i}"), 2, 0, "a"),
                Part::Waiting
            );
            assert!(r.waiting() <= MAX_MESSAGES);
        }
        // The newest survived, the oldest made room.
        let last = MAX_MESSAGES as u32 * 3 - 1;
        let now = t + Duration::from_millis(u64::from(last));
        assert_eq!(
            part(&mut r, now, &format!("m{last}"), 2, 1, "b"),
            Part::Whole(b"ab".to_vec())
        );
        assert_eq!(part(&mut r, now, "m0", 2, 1, "b"), Part::Waiting);

        let mut r = Reassembly::new();
        let big = vec![b'x'; MAX_BYTES / 4 + 1];
        for i in 0..8u64 {
            let now = t + Duration::from_millis(i);
            assert_eq!(
                r.add(now, &format!("b{i}"), 2, 0, big.clone()),
                Part::Waiting
            );
            assert!(r.bytes <= MAX_BYTES, "{}", r.bytes);
        }
        assert!(r.waiting() <= 3);
    }
}
