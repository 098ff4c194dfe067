//! The platform's ack timer: one task for the whole mock, sleeping until the earliest push
//! deadline (or until a new one is set), then pushing again what was not acked in time.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tokio::time::sleep_until;

use super::super::shutdown::stopped;
use super::super::state::Shared;

pub(crate) async fn run(shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let next = shared.feishu.redeliver_due(Instant::now());
        let deadline = async {
            match next {
                Some(at) => sleep_until(tokio::time::Instant::from_std(at)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stopped(&mut shutdown) => return,
            _ = shared.feishu.wake.notified() => {}
            _ = deadline => {}
        }
    }
}
