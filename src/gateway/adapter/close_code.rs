//! What a WebSocket close code means for the session: what to do, and the platform's words.
//!
//! Platforms that share a dialect's opcodes need not share its close codes (one code can be a
//! rejected credential on one and a stale token on another), so each platform keeps its own
//! table, transcribed from its own page, in its wing; this is how a table is read.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseAction {
    /// Reconnect and resume with the last seq.
    Resume,
    /// Reconnect and identify afresh: the session is gone, or was never valid.
    Reidentify,
    /// The access token is stale: drop it, fetch a new one, and resume.
    RefreshToken,
    /// The server asked us to slow down: wait at least this long, then resume.
    PushBack(Duration),
    /// Retrying cannot help (bad credentials, bad intents, banned): exit 78.
    Fatal,
}

/// One row of a platform's table: a range of codes, what to do, and what the platform says
/// the code means (shown in the adapter's last error and, when fatal, in the exit message).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) first: u16,
    pub(crate) last: u16,
    pub(crate) action: CloseAction,
    pub(crate) meaning: &'static str,
}

pub(crate) const fn row(
    first: u16,
    last: u16,
    action: CloseAction,
    meaning: &'static str,
) -> Entry {
    Entry {
        first,
        last,
        action,
        meaning,
    }
}

/// What to do after the server closed with `code`, by `table`. `None` is a connection that
/// ended without a close frame (or with a transport-level code such as 1000, 1001 or 1006):
/// resume, and let the server say if it cannot. A code the table does not know is resumed
/// too, because a new code is far more often transient than fatal.
pub(crate) fn classify(table: &[Entry], code: Option<u16>) -> (CloseAction, &'static str) {
    let Some(code) = code else {
        return (CloseAction::Resume, "no close frame");
    };
    table
        .iter()
        .find(|e| (e.first..=e.last).contains(&code))
        .map_or((CloseAction::Resume, "not in the platform's table"), |e| {
            (e.action, e.meaning)
        })
}

/// Whether `table`'s rows are in order and apart, so that a code has one meaning.
#[cfg(test)]
pub(crate) fn assert_ordered(table: &[Entry]) {
    for (i, a) in table.iter().enumerate() {
        assert!(a.first <= a.last);
        for b in &table[i + 1..] {
            assert!(a.last < b.first, "{} overlaps {}", a.first, b.first);
        }
    }
}
