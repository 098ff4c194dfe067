//! How every task of the mock learns that the platform is stopping: one watch channel, read
//! the same way by the listener, the connections and the generator.

use tokio::sync::watch;

/// Resolves once shutdown is requested or the platform handle is gone.
pub(super) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
