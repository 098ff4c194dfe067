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
//!
//! A wait a platform asks for is read by one rule, [`platform_wait`], whatever the platform
//! and whichever path reads it (docs/research/round-three.md §2): a zero wait on a refusal
//! was a hot loop (52,857 requests in 8 s), and `1e308` parked one platform's adapter for a
//! day while another's was cut to an hour.

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
/// `Retry-After` header, a rate-limit reset header), read by [`platform_wait`]. The floor
/// is for refusals only ([`WaitKind`]): one request a second per adapter is what a server that
/// says "wait 0" gets, and 1 s is the smallest non-zero `delay-seconds` (RFC 9110) and our
/// `backoff-min` default. The ceiling is an hour: far below the outbox's day-long message
/// deadline, so a capped message still gets tries, and a limit that still holds after it is
/// said again, with its real remaining time, by the next refusal.
pub const PLATFORM_WAIT: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(3600),
};

/// What a platform's wait answers, which decides whether the floor applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// The request was refused (a 429, a flood or frequency limit): asking again at once
    /// would only be refused again, so the wait is at least [`PLATFORM_WAIT`]'s floor.
    Refusal,
    /// The request was taken and the platform paces the next one (a rate-limit bucket's
    /// reset header, with none remaining): its sub-second resets are kept.
    Pacing,
}

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

/// A wait a platform asked for, in seconds with a fraction (one given in milliseconds is
/// divided by 1000 first), by the one rule: NaN or negative is not given (`None`: the caller's
/// default applies, never 0); a refusal waits at least a second; anything past an hour, or
/// past what a `Duration` holds, is an hour, and the log says it was cut. Rounded up to a
/// whole millisecond, so a wait never ends before the one asked for.
pub fn platform_wait(secs: f64, kind: WaitKind) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    let cap = PLATFORM_WAIT.max;
    if secs > cap.as_secs_f64() {
        tracing::warn!(
            asked_s = secs,
            capped_s = cap.as_secs(),
            "the platform asked for a wait longer than an hour; waiting an hour, then asking again"
        );
        return Some(cap);
    }
    // At most an hour, so the milliseconds fit a u64 exactly.
    let d = Duration::from_millis((secs * 1000.0).ceil() as u64);
    Some(match kind {
        WaitKind::Refusal => d.max(PLATFORM_WAIT.min),
        WaitKind::Pacing => d,
    })
}

/// [`platform_wait`] for a JSON number or a string of one (a body's `retry_after`).
pub fn platform_wait_json(v: &Value, kind: WaitKind) -> Option<Duration> {
    match v {
        Value::Number(n) => platform_wait(n.as_f64()?, kind),
        Value::String(s) => platform_wait_text(s, kind),
        _ => None,
    }
}

/// [`platform_wait`] for a header's text (`Retry-After: 65`, `X-RateLimit-Reset-After:
/// 64.57`). A fraction is taken (rate-limit headers carry one; a `Retry-After: 1.5` means
/// no less). The HTTP-date form of `Retry-After` is not read: no platform we speak sends it, and
/// it reads as not given.
pub fn platform_wait_text(text: &str, kind: WaitKind) -> Option<Duration> {
    platform_wait(text.trim().parse().ok()?, kind)
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
    fn absurd_numbers_are_the_range_end_and_nonsense_is_none() {
        let r = START_LIMIT_RESET;
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

    const SEC: Duration = Duration::from_secs(1);
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_refusal_waits_a_second_to_an_hour_and_nonsense_is_not_given() {
        let w = |s| platform_wait(s, WaitKind::Refusal);
        assert_eq!(w(0.0), Some(SEC));
        assert_eq!(w(0.001), Some(SEC));
        assert_eq!(w(-1.0), None);
        assert_eq!(w(f64::NAN), None);
        assert_eq!(w(1.5), Some(Duration::from_millis(1500)));
        assert_eq!(
            w(1.000_000_1),
            Some(Duration::from_millis(1001)),
            "rounded up"
        );
        assert_eq!(w(3600.0), Some(HOUR));
        assert_eq!(w(86_400.0), Some(HOUR));
        assert_eq!(w(1e308), Some(HOUR));
        assert_eq!(w(f64::INFINITY), Some(HOUR));
        assert_eq!(w(f64::NEG_INFINITY), None);
    }

    #[test]
    fn pacing_keeps_its_fractions_and_zero() {
        let w = |s| platform_wait(s, WaitKind::Pacing);
        assert_eq!(w(0.0), Some(Duration::ZERO));
        assert_eq!(w(0.25), Some(Duration::from_millis(250)));
        assert_eq!(w(1e308), Some(HOUR));
        assert_eq!(w(-0.5), None);
    }

    #[test]
    fn waits_read_from_json_and_header_text() {
        let r = WaitKind::Refusal;
        for (v, want) in [
            (json!(0), Some(SEC)),
            (json!(-1), None),
            (json!("1.5"), Some(Duration::from_millis(1500))),
            (json!("NaN"), None),
            (json!(86_400), Some(HOUR)),
            (json!(1e308), Some(HOUR)),
            (json!("inf"), Some(HOUR)),
            (json!("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            (json!(null), None),
            (json!([1]), None),
        ] {
            assert_eq!(platform_wait_json(&v, r), want, "{v}");
        }
        assert_eq!(platform_wait_text(" 7 ", r), Some(Duration::from_secs(7)));
        assert_eq!(platform_wait_text("", r), None);
    }

    #[test]
    fn the_offset_after_the_last_id_is_none() {
        assert_eq!(offset_after(41), Some(42));
        assert_eq!(offset_after(i64::MAX), None);
    }
}
