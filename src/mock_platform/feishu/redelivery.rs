//! The platform's ack timer: one task for the whole mock, sleeping until the earliest push
//! deadline (or until a new one is set), then pushing again what was not acked in time.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tokio::time::sleep_until;

use super::super::shutdown::stopped;
use super::state::FeishuState;

pub(crate) async fn run(state: Arc<FeishuState>, mut shutdown: watch::Receiver<bool>) {
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
            _ = state.wake.notified() => {}
            _ = deadline => {}
        }
    }
}
