//! A planned reconnect with no gap: a chain of connections that the supervisor sees as one.
//!
//! Some platforms announce that they are about to move a connection, and leave it open for a
//! while after saying so. Ending it at once and connecting again leaves a window in which no
//! socket is read. A chain instead opens the successor while the old link still reads and
//! acknowledges, and stops the old link only once the successor is up:
//!
//! - a link tells the chain, through its [`Signals`], that the platform asked to move
//!   ([`Signal::Refresh`]) and that it is up ([`Signal::Up`]), each tagged with its place in
//!   the chain, so a late word from a link that is gone changes nothing;
//! - a successor that fails before it is up is dropped, and the old link goes on until it
//!   ends, after which the chain ends as any connection does (the supervisor reconnects);
//! - an old link that ends before its successor is up hands over to it all the same;
//! - on shutdown every link closes its socket and flushes what it stored.
//!
//! How a link is started (its setup and its session) is the caller's: a closure that gives a
//! boxed future per link, from a [`Start`].

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::setup::PlatformError;
use super::supervise::{Ended, Step};
use crate::gateway::health::{Heartbeat, State};

/// What a link tells the chain while it runs.
#[derive(Debug, PartialEq)]
pub(crate) enum Signal {
    /// The link is up: as a successor, it can take over.
    Up,
    /// The platform asked for a new connection (the reason it gave); this link goes on
    /// reading and acknowledging until it is stopped or ends.
    Refresh(String),
}

/// A link's line to its chain, tagged with the link's place in it.
#[derive(Clone)]
pub(crate) struct Signals {
    tx: mpsc::UnboundedSender<(u64, Signal)>,
    generation: u64,
}

impl Signals {
    pub(crate) fn up(&self) {
        let _ = self.tx.send((self.generation, Signal::Up));
    }

    pub(crate) fn refresh(&self, reason: impl Into<String>) {
        let _ = self
            .tx
            .send((self.generation, Signal::Refresh(reason.into())));
    }
}

/// What a link is started with.
pub(crate) struct Start {
    /// Opened beside a live link that the platform asked to replace: the adapter is
    /// connected meanwhile, and is not said to be connecting.
    pub(crate) successor: bool,
    pub(crate) signals: Signals,
    /// Set when the chain stops the link (handed over, or shutdown): it closes its socket
    /// and returns, ending as its [`LinkEnd::shutdown`].
    pub(crate) stop: watch::Receiver<bool>,
}

impl Start {
    /// The address this link connects to, asked with `open` (a platform's one-use URL or
    /// ticket, fresh for each link) unless the link is stopped first. A refusal no retry
    /// helps ends the link as [`LinkEnd::refused`], any other failure as [`LinkEnd::failed`].
    pub(crate) async fn address<E: LinkEnd>(
        &mut self,
        name: &str,
        open: impl Future<Output = Result<String, PlatformError>>,
    ) -> Result<String, Outcome<E>> {
        let url = tokio::select! {
            r = open => r,
            _ = crate::gateway::until_shutdown(&mut self.stop) => {
                return Err(Outcome::ended(E::shutdown()))
            }
        };
        match url {
            Ok(url) => Ok(url),
            Err(PlatformError::Fatal(m)) => Err(Outcome::ended(E::refused(m))),
            Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                tracing::warn!(adapter = %name, error = %m, "no address to connect to");
                Err(Outcome::ended(E::failed(m)))
            }
        }
    }
}

/// How one link, or the whole chain, ended.
#[derive(Debug)]
pub(crate) struct Outcome<E> {
    pub(crate) end: E,
    /// How long it was up (summed over the chain's links), if it ever was.
    pub(crate) connected_for: Option<Duration>,
    /// Events stored over it.
    pub(crate) stored: u64,
}

impl<E> Outcome<E> {
    /// A link that ended before it was up.
    pub(crate) fn ended(end: E) -> Self {
        Outcome {
            end,
            connected_for: None,
            stored: 0,
        }
    }

