//! Answers to probes arrive in batches, so take each batch in one wake-up.
//!
//! Every WebSocket session's probes fall on one shared grid (`session::coalesce`; a wing's own
//! loop with probes two minutes apart is not counted), so a gateway with a thousand connections sends a grid
//! slot's heartbeats together, and the platform answers them together: on an aiohttp server,
//! one event-loop turn each, a tenth of a millisecond apart.
//! Woken for each answer, the gateway would pay a wake-up, a context switch and a turn of its
//! event loop per answer. So, as a network card coalesces its interrupts, the runtime thread
//! that wakes while probes are out waits one short window before it runs anything, and the
//! batch's other answers are read in the same turn: about two wake-ups a slot instead of one
//! an answer (docs/benchmarks.md has the figures).
//!
//! The wait is bounded three ways: only while two or more probes are out (one connection's
//! single answer is never held for nothing), at most once every few windows (the rest of a
//! batch is taken without waiting again), and never longer than the window, a delay no chat
//! message or liveness deadline can notice.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a wake-up is held for the rest of its batch: longer than a busy server takes to
/// answer a slot's probes, far shorter than anything a person or a deadline would notice.
const WINDOW: Duration = Duration::from_millis(2);

/// A held wake-up is followed by this many windows without holding, so that the batch it
/// gathered, and what trickles in after, is read at once.
const SPACING: u32 = 4;

/// Probes out across the process: the sum of every live connection's [`Outstanding`].
static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);
/// When a wake-up was last held, in microseconds since [`origin`] (0: never).
static LAST_HELD: AtomicU64 = AtomicU64::new(0);

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn micros_since_origin() -> u64 {
    u64::try_from(origin().elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// One connection's share of the probes out. Dropping it (the connection ended) takes back
/// whatever it still counted, answered or not.
#[derive(Debug)]
pub(crate) struct Outstanding {
    total: &'static AtomicUsize,
    mine: usize,
}

impl Default for Outstanding {
    fn default() -> Self {
        Self {
            total: &OUTSTANDING,
            mine: 0,
        }
    }
}

impl Outstanding {
    /// This connection now has `n` probes out.
    pub(crate) fn set(&mut self, n: usize) {
        match n.cmp(&self.mine) {
            std::cmp::Ordering::Greater => self.total.fetch_add(n - self.mine, Ordering::Relaxed),
            std::cmp::Ordering::Less => self.total.fetch_sub(self.mine - n, Ordering::Relaxed),
            std::cmp::Ordering::Equal => return,
        };
        self.mine = n;
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// Whether a wake-up with `outstanding` probes out, `since_held` after the last held one,
/// should be held for the rest of its batch.
fn should_hold(outstanding: usize, since_held: Duration) -> bool {
    outstanding >= 2 && since_held >= WINDOW * SPACING
}

/// The gateway runtime's unpark hook: hold this wake-up for one window if it is likely the
/// first of a batch of answers.
pub(crate) fn on_wake() {
    let now = micros_since_origin();
    let since = Duration::from_micros(now.saturating_sub(LAST_HELD.load(Ordering::Relaxed)));
    if should_hold(OUTSTANDING.load(Ordering::Relaxed), since) {
        std::thread::sleep(WINDOW);
        LAST_HELD.store(micros_since_origin(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wake_up_with_a_batch_out_and_none_held_lately_is_held() {
        let long_ago = WINDOW * SPACING;
        assert!(should_hold(2, long_ago));
        assert!(should_hold(1000, long_ago * 100));
        // One connection's answer is never held.
        assert!(!should_hold(1, long_ago));
        assert!(!should_hold(0, long_ago));
        // The rest of a batch, and what trickles in just after it, is taken at once.
        assert!(!should_hold(1000, long_ago - Duration::from_micros(1)));
        assert!(!should_hold(1000, Duration::ZERO));
    }

    #[test]
    fn a_connection_gives_back_its_probes_when_answered_or_gone() {
        static TOTAL: AtomicUsize = AtomicUsize::new(0);
        let counted = || TOTAL.load(Ordering::Relaxed);
        let mut a = Outstanding {
            total: &TOTAL,
            mine: 0,
        };
        let mut b = Outstanding {
            total: &TOTAL,
            mine: 0,
        };
        a.set(2);
        b.set(1);
        assert_eq!(counted(), 3);
        a.set(1);
        b.set(1);
        assert_eq!(counted(), 2);
        drop(b);
        assert_eq!(counted(), 1);
        drop(a);
        assert_eq!(counted(), 0);
    }
}
