//! The dedupe window: which (adapter, event id) pairs the spool has seen lately.
//!
//! Replays and resumes deliver the same event twice, so the spool remembers the most recent
//! events' keys and writes an event only once. The window is bounded, so memory stays flat
//! however many events flow, and it is refilled from the files on open, so a replay after a
//! restart is still recognised.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::sync::Arc;

use serde::Deserialize;

use super::reader::open_regular;
use super::{io_err, SpoolError, FILE_NAME, ROTATED_NAME};
use crate::trusted_dir::TrustedDir;

/// Ids are only unique per platform, and two bots in one guild see the same message, so the
/// dedupe key is the adapter plus the id. Adapter names never contain a NUL.
pub(super) fn dedupe_key(adapter: &str, id: &str) -> String {
    format!("{adapter}\0{id}")
}

/// The last `cap` keys, in arrival order. The set answers "seen?", the queue says which id to
/// forget next, so memory stays at the window size however many events flow.
#[derive(Debug)]
pub(super) struct Window {
    set: HashSet<Arc<str>>,
    order: VecDeque<Arc<str>>,
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

    pub(super) fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }

    pub(super) fn insert(&mut self, id: &str) {
        if self.set.contains(id) {
            return;
        }
        let id: Arc<str> = Arc::from(id);
        self.set.insert(id.clone());
        self.order.push_back(id);
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
    let tail = |name: &str, keep: usize| -> Result<VecDeque<String>, SpoolError> {
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
