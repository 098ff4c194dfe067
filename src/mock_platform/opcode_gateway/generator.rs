//! The `dispatch_every` driver: one task for the whole platform, not one per session, so a
//! thousand sessions cost one timer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{interval_at, Instant, MissedTickBehavior};

use super::super::shutdown::stopped;
use super::state::Gateway;

pub(super) async fn run(
    shared: Arc<Gateway>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    // A zero period would make the interval fire continuously; treat it as "as fast as a
    // millisecond timer allows" instead of a busy loop.
    let every = every.max(Duration::from_millis(1));
    let mut ticks = interval_at(Instant::now() + every, every);
    // After a stall, catching up with a burst would distort rate-based measurements.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => return,
            _ = ticks.tick() => shared.generate(1),
        }
    }
}
