//! One log line per window for something that can happen thousands of times a second (a
//! refused dial from a client that keeps trying): the first is said at once, the rest of the
//! window are counted, and the next line says how many there were. So a flood costs the journal
//! a line per window, not a line per event, and the gateway's own lines stay under journald's
//! rate limit.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct Throttle {
    every: Duration,
    /// When the last line was said, and how many were not said since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    pub(crate) const fn new(every: Duration) -> Self {
        Self {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Whether to say a line for one more occurrence at `now`: `Some(n)` with the `n` that
    /// were not said since the last line, or `None` to count this one instead.
    pub(crate) fn note(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (last, held) = &mut *state;
        if last.is_some_and(|at| now.saturating_duration_since(at) < self.every) {
            *held += 1;
            return None;
        }
        *last = Some(now);
        Some(std::mem::take(held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_window_and_the_next_says_how_many_were_held() {
        let t = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(t.note(t0), Some(0));
        let said = (1..3000)
            .filter(|i| t.note(t0 + Duration::from_micros(*i)).is_some())
            .count();
        assert_eq!(said, 0);
        assert_eq!(t.note(t0 + Duration::from_secs(10)), Some(2999));
        assert_eq!(t.note(t0 + Duration::from_secs(11)), None);
    }
}
