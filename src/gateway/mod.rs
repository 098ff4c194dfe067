//! The gateway process that a unit runs: `hermes-svc gateway run --profile NAME`.

pub mod adapter;
pub(crate) mod cron;
pub(crate) mod exit;
pub(crate) mod fence;
pub(crate) mod flock;
pub(crate) mod grid;
pub mod health;
pub(crate) mod notify;
pub mod outbox;
pub mod pid_file;
pub mod platform_number;
pub(crate) mod replica;
pub mod send;
pub mod spool;
pub mod state_file;
pub(crate) mod token_lock;

/// Resolve once shutdown has been requested. The watch guard is dropped here, before any await
/// in the caller, so tasks that wait on it stay `Send`.
pub(crate) async fn until_shutdown(rx: &mut tokio::sync::watch::Receiver<bool>) {
    // An error means the sender is gone, which is a shutdown too.
    let _ = rx.wait_for(|stop| *stop).await.map(drop);
}
