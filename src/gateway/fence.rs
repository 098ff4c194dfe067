//! Whether this process may act on the platforms now: send, acknowledge, hold a session.
//!
//! On one machine it always may (the kernel's locks cannot be lost). In a cluster it may only
//! until its etcd lease could expire, less a margin: no platform checks a fencing token, so the
//! gateway must stop acting on its own before another host can take over (docs/cluster.md).
//! The deadline is kept on the monotonic clock, which runs on while the process is stopped
//! (SIGSTOP): a process that wakes after its lease is gone finds the fence closed before it
//! sends anything, whatever its other tasks have yet to notice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub(crate) struct Fence(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    base: Instant,
    /// Nanoseconds after `base` until which acting is allowed; `u64::MAX`, always.
    until: AtomicU64,
}

impl Fence {
    /// A fence that always holds: one machine's ownership.
    pub(crate) fn open() -> Fence {
        Fence::at(u64::MAX)
    }

    /// A fence that holds nowhere yet: a cluster member before it has won a term.
    pub(crate) fn closed() -> Fence {
        Fence::at(0)
    }

    fn at(until: u64) -> Fence {
        Fence(Arc::new(Inner {
            base: Instant::now(),
            until: AtomicU64::new(until),
        }))
    }

    /// May the process act now?
    pub(crate) fn holds(&self) -> bool {
        let now = self.0.base.elapsed().as_nanos();
        now < u128::from(self.0.until.load(Ordering::Acquire))
    }

    /// Acting is allowed until `at` (a renewal moved the deadline).
    pub(crate) fn hold_until(&self, at: Instant) {
        let nanos = at.saturating_duration_since(self.0.base).as_nanos();
        self.0.until.store(
            u64::try_from(nanos).unwrap_or(u64::MAX - 1),
            Ordering::Release,
        );
    }

    /// Acting stops now.
    pub(crate) fn close(&self) {
        self.0.until.store(0, Ordering::Release);
    }

    /// When acting stops; `None` for a fence that always holds.
    pub(crate) fn until(&self) -> Option<Instant> {
        match self.0.until.load(Ordering::Acquire) {
            u64::MAX => None,
            n => Some(self.0.base + Duration::from_nanos(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_holds_until_its_deadline_and_not_after_close() {
        assert!(Fence::open().holds());
        assert!(Fence::open().until().is_none());
        let f = Fence::closed();
        assert!(!f.holds());
        f.hold_until(Instant::now() + Duration::from_secs(60));
        assert!(f.holds());
        f.hold_until(Instant::now() - Duration::from_millis(1));
        assert!(!f.holds());
        f.hold_until(Instant::now() + Duration::from_secs(60));
        f.close();
        assert!(!f.holds());
    }
}
