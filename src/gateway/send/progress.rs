//! How far an unfinished message with files got in this process: a platform that uploads a
//! file and then posts it (each in a request of its own) makes a message several requests, and
//! a retry after a 429 or a lost answer should neither upload again nor post again what the
//! platform already confirmed. Kept in memory only: after a crash the next life starts over,
//! and each wing's idempotency key for a post (fixed by the outbox id) keeps a repeated post
//! from showing twice; what that costs is at most an orphan upload per file.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Each unfinished message's [`Done`], by outbox message id. Forgotten when the message is
/// sent or fails; a message the outbox gives up on while it waits to retry leaves its entry,
/// a few uploads' worth.
pub(crate) struct Progress<U>(Mutex<HashMap<String, Done<U>>>);

impl<U> Default for Progress<U> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

/// What one message has done: `U` is what an upload gives a post (a content URI, a key, a
/// handle with its lifetime).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Done<U> {
    /// Each file's upload, once made.
    pub(crate) uploads: Vec<Option<U>>,
    /// Posts confirmed, counted from the first.
    pub(crate) posted: usize,
    /// The first post's id, which is the message's.
    pub(crate) first: Option<String>,
}

impl<U: Clone> Progress<U> {
    /// Where message `id` of `files` files stands.
    pub(crate) fn get(&self, id: &str, files: usize) -> Done<U> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut done = map.get(id).cloned().unwrap_or(Done {
            uploads: vec![],
            posted: 0,
            first: None,
        });
        done.uploads.resize(files, None);
        done
    }

    pub(crate) fn put(&self, id: &str, done: &Done<U>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(id.to_owned(), done.clone());
    }

    pub(crate) fn forget(&self, id: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(id);
    }

    /// Whether no message is remembered.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}
