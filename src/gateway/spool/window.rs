//! The dedupe window: which (adapter, event id) pairs the spool has seen lately.
//!
//! Replays and resumes deliver the same event twice, so the spool remembers the most recent
//! events' keys and writes an event only once. The window is bounded in entries and in bytes,
//! so memory stays flat however many events flow and however long their ids are: each key is
//! a 128-bit hash of the adapter and the id, never the id itself (a hostile platform's 1 MiB
//! ids once held 427 MB in a window of 400 events). It is refilled from the files on open, so
//! a replay after a restart is still recognised.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::reader::open_regular;
use super::{io_err, SpoolError, FILE_NAME, ROTATED_NAME};
use crate::trusted_dir::TrustedDir;

/// An (adapter, event id) pair, hashed: 16 bytes whatever the id's length. Ids are only
/// unique per platform, and two bots in one guild see the same message, so the adapter is part
/// of the key. 128 bits make a collision, which would drop an event as a repeat, as likely as
/// a random one among 2^64 events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct DedupeKey([u8; 16]);

pub(super) fn dedupe_key(adapter: &str, id: &str) -> DedupeKey {
    let mut hash = Sha256::new();
    hash.update(adapter.as_bytes());
    // Adapter names never contain a NUL, so no two pairs hash the same bytes.
    hash.update([0]);
    hash.update(id.as_bytes());
    let digest = hash.finalize();
    let mut key = [0; 16];
    key.copy_from_slice(&digest[..16]);
    DedupeKey(key)
}

impl DedupeKey {
    /// As a replica stores it: 32 hex digits.
    pub(super) fn tag(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Read back from [`DedupeKey::tag`]; `None` for anything else.
    pub(super) fn from_tag(tag: &str) -> Option<DedupeKey> {
        if tag.len() != 32 || !tag.is_ascii() {
            return None;
        }
        let mut key = [0; 16];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&tag[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(DedupeKey(key))
    }
}

/// The last `cap` keys, in arrival order. The set answers "seen?", the queue says which key to
/// forget next, so memory stays at the window size however many events flow.
#[derive(Debug)]
pub(super) struct Window {
    set: HashSet<DedupeKey>,
    order: VecDeque<DedupeKey>,
    cap: usize,
}

impl Window {
    fn new(cap: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            cap,
        }
    }

    pub(super) fn contains(&self, key: &DedupeKey) -> bool {
        self.set.contains(key)
    }

    pub(super) fn insert(&mut self, key: &DedupeKey) {
        if !self.set.insert(*key) {
            return;
        }
        self.order.push_back(*key);
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }
}

/// The dedupe keys of the last `cap` events, oldest first: the current file's tail, topped up from
/// the rotated file's tail when the current file holds fewer.
pub(super) fn load_window(dir: &TrustedDir, cap: usize) -> Result<Window, SpoolError> {
    #[derive(Deserialize)]
    struct Key {
        adapter: String,
        id: String,
    }
    let tail = |name: &str, keep: usize| -> Result<VecDeque<DedupeKey>, SpoolError> {
        let path = dir.path().join(name);
        let mut ids = VecDeque::new();
        let Some(file) = open_regular(dir, name)? else {
            return Ok(ids);
        };
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(io_err("read", &path))?;
            if n == 0 {
                break;
            }
            if let Ok(Key { adapter, id }) = serde_json::from_slice(&line) {
                ids.push_back(dedupe_key(&adapter, &id));
                if ids.len() > keep {
                    ids.pop_front();
                }
            }
        }
        Ok(ids)
    };
    let current = tail(FILE_NAME, cap)?;
    let older = if current.len() < cap {
        tail(ROTATED_NAME, cap - current.len())?
    } else {
        VecDeque::new()
    };
    let mut window = Window::new(cap);
    for id in older.iter().chain(current.iter()) {
        window.insert(id);
    }
    Ok(window)
}
