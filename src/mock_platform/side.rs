//! What a platform's side of the mock registers with the shared server: the HTTP endpoints it
//! serves, the WebSocket upgrades it takes and the task it runs in the background. The server
//! asks every registered side in turn and never names one, so a platform is a folder that
//! implements [`Side`] plus a line in the registry.

use std::any::Any;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::fault::Fault;
use super::http::RequestHead;
use super::reply::{Answer, Reply};

/// A WebSocket upgrade request the listener has peeked at and not yet answered.
pub(super) struct Upgrade {
    pub(crate) stream: TcpStream,
    pub(crate) head: RequestHead,
    /// The fault armed when the socket was accepted.
    pub(crate) fault: Fault,
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// One platform's side of the mock. Every method has a default that takes nothing, so a side
/// implements only what its platform has.
pub(super) trait Side: Send + Sync + 'static {
    /// Serves an HTTP request for one of this platform's endpoints; `None` leaves it to the
    /// other sides. Whose request it is must be decided from the request alone, before any
    /// waiting: only the answer may take its time (a long poll).
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        shutdown: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        let _ = (head, body, shutdown);
        None
    }

    /// How large a body this side reads for the request, when it is one of its upload
    /// endpoints: the server reads at most [`MAX_BODY`](super::http::MAX_BODY) otherwise.
    /// Decided from the head alone, before any byte of the body is read, so that a body over
    /// the limit is answered (in this platform's shape) without being read at all.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        let _ = head;
        None
    }

    /// Takes a WebSocket upgrade for one of this platform's paths: the future serves the
    /// connection to its end. `Err` hands the upgrade back for another side.
    fn upgrade(
        self: Arc<Self>,
        upgrade: Box<Upgrade>,
    ) -> Result<BoxFuture<'static, ()>, Box<Upgrade>> {
        Err(upgrade)
    }

    /// A task that runs as long as the mock does (a timer, a generator), if the platform has
    /// one.
    fn background(
        self: Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> Option<BoxFuture<'static, ()>> {
        let _ = shutdown;
        None
    }
}

/// An upload endpoint's larger body limit (capped at
/// [`MAX_UPLOAD_BODY`](super::http::MAX_UPLOAD_BODY)) and the platform's answer to a body
/// over it.
pub(super) struct BodyLimit {
    pub(crate) max: usize,
    pub(crate) too_large: fn() -> Answer,
}

/// An answer ready at once, for a side whose endpoint does not wait.
pub(super) fn at_once<'a>(reply: Reply) -> BoxFuture<'a, Reply> {
    Box::pin(std::future::ready(reply))
}

/// Every registered side, kept twice: as a [`Side`] for the server, and by type for the
/// handle, so that a platform's `impl MockPlatform` block reaches its own state without the
/// handle naming any platform.
#[derive(Default)]
pub(super) struct Sides {
    served: Vec<Arc<dyn Side>>,
    typed: Vec<Arc<dyn Any + Send + Sync>>,
}

impl Sides {
    pub(crate) fn register<S: Side>(&mut self, side: Arc<S>) {
        self.typed.push(side.clone());
        self.served.push(side);
    }

    /// The sides in the order they were registered, which is the order the server asks them.
    pub(crate) fn served(&self) -> Vec<Arc<dyn Side>> {
        self.served.clone()
    }

    pub(crate) fn get<S: Side>(&self) -> Option<&S> {
        self.typed.iter().find_map(|side| side.downcast_ref::<S>())
    }
}