    /// The supervisor's view of a chain that ended: `step` reads the end. A chain that never
    /// connected and goes again is connecting meanwhile, whatever its links said last.
    pub(crate) fn settle(self, heartbeat: &Heartbeat, step: impl FnOnce(E) -> Step) -> Ended {
        let step = step(self.end);
        if self.connected_for.is_none() && matches!(step, Step::Again { .. }) {
            heartbeat.enter(State::Connecting);
        }
        Ended {
            step,
            connected_for: self.connected_for,
            progressed: self.stored > 0,
        }
    }
}

/// A link's end, as much as the chain needs to know of it.
pub(crate) trait LinkEnd: Debug + Send {
    /// How a link ends when it is stopped.
    fn shutdown() -> Self;
    fn is_shutdown(&self) -> bool;
    /// The platform refused the link in a way no retry helps: the fix.
    fn refused(fix: String) -> Self;
    /// The link could not be set up; a retry may help.
    fn failed(why: String) -> Self;
}

/// One link's run: its setup, then its session.
pub(crate) type Run<'a, E> = Pin<Box<dyn Future<Output = Outcome<E>> + Send + 'a>>;

/// One running link: its run, the switch that stops it, its place in the chain.
struct Live<'a, E> {
    run: Run<'a, E>,
    stop: watch::Sender<bool>,
    generation: u64,
}

/// What woke the chain.
enum Woke<E> {
    Current(Outcome<E>),
    Next(Outcome<E>),
    Signal(u64, Signal),
    Shutdown,
}

/// Run links started by `start` until one ends with no successor to take over, or until
/// `shutdown`; the chain's end is the last link's, its time up and events stored the sum.
pub(crate) async fn run<'a, E, F>(
    name: &str,
    mut shutdown: watch::Receiver<bool>,
    mut start: F,
) -> Outcome<E>
where
    E: LinkEnd + 'a,
    F: FnMut(Start) -> Run<'a, E> + Send,
{
    let (tx, mut signalled) = mpsc::unbounded_channel();
    let mut open = |generation: u64, successor: bool| {
        let (stop, stopped) = watch::channel(false);
        let signals = Signals {
            tx: tx.clone(),
            generation,
        };
        let run = start(Start {
            successor,
            signals,
            stop: stopped,
        });
        Live {
            run,
            stop,
            generation,
        }
    };
    let mut current = open(0, false);
    let mut next: Option<Live<'a, E>> = None;
    // The successor is up: the current link is being stopped for it.
    let mut handing_over = false;
    let (mut connected_for, mut stored) = (None::<Duration>, 0);
    let mut add = |out: &Outcome<E>| {
        stored += out.stored;
        if let Some(d) = out.connected_for {
            connected_for = Some(connected_for.unwrap_or_default() + d);
        }
    };
    let end = loop {
        let woke = tokio::select! {
            out = &mut current.run => Woke::Current(out),
            out = successor(&mut next) => Woke::Next(out),
            Some((generation, signal)) = signalled.recv() => Woke::Signal(generation, signal),
            _ = crate::gateway::until_shutdown(&mut shutdown) => Woke::Shutdown,
        };
        match woke {
            Woke::Current(out) => {
                add(&out);
                match next.take() {
                    // Stopped for its successor, or ended by the platform before the
                    // successor was up: either way the successor goes on.
                    Some(successor) if handing_over || !out.end.is_shutdown() => {
                        if !handing_over {
                            tracing::info!(adapter = %name, end = ?out.end, "the connection ended before its successor was up");
                        }
                        current = successor;
                        handing_over = false;
                    }
                    _ => break out.end,
                }
            }
            Woke::Next(out) => {
                // The successor ended before it took over; the current link goes on, and
                // when it ends, the next connection is opened as after any end.
                add(&out);
                tracing::warn!(adapter = %name, end = ?out.end, "the connection opened to replace this one did not come up");
                next = None;
            }
            Woke::Signal(generation, Signal::Refresh(reason)) => {
                if generation == current.generation && next.is_none() {
                    tracing::info!(adapter = %name, reason = %crate::safe_text::clip(&reason, 200), "the platform asked for a new connection; opening it before closing this one");
                    next = Some(open(generation + 1, true));
                }
            }
            Woke::Signal(generation, Signal::Up) => {
                if next.as_ref().is_some_and(|n| n.generation == generation) {
                    handing_over = true;
                    let _ = current.stop.send(true);
                }
            }
            Woke::Shutdown => {
                // Each closes its socket (a second at most) and flushes what it stored.
                let _ = current.stop.send(true);
                if let Some(mut n) = next.take() {
                    let _ = n.stop.send(true);
                    add(&n.run.as_mut().await);
                }
                add(&current.run.as_mut().await);
                break E::shutdown();
            }
        }
    };
    Outcome {
        end,
        connected_for,
        stored,
    }
}

