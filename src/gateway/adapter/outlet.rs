//! The way from a plain WebSocket adapter's sender into its live connection: the sender hands
//! over a frame, the connection writes it and says whether the write went through.
//!
//! Connections come and go while the outlet stays, so a frame can be handed over when no
//! connection is there to take it. The sender then gives up after [`TAKE_WITHIN`] and its
//! message is retried; the frame must not go out later as well, or the retry would post it
//! twice. So every frame carries a claim that exactly one side wins: the connection, which
//! then writes it, or the sender giving up, after which a connection that finds it in the
//! queue drops it unwritten.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot, MutexGuard};
use tokio::time::timeout;

/// How long a frame waits for a live connection to take it before its message is retried.
pub(crate) const TAKE_WITHIN: Duration = Duration::from_secs(2);

/// How long a frame, once taken, may take to be written. The connection's own write deadline
/// ends a write long before; this only bounds a sender whose connection hung elsewhere.
const WRITE_WITHIN: Duration = Duration::from_secs(30);

/// Frames queued at once. One delivery worker sends one message at a time, so only frames
/// that no connection took (and whose senders gave up) fill the rest; past this a send is
/// refused at once rather than queued behind them.
const QUEUE: usize = 8;

/// How a handed-over frame ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Written to the socket.
    Written,
    /// A connection took it and the write failed or never finished: it may have reached the
    /// peer.
    Maybe(String),
    /// No connection took it: nothing went out.
    NotTaken(String),
}

/// One adapter's outlet, shared by its sender and whichever of its connections is live.
pub(crate) struct Outlet {
    tx: mpsc::Sender<Frame>,
    /// Held by the live connection for its whole life.
    rx: tokio::sync::Mutex<mpsc::Receiver<Frame>>,
}

/// A frame on its way to a connection.
pub(crate) struct Frame {
    text: String,
    /// Set by whichever side decides the frame's fate first (see the module doc).
    claimed: Arc<AtomicBool>,
    done: oneshot::Sender<Result<(), String>>,
}

/// What a connection owes the sender of a frame it took: word of how the write went.
pub(crate) struct Taken(oneshot::Sender<Result<(), String>>);

/// The receiving end, held by a live connection.
pub(crate) type Receiver<'a> = MutexGuard<'a, mpsc::Receiver<Frame>>;

fn claim(flag: &AtomicBool) -> bool {
    !flag.swap(true, Ordering::AcqRel)
}

impl Outlet {
    fn new() -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        Outlet {
            tx,
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// The receiving end for a connection that has just become live, or `None` while another
    /// connection of the same adapter holds it (which one adapter never has).
    pub(crate) fn receiver(&self) -> Option<Receiver<'_>> {
        self.rx.try_lock().ok()
    }

    /// Hand `text` to the live connection and wait for its write.
    pub(crate) async fn deliver(&self, text: String) -> Delivery {
        let claimed = Arc::new(AtomicBool::new(false));
        let (done, mut written) = oneshot::channel();
        let frame = Frame {
            text,
            claimed: claimed.clone(),
            done,
        };
        match self.tx.try_send(frame) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Delivery::NotTaken("no live connection (frames are waiting)".into())
            }
            Err(TrySendError::Closed(_)) => {
                return Delivery::NotTaken("the adapter's connection is gone".into())
            }
        }
        let lost = "the connection ended while writing the frame";
        match timeout(TAKE_WITHIN, &mut written).await {
            Ok(Ok(result)) => return result.map_or_else(Delivery::Maybe, |()| Delivery::Written),
            // Dropped unanswered: either it was taken and the connection died mid-write, or
            // it went with the queue before anyone took it.
            Ok(Err(_)) if claim(&claimed) => return Delivery::NotTaken(lost.into()),
            Ok(Err(_)) => return Delivery::Maybe(lost.into()),
            Err(_) if claim(&claimed) => {
                let m = format!("no live connection took the frame within {TAKE_WITHIN:?}");
                return Delivery::NotTaken(m);
            }
            // Taken just now: the write is under way.
            Err(_) => {}
        }
        match timeout(WRITE_WITHIN, written).await {
            Ok(Ok(result)) => result.map_or_else(Delivery::Maybe, |()| Delivery::Written),
            Ok(Err(_)) => Delivery::Maybe(lost.into()),
            Err(_) => Delivery::Maybe(format!("the write did not finish within {WRITE_WITHIN:?}")),
        }
    }
}

