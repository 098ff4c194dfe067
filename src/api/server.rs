//! The accept loop: one task per connection, at most [`MAX_CONNECTIONS`] at once, each
//! checked with `SO_PEERCRED` before a byte of it is read, then served as HTTP/1.1 by hyper
//! with the axum router.
//!
//! The loop is our own rather than `axum::serve`, because the peer check has to sit between
//! accept and the first read, and a refused peer must cost nothing but a log line.
//!
//! On shutdown the listener closes first (new clients see the socket go), then every
//! connection finishes the request it is on (a long-poll returns at once) and closes, within
//! [`DRAIN`]; whatever is left after that is cut off.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn, Instrument};

use super::listener::{remove_socket, Bound};
use super::{io_err, routes, ApiError, ApiState, MAX_CONNECTIONS};
use crate::gateway::until_shutdown;

/// How long a connection may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for open connections.
const DRAIN: Duration = Duration::from_secs(5);
/// After a failed accept (out of file descriptors, say), before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

impl Bound {
    /// Serve until `shutdown` turns true (or its sender is dropped), then drain, remove the
    /// socket file and return. Only a listener that cannot be registered with the runtime
    /// is an error; a failed accept or a refused peer is logged and the loop goes on.
    pub async fn serve(
        self,
        state: ApiState,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), ApiError> {
        let Bound {
            listener,
            path,
            ino,
        } = self;
        let listener = UnixListener::from_std(listener).map_err(io_err("listen on", &path))?;
        let router = routes::router(state, shutdown.clone());
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let me = nix::unistd::geteuid().as_raw();
        let mut connections = JoinSet::new();
        info!(path = %path.display(), "API serving");
        loop {
            let permit = tokio::select! {
                () = until_shutdown(&mut shutdown) => break,
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break, // never closed
                },
            };
            let stream = tokio::select! {
                () = until_shutdown(&mut shutdown) => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        warn!(path = %path.display(), error = %e, "API accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            if !peer_is(&stream, me) {
                continue;
            }
            while connections.try_join_next().is_some() {}
            // The connection's lines are the API's (logging::Component).
            connections.spawn(
                serve_connection(stream, router.clone(), shutdown.clone(), permit)
                    .in_current_span(),
            );
        }
        drop(listener);
        remove_socket(&path, ino);
        let drained = tokio::time::timeout(DRAIN, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                open = connections.len(),
                "API connections still open after the drain; closing them"
            );
            connections.shutdown().await;
        }
        info!(path = %path.display(), "API stopped");
        Ok(())
    }
}

/// Whether the process at the other end runs as `me`. Anyone else is logged and dropped.
fn peer_is(stream: &UnixStream, me: u32) -> bool {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == me => true,
        Ok(cred) => {
            warn!(
                uid = cred.uid(),
                pid = cred.pid(),
                "API connection refused: the peer runs as another user"
            );
            false
        }
        Err(e) => {
            warn!(error = %e, "API connection refused: cannot tell who the peer is");
            false
        }
    }
}

async fn serve_connection(
    stream: UnixStream,
    router: axum::Router,
    mut shutdown: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = until_shutdown(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        debug!(error = %e, "API connection ended with an error");
    }
}