/// The successor's end, if one is running; otherwise never.
async fn successor<E>(next: &mut Option<Live<'_, E>>) -> Outcome<E> {
    match next {
        Some(n) => n.run.as_mut().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Debug, PartialEq)]
    enum End {
        Shutdown,
        Closed(&'static str),
        NotSetUp(String),
    }

    impl LinkEnd for End {
        fn shutdown() -> Self {
            End::Shutdown
        }
        fn is_shutdown(&self) -> bool {
            *self == End::Shutdown
        }
        fn refused(fix: String) -> Self {
            End::NotSetUp(fix)
        }
        fn failed(why: String) -> Self {
            End::NotSetUp(why)
        }
    }

    /// What a scripted link does.
    #[derive(Clone, Copy)]
    enum Script {
        /// Up, then asks to move, then runs until stopped.
        UpThenRefresh,
        /// Up, then runs until stopped.
        Up,
        /// Fails before it is up.
        Fails,
        /// Up, asks to move, then is closed by the platform soon after.
        RefreshThenClosed,
    }

    /// A chain whose links follow `scripts` in turn; the log of what each link did.
    async fn chain(
        scripts: Vec<Script>,
        shutdown: watch::Receiver<bool>,
    ) -> (Outcome<End>, Vec<String>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut scripts = scripts.into_iter();
        let out = run("t", shutdown, |s: Start| {
            let script = scripts.next().unwrap_or(Script::Fails);
            let log = log.clone();
            Box::pin(async move {
                let Start {
                    successor,
                    signals,
                    mut stop,
                } = s;
                let say = |m: String| log.lock().unwrap().push(m);
                say(format!("start {successor}"));
                if let Script::Fails = script {
                    return Outcome::ended(End::Closed("failed"));
                }
                signals.up();
                if matches!(script, Script::UpThenRefresh | Script::RefreshThenClosed) {
                    signals.refresh("moving");
                }
                let closed = async {
                    match script {
                        Script::RefreshThenClosed => {
                            tokio::time::sleep(Duration::from_secs(10)).await
                        }
                        _ => std::future::pending().await,
                    }
                };
                let end = tokio::select! {
                    _ = crate::gateway::until_shutdown(&mut stop) => End::Shutdown,
                    _ = closed => End::Closed("by the platform"),
                };
                say(format!("end {end:?}"));
                Outcome {
                    end,
                    connected_for: Some(Duration::from_secs(1)),
                    stored: 1,
                }
            }) as Run<'_, End>
        })
        .await;
        let log = log.lock().unwrap().clone();
        (out, log)
    }

    #[tokio::test(start_paused = true)]
    async fn a_successor_that_is_up_takes_over_and_the_old_link_is_stopped() {
        let (stop, stopped) = watch::channel(false);
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let _ = stop.send(true);
        });
        let (out, log) = chain(vec![Script::UpThenRefresh, Script::Up], stopped).await;
        stopper.await.unwrap();
        assert_eq!(out.end, End::Shutdown);
        assert_eq!(
            log,
            ["start false", "start true", "end Shutdown", "end Shutdown"]
        );
        assert_eq!(
            (out.connected_for, out.stored),
            (Some(Duration::from_secs(2)), 2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_successor_that_fails_leaves_the_old_link_until_it_ends() {
        let (_stop, stopped) = watch::channel(false);
        let (out, log) = chain(vec![Script::RefreshThenClosed, Script::Fails], stopped).await;
        assert_eq!(out.end, End::Closed("by the platform"));
        assert_eq!(
            log,
            [
                "start false",
                "start true",
                "end Closed(\"by the platform\")"
            ]
        );
        assert_eq!(out.stored, 1);
    }
}