impl Frame {
    /// The frame to write, unless its sender has given up on it (then it is dropped here).
    pub(crate) fn take(self) -> Option<(String, Taken)> {
        claim(&self.claimed).then(|| (self.text, Taken(self.done)))
    }
}

impl Taken {
    pub(crate) fn written(self) {
        let _ = self.0.send(Ok(()));
    }

    pub(crate) fn failed(self, why: String) {
        let _ = self.0.send(Err(why));
    }
}

/// The next frame for a live connection; never ready without one. Cancel-safe, as a
/// `select!` branch must be.
pub(crate) async fn next(rx: &mut Option<Receiver<'_>>) -> Frame {
    match rx {
        Some(rx) => match rx.recv().await {
            Some(frame) => frame,
            // The outlet holds a sender itself, so this is never closed.
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The outlets of one gateway, by adapter name, so the adapter and the sender built for the
/// same `[[adapter]]` find the same one.
#[derive(Clone, Default)]
pub(crate) struct Outlets(Arc<Mutex<HashMap<String, Arc<Outlet>>>>);

impl Outlets {
    pub(crate) fn get(&self, adapter: &str) -> Arc<Outlet> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(adapter.to_owned())
            .or_insert_with(|| Arc::new(Outlet::new()))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live connection that writes (or fails to write) whatever it takes.
    async fn connection(outlet: Arc<Outlet>, write: Result<(), String>) -> Vec<String> {
        let mut rx = outlet.receiver();
        let mut seen = vec![];
        while let Ok(frame) = timeout(Duration::from_millis(10), next(&mut rx)).await {
            if let Some((text, taken)) = frame.take() {
                seen.push(text);
                match &write {
                    Ok(()) => taken.written(),
                    Err(e) => taken.failed(e.clone()),
                }
            }
        }
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_connection_writes_and_says_so() {
        let outlet = Outlets::default().get("a");
        let conn = tokio::spawn(connection(outlet.clone(), Ok(())));
        assert_eq!(outlet.deliver("f1".into()).await, Delivery::Written);
        assert_eq!(conn.await.unwrap(), ["f1"]);
        let conn = tokio::spawn(connection(outlet.clone(), Err("broken pipe".into())));
        assert_eq!(
            outlet.deliver("f2".into()).await,
            Delivery::Maybe("broken pipe".into())
        );
        assert_eq!(conn.await.unwrap(), ["f2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_nobody_took_is_never_written_later() {
        let outlets = Outlets::default();
        let outlet = outlets.get("a");
        let started = tokio::time::Instant::now();
        let d = outlet.deliver("stale".into()).await;
        assert!(matches!(d, Delivery::NotTaken(_)), "{d:?}");
        assert_eq!(started.elapsed(), TAKE_WITHIN);
        // A connection comes up: it finds the stale frame and drops it, writing only the new.
        let conn = tokio::spawn(connection(outlets.get("a"), Ok(())));
        assert_eq!(outlet.deliver("fresh".into()).await, Delivery::Written);
        assert_eq!(conn.await.unwrap(), ["fresh"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_refuses_at_once() {
        let outlet = Outlets::default().get("a");
        for _ in 0..QUEUE {
            assert!(matches!(
                outlet.deliver("x".into()).await,
                Delivery::NotTaken(_)
            ));
        }
        let started = tokio::time::Instant::now();
        let d = outlet.deliver("y".into()).await;
        assert!(
            matches!(&d, Delivery::NotTaken(m) if m.contains("waiting")),
            "{d:?}"
        );
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn taken_then_dropped_unanswered_may_have_gone_out() {
        let outlet = Outlets::default().get("a");
        let o = outlet.clone();
        let conn = tokio::spawn(async move {
            let mut rx = o.receiver();
            let taken = next(&mut rx).await.take();
            // The connection dies mid-write, past the take deadline.
            tokio::time::sleep(TAKE_WITHIN * 2).await;
            drop(taken);
        });
        let d = outlet.deliver("f".into()).await;
        assert!(matches!(d, Delivery::Maybe(_)), "{d:?}");
        conn.await.unwrap();
    }

    #[tokio::test]
    async fn one_receiver_at_a_time_and_one_outlet_per_adapter() {
        let outlets = Outlets::default();
        assert!(Arc::ptr_eq(&outlets.get("a"), &outlets.clone().get("a")));
        assert!(!Arc::ptr_eq(&outlets.get("a"), &outlets.get("b")));
        let a = outlets.get("a");
        let held = a.receiver();
        assert!(held.is_some());
        assert!(a.receiver().is_none());
        drop(held);
        assert!(a.receiver().is_some());
    }
}
