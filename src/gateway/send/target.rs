//! The rules every platform's targets follow. An id often ends up as a segment of a
//! request's URL path, so anything that could end the segment, start a query, or climb out
//! of the path is refused before anything is sent; an id also keys the outbox's order per
//! target, and is held to the same rule where the platform has no path.

use super::TargetError;

/// Longer than any id a platform hands out (32-character openids, 20-digit snowflakes),
/// short enough that a pasted paragraph is refused.
pub(crate) const MAX_ID: usize = 128;

/// A target that does not read as the platform spells one: `expected` lists the forms and
/// `example` shows one.
pub(crate) fn malformed(text: &str, expected: &'static str, example: &'static str) -> TargetError {
    TargetError::Malformed {
        // The text may be anything a caller typed: keep the error a line long.
        target: text.chars().take(MAX_ID + 16).collect(),
        expected,
        example,
    }
}

/// An id safe as one URL path segment: not empty, not `.` or `..` (which a URL parser
/// resolves away), and without a character that ends the segment or the path (`/`, `\`,
/// `?`, `#`), escapes one (`%`), or is space or a control.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && !id.bytes().all(|b| b == b'.')
        && !id.chars().any(|c| {
            matches!(c, '/' | '\\' | '?' | '#' | '%') || c.is_whitespace() || c.is_control()
        })
}
