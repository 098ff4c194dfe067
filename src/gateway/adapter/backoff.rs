//! Reconnect delays: exponential with decorrelated jitter, capped, reset after a stable
//! period, and never shorter than what the server asked for.
//!
//! Decorrelated jitter (each delay drawn between the minimum and three times the previous one)
//! spreads a crowd of clients that lost their connections at the same moment, and unlike full
//! jitter it never draws a near-zero delay, so a failing endpoint is never hammered.

use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    last: Option<Duration>,
    push_back: Option<Duration>,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max: max.max(min),
            last: None,
            push_back: None,
        }
    }

    /// The delay before the next attempt. `rand` yields uniform values in [0, 1).
    pub(crate) fn next_delay(&mut self, mut rand: impl FnMut() -> f64) -> Duration {
        // The first draw is jittered too, so clients that failed together do not retry together.
        let upper = self
            .last
            .unwrap_or(self.min)
            .saturating_mul(3)
            .min(self.max);
        let span = upper.saturating_sub(self.min);
        let mut d = (self.min + span.mul_f64(rand())).min(self.max);
        self.last = Some(d);
        if let Some(p) = self.push_back.take() {
            d = d.max(p);
        }
        d
    }

    /// After a stable connection: the next failure starts from the minimum again.
    pub(crate) fn reset(&mut self) {
        self.last = None;
    }

    /// The server asked us to wait at least `d` (e.g. QQ's rate-limit close 4008).
    pub(crate) fn push_back(&mut self, d: Duration) {
        self.push_back = Some(self.push_back.map_or(d, |p| p.max(d)));
    }

    pub(crate) fn max(&self) -> Duration {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_within_bounds_and_resets() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(5));
        let mut b = Backoff::new(min, max);
        let mut prev = min;
        for _ in 0..50 {
            let d = b.next_delay(fastrand::f64);
            assert!(d >= min && d <= max, "{d:?}");
            assert!(d <= prev * 3, "{d:?} after {prev:?}");
            prev = d;
        }
        // With the top of the range always drawn, the cap is reached and held.
        let mut b = Backoff::new(min, max);
        let ds: Vec<_> = (0..10).map(|_| b.next_delay(|| 0.999_999)).collect();
        assert!(ds[9] >= max - Duration::from_millis(1));
        b.reset();
        assert_eq!(b.next_delay(|| 0.0), min);
        // The first draw is jittered: up to three times the minimum.
        let mut b = Backoff::new(min, max);
        assert!(b.next_delay(|| 0.999_999) > min * 2);
    }

    #[test]
    fn push_back_is_honoured_once() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        b.push_back(Duration::from_secs(60));
        assert_eq!(b.next_delay(|| 0.0), Duration::from_secs(60));
        assert_eq!(b.next_delay(|| 0.0), Duration::from_millis(100));
    }
}
