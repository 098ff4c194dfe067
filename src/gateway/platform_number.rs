//! Numbers a platform sends that become a wait, a lifetime, an interval or a cursor.
//!
//! A platform's number is input like any other, and the arithmetic it feeds can panic or
//! overflow: `retry_after: 1e308` panicked in `Duration::from_secs_f64`, a lifetime of
//! `u64::MAX` seconds overflows `Instant + lifetime`, a heartbeat interval of 1 ms is a busy
//! loop, and `update_id` `i64::MAX` wraps the next poll's offset. So every such number is read
//! here, once, into a value inside a stated range: whatever a platform sends, what comes out
//! can be added to `Instant::now()` and `SystemTime::now()`, and waited on, safely.
//!
//! A value that is missing, negative or not a number reads as `None` (the caller's default
//! applies); one past its range is cut to the range's end.

use std::time::Duration;

use serde_json::Value;

/// The values a kind of number may take, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub min: Duration,
    pub max: Duration,
}

impl Range {
    pub fn clamp(self, d: Duration) -> Duration {
        d.clamp(self.min, self.max)
    }
}

/// A wait a platform asks for before the next request (a body's `retry_after`, a
/// `Retry-After` header, a rate-limit reset header). A wait of a day is
/// already one the outbox gives a message up on.
pub const RETRY_WAIT: Range = Range {
    min: Duration::ZERO,
    max: Duration::from_secs(24 * 3600),
};

/// An access token's lifetime (`expires_in`, `expire`), two hours in practice on the
/// platforms that hand them out. A longer claim only means the token is fetched again sooner than it need be.
pub const TOKEN_LIFETIME: Range = Range {
    min: Duration::ZERO,
    max: Duration::from_secs(7 * 24 * 3600),
};

/// The heartbeat interval a Hello asks for (41.25 s on the op-code platforms). Below the floor the
/// gateway would heartbeat in a tight loop; past the ceiling a half-open connection would go
/// unnoticed for longer than any platform asks.
pub const HEARTBEAT_INTERVAL: Range = Range {
    min: Duration::from_millis(100),
    max: Duration::from_secs(3600),
};

/// When the op-code dialect's session start limit resets (`reset_after`, at most a day by
/// its docs).
pub const START_LIMIT_RESET: Range = Range {
    min: Duration::ZERO,
    max: Duration::from_secs(24 * 3600),
};

/// Seconds, with a fraction, as a platform writes them into JSON or a header.
pub fn seconds_f64(secs: f64, range: Range) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    // `try_from_secs_f64` refuses what does not fit a Duration (and infinity): that is past
    // any range's end.
    let d = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
    Some(range.clamp(d))
}

/// Seconds as a JSON number (whole or not) or a string of them (QQ sends `"7200"`).
pub fn seconds_json(v: &Value, range: Range) -> Option<Duration> {
    let secs = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    seconds_f64(secs, range)
}

/// Whole milliseconds.
pub fn millis(ms: u64, range: Range) -> Duration {
    range.clamp(Duration::from_millis(ms))
}

/// The `offset` that confirms every update up to `update_id`, for a long poll that confirms by
/// offset: one past it, or `None` when there is no such `i64` (the id is at its end, or the
/// platform sent nonsense): then the update cannot be confirmed and the poller must not treat
/// it as progress.
pub fn offset_after(update_id: i64) -> Option<i64> {
    update_id.checked_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absurd_waits_are_the_longest_wait_and_nonsense_is_none() {
        let r = RETRY_WAIT;
        assert_eq!(seconds_f64(1e308, r), Some(r.max));
        assert_eq!(seconds_f64(f64::INFINITY, r), Some(r.max));
        assert_eq!(seconds_f64(f64::NAN, r), None);
        assert_eq!(seconds_f64(-1.0, r), None);
        assert_eq!(seconds_f64(64.57, r), Some(Duration::from_secs_f64(64.57)));
        assert_eq!(
            seconds_json(&json!("7200"), TOKEN_LIFETIME),
            Some(Duration::from_secs(7200))
        );
        assert_eq!(
            seconds_json(&json!(u64::MAX), TOKEN_LIFETIME),
            Some(TOKEN_LIFETIME.max)
        );
        assert_eq!(seconds_json(&json!([1]), TOKEN_LIFETIME), None);
        assert_eq!(millis(1, HEARTBEAT_INTERVAL), HEARTBEAT_INTERVAL.min);
        assert_eq!(millis(u64::MAX, HEARTBEAT_INTERVAL), HEARTBEAT_INTERVAL.max);
    }

    #[test]
    fn the_offset_after_the_last_id_is_none() {
        assert_eq!(offset_after(41), Some(42));
        assert_eq!(offset_after(i64::MAX), None);
    }
}
