//! Each Weixin peer's newest `context_token`, which a reply to that peer echoes, held within a
//! fixed budget.
//!
//! Every message from a new peer adds an entry, and the peer and token are the platform's
//! strings: a hostile or broken server sending 80 new peers a poll with 90 KB tokens grew the
//! old map to 3.9 GB in 30 s. So the map is bounded by count and by bytes, evicting the peers
//! heard from longest ago, and a peer or token longer than any real one (iLink's are a few
//! hundred bytes) is not kept at all. A peer evicted or refused gets replies without a
//! `context_token`, which iLink accepts, rather than costing the gateway its memory.

use std::collections::{HashMap, VecDeque};

/// The most peers remembered.
const MAX_PEERS: usize = 10_000;
/// The most bytes of peers and tokens remembered: 10,000 peers with real tokens fit easily.
const MAX_BYTES: usize = 8 * 1024 * 1024;
/// A peer id or token longer than this is not remembered.
const MAX_LEN: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct ContextTokens {
    /// Peer → its token, and the stamp of its newest entry in `order`.
    map: HashMap<String, (String, u64)>,
    /// Peers from the least recently heard from; an entry whose stamp is not the map's is
    /// stale (the peer was heard from again since) and is skipped.
    order: VecDeque<(String, u64)>,
    bytes: usize,
    next_stamp: u64,
}

impl ContextTokens {
    /// Remember `token` as `peer`'s newest; false when either is too long to keep.
    pub(crate) fn remember(&mut self, peer: &str, token: &str) -> bool {
        if peer.len() > MAX_LEN || token.len() > MAX_LEN {
            return false;
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        if let Some((old, _)) = self.map.insert(peer.to_owned(), (token.to_owned(), stamp)) {
            self.bytes -= peer.len() + old.len();
        }
        self.bytes += peer.len() + token.len();
        self.order.push_back((peer.to_owned(), stamp));
        while self.map.len() > MAX_PEERS || self.bytes > MAX_BYTES {
            self.evict_oldest();
        }
        // Stale entries of peers heard from again are dropped once they outnumber the live.
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order
                .retain(|(p, s)| map.get(p).is_some_and(|(_, live)| live == s));
        }
        true
    }

    pub(crate) fn get(&self, peer: &str) -> Option<String> {
        self.map.get(peer).map(|(token, _)| token.clone())
    }

    fn evict_oldest(&mut self) {
        while let Some((peer, stamp)) = self.order.pop_front() {
            if self.map.get(&peer).is_some_and(|(_, s)| *s == stamp) {
                if let Some((token, _)) = self.map.remove(&peer) {
                    self.bytes -= peer.len() + token.len();
                }
                return;
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_count_evicting_the_least_recently_heard() {
        let mut c = ContextTokens::default();
        for i in 0..MAX_PEERS + 5 {
            assert!(c.remember(&format!("p{i}"), "tok"));
            // p0 speaks again and again: never the oldest.
            c.remember("p0", "newest");
        }
        assert_eq!(c.len(), MAX_PEERS);
        assert_eq!(c.get("p0").as_deref(), Some("newest"));
        assert_eq!(c.get("p1"), None);
        assert_eq!(
            c.get(&format!("p{}", MAX_PEERS + 4)).as_deref(),
            Some("tok")
        );
        assert!(c.order.len() <= 2 * c.map.len() + 64);
    }

    #[test]
    fn bounded_by_bytes_and_long_strings_are_not_kept() {
        let mut c = ContextTokens::default();
        assert!(!c.remember("peer", &"x".repeat(90_000)));
        assert!(!c.remember(&"p".repeat(MAX_LEN + 1), "tok"));
        assert_eq!(c.get("peer"), None);
        let token = "t".repeat(MAX_LEN);
        for i in 0..5_000 {
            c.remember(&format!("peer-{i}"), &token);
        }
        assert!(c.bytes <= MAX_BYTES, "{}", c.bytes);
        let held: usize = c.map.iter().map(|(p, (t, _))| p.len() + t.len()).sum();
        assert_eq!(held, c.bytes);
        assert_eq!(c.get("peer-4999").as_deref(), Some(token.as_str()));
    }
}
