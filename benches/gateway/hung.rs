//! A hung long poll, timed, and a table's row of such trials: what the Telegram, Weixin and
//! Matrix sections share. The server
//! reads the request and never answers; the fault is armed while a poll is held, one message
//! then answers the held poll, the adapter stores it and polls again, and that poll hangs.
//! Detection is timed from the server counting the hung poll to the adapter leaving
//! `connected`.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use hermes_svc::gateway::health::State;

use crate::detection::{row, Running};
use crate::wing::{in_rounds, stored, trial_count, wait_stored};

/// A server that can hold a poll and never answer it.
pub(crate) trait Holds: Sync {
    /// `n` messages; their spool ids, in order.
    fn emit(&self, n: usize) -> impl Future<Output = Vec<String>> + Send;
    /// Every poll from now on held, until [`Holds::clear`].
    fn hang(&self) -> impl Future<Output = ()> + Send;
    fn clear(&self) -> impl Future<Output = ()> + Send;
    /// Polls the server has held without an answer.
    fn hung(&self) -> impl Future<Output = u64> + Send;
}

/// With `run` connected and its messages so far, `first`, stored: seconds from the server
/// holding the poll it will never answer to the adapter dropping it, and whether the reason
/// given was a dead connection. Each message must be stored once, in order.
pub(crate) async fn timed(
    server: &impl Holds,
    run: Running,
    dir: &Path,
    first: Vec<String>,
) -> (f64, bool) {
    // A poll is held now; wait into its hold at a random point, then hang the next one.
    tokio::time::sleep(Duration::from_millis(100 + fastrand::u64(0..1000))).await;
    server.hang().await;
    let hung = server.hung().await;
    let second = server.emit(1).await;
    // The next poll follows once the message is durable in the spool (its fsync can take a
    // second on a loaded disk), so the clock starts when the server holds that poll.
    let released = loop {
        if server.hung().await > hung {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let dropped = run.until(|v| v.state != State::Connected).await;
    let error = run.view().last_error.unwrap_or_default();
    server.clear().await;
    let third = server.emit(1).await;
    let all: Vec<String> = [first, second, third].concat();
    wait_stored(dir, &all, Duration::from_secs(20)).await;
    assert_eq!(stored(dir), all, "each message once, in order");
    run.stop().await;
    (
        (dropped - released).as_secs_f64(),
        error.contains("dead connection"),
    )
}

/// One row of a hung-poll table, `name`'s: `trial_count()` trials of `one(dir)`, timed against
/// `deadline_s`. Against an independent server they run one at a time: it is one Python
/// process per trial, and ten at once on two cores would time the machine's load. Returns the
/// row's count of drops for the right reason, as "NAME RIGHT/N".
pub(crate) async fn row_of<Fut>(
    name: &str,
    independent: bool,
    deadline_s: u64,
    dir: &Path,
    one: impl Fn(std::path::PathBuf) -> Fut,
) -> String
where
    Fut: Future<Output = (f64, bool)> + Send + 'static,
{
    let n = trial_count();
    let at_once = if independent { 1 } else { 10 };
    let got = in_rounds(n, at_once, dir, one).await;
    let took: Vec<f64> = got.iter().map(|g| g.0).collect();
    let right = got.iter().filter(|g| g.1).count();
    row(name, &took, 3, &format!("every trial ≤ {deadline_s}.05"));
    format!("{name} {right}/{n}")
}
