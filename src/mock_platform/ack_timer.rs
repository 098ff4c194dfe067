//! A platform's ack timer: one task for the whole mock per platform that redelivers, sleeping
//! until the earliest delivery's deadline (or until a new one is set), then delivering again
//! what was not acked in time. What is due, and what redelivery means, are the platform's.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{watch, Notify};
use tokio::time::sleep_until;

use super::shutdown::stopped;

/// A platform's deliveries that wait for an ack.
pub(super) trait Redelivers: Send + Sync + 'static {
    /// Delivers again (or gives up) what is due at `now`; the next deadline, if any.
    fn redeliver_due(&self, now: Instant) -> Option<Instant>;
    /// Notified whenever a delivery gets a deadline.
    fn deadline_set(&self) -> &Notify;
}

pub(super) async fn run(state: Arc<impl Redelivers>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let next = state.redeliver_due(Instant::now());
        let deadline = async {
            match next {
                Some(at) => sleep_until(tokio::time::Instant::from_std(at)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stopped(&mut shutdown) => return,
            _ = state.deadline_set().notified() => {}
            _ = deadline => {}
        }
    }
}
