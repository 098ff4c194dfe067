//! The listener: accepts TCP, applies the faults that act on every socket, and hands each one
//! to the registered side that serves it: a WebSocket upgrade to the side whose path it names,
//! a plain request to the first side that takes it. It names no platform.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::fault::{Fault, FaultSwitch};
use super::http::{self, RequestHead};
use super::reply::{Answer, Reply};
use super::shutdown::stopped;
use super::side::{Side, Upgrade};
use super::stats::{bump, Counters};

/// How long connection tasks get to finish on their own at shutdown before being aborted.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What every socket is served by: the registered sides, the armed fault and the counter of
/// HTTP requests.
pub(super) struct Server {
    sides: Vec<Arc<dyn Side>>,
    fault: Arc<FaultSwitch>,
    counters: Arc<Counters>,
}

impl Server {
    pub(crate) fn new(
        sides: Vec<Arc<dyn Side>>,
        fault: Arc<FaultSwitch>,
        counters: Arc<Counters>,
    ) -> Server {
        Server {
            sides,
            fault,
            counters,
        }
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    server: Arc<Server>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut sockets = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tracing::trace!(%peer, "mock accepted tcp connection");
                    sockets.spawn(handle(stream, server.clone(), shutdown.clone()));
                }
                Err(error) => {
                    // Typically EMFILE under a connection storm; back off instead of spinning.
                    tracing::warn!(%error, "mock accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = sockets.join_next(), if !sockets.is_empty() => {}
        }
    }
    drop(listener);
    let _ = timeout(DRAIN_GRACE, async {
        while sockets.join_next().await.is_some() {}
    })
    .await;
    sockets.shutdown().await;
}

async fn handle(stream: TcpStream, server: Arc<Server>, shutdown: watch::Receiver<bool>) {
    let fault = server.fault.get();
    if fault == Fault::Refuse {
        tracing::debug!("mock refused connection");
        return;
    }
    let _ = stream.set_nodelay(true);
    let head = match http::peek_head(&stream).await {
        Ok(head) => head,
        Err(error) => {
            tracing::debug!(%error, "mock could not read a request head");
            return;
        }
    };
    if !head.is_websocket_upgrade() {
        serve_http(stream, head, &server, shutdown).await;
        return;
    }
    if fault == Fault::NoUpgrade {
        tracing::debug!("mock answered an upgrade with plain 200");
        http::answer_without_upgrade(stream, &head).await;
        return;
    }
    let mut upgrade = Box::new(Upgrade {
        stream,
        head,
        fault,
        shutdown,
    });
    for side in &server.sides {
        match side.clone().upgrade(upgrade) {
            Ok(connection) => return connection.await,
            Err(declined) => upgrade = declined,
        }
    }
    // An upgrade to a path no side takes is answered as the plain request it also is.
    serve_http(upgrade.stream, upgrade.head, &server, upgrade.shutdown).await;
}

async fn serve_http(
    mut stream: TcpStream,
    head: RequestHead,
    server: &Server,
    shutdown: watch::Receiver<bool>,
) {
    bump(&server.counters.http_requests);
    let limit = server.sides.iter().find_map(|side| side.body_limit(&head));
    let max = limit.as_ref().map_or(http::MAX_BODY, |limit| limit.max);
    let reply = match http::read_body(&mut stream, &head, max).await {
        Ok(Some(body)) => route(&server.sides, &head, &body, &shutdown).await,
        Ok(None) => Reply::Answer(match limit {
            Some(limit) => (limit.too_large)(),
            None => Answer::error(413, "request body too large"),
        }),
        Err(error) => {
            tracing::debug!(%error, "mock could not read a request body");
            return;
        }
    };
    http::respond(stream, &head, reply, shutdown).await;
}

/// The first registered side's answer that takes the request; 404 when none does.
async fn route(
    sides: &[Arc<dyn Side>],
    head: &RequestHead,
    body: &[u8],
    shutdown: &watch::Receiver<bool>,
) -> Reply {
    for side in sides {
        if let Some(answer) = side.serve(head, body, shutdown) {
            return answer.await;
        }
    }
    Reply::Answer(Answer::error(404, "not found"))
}
