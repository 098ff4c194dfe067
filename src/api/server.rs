//! The accept loop: one task per connection, each checked with `SO_PEERCRED` before a byte
//! of it is read, given a place in the connection table (connections.rs, which sheds an idle
//! or slow connection to make room), then served as HTTP/1.1 by hyper with the axum router.
//!
//! The loop is our own rather than `axum::serve`, because the peer check has to sit between
//! accept and the first read, and a refused peer must cost nothing but a log line. Every
//! request passes through [`serve_request`] on its way to the router: it reads the body whole,
//! within [`MAX_BODY`] and [`BODY_TIMEOUT`], and tells the table what the connection is doing,
//! so that none can hold its place by sending slowly.
//!
//! On shutdown the listener closes first (new clients see the socket go), then every
//! connection finishes the request it is on (a long-poll returns at once) and closes, within
//! [`DRAIN`]; whatever is left after that is cut off.

use std::convert::Infallible;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, Request, Response};
use axum::response::IntoResponse;
use futures_util::future::BoxFuture;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn, Instrument};

use super::connections::{Conn, Phase, Shed};
use super::listener::{remove_socket, Bound};
use super::problem::Problem;
use super::{io_err, media, routes, ApiError, ApiState, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_BODY};
use crate::gateway::until_shutdown;

/// How long a stop waits for open connections.
const DRAIN: Duration = Duration::from_secs(5);
/// After a failed accept (out of file descriptors, say), before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How long a shed long-poll has to write its answer before its connection is cut.
const SHED_GRACE: Duration = Duration::from_secs(1);

impl Bound {
    /// Serve until `shutdown` turns true (or its sender is dropped), then drain, remove the
    /// socket file and return. Only a listener that cannot be registered with the runtime
    /// is an error; a failed accept or a refused peer is logged and the loop goes on (a
    /// failed accept is also the API's state in the state file, connections.rs).
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
        let table = state.connections();
        let router = routes::router(state, shutdown.clone());
        let me = nix::unistd::geteuid().as_raw();
        let mut connections = JoinSet::new();
        info!(path = %path.display(), "API serving");
        loop {
            let stream = tokio::select! {
                () = until_shutdown(&mut shutdown) => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        warn!(path = %path.display(), error = %e, "API accept failed");
                        table.accept_failed(&e);
                        if out_of_descriptors(&e) {
                            table.shed_for_descriptor();
                        }
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            if !peer_is(&stream, me) {
                continue;
            }
            let conn = tokio::select! {
                () = until_shutdown(&mut shutdown) => break,
                conn = table.admit() => conn,
            };
            while connections.try_join_next().is_some() {}
            // The connection's lines are the API's (logging::Component).
            connections.spawn(
                serve_connection(stream, router.clone(), shutdown.clone(), conn).in_current_span(),
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

/// EMFILE or ENFILE: closing a connection of ours frees what the next accept needs.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == nix::libc::EMFILE || code == nix::libc::ENFILE
    )
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

/// One connection, until its client closes it, a stop drains it, or the table sheds it.
async fn serve_connection(
    stream: UnixStream,
    router: axum::Router,
    mut shutdown: watch::Receiver<bool>,
    conn: Arc<Conn>,
) {
    let service = Tracked {
        router,
        conn: conn.clone(),
    };
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(http);
    let result = tokio::select! {
        r = http.as_mut() => r,
        () = until_shutdown(&mut shutdown) => {
            http.as_mut().graceful_shutdown();
            http.await
        }
        shed = conn.shed() => match shed {
            // Dropping the connection closes the socket.
            Shed::Close => return,
            // The long-poll answers now; then the connection closes.
            Shed::AnswerNow => {
                http.as_mut().graceful_shutdown();
                match tokio::time::timeout(SHED_GRACE, http).await {
                    Ok(r) => r,
                    Err(_) => return,
                }
            }
        },
    };
    if let Err(e) = result {
        debug!(error = %e, "API connection ended with an error");
    }
}

/// The router, behind the body reader and the phase bookkeeping of one connection.
#[derive(Clone)]
struct Tracked {
    router: axum::Router,
    conn: Arc<Conn>,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let (router, conn) = (self.router.clone(), self.conn.clone());
        Box::pin(async move { Ok(serve_request(router, conn, request).await) })
    }
}

/// Read the body whole, then let the router answer; the connection's phase follows along:
/// reading, handling (the long-poll marks its own wait), writing, and idle again once the
/// answer's last byte is taken.
async fn serve_request(
    router: axum::Router,
    conn: Arc<Conn>,
    request: Request<Incoming>,
) -> Response<Body> {
    conn.set(Phase::Reading);
    let (mut parts, body) = request.into_parts();
    // An upload streams to the media store within its own cap and pace (api/media.rs): the
    // connection counts as reading until its answer is written.
    if parts.method == axum::http::Method::POST && parts.uri.path() == media::UPLOAD_PATH {
        let request = Request::from_parts(parts, Body::new(body));
        let response =
            match hyper::service::Service::call(&TowerToHyperService::new(router), request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
        conn.set(Phase::Writing);
        return response.map(|body| Body::new(Written { body, conn }));
    }
    let response = match read_body(body, &parts.headers).await {
        Ok(body) => {
            conn.set(Phase::Handling);
            parts.extensions.insert(conn.clone());
            let request = Request::from_parts(parts, Body::from(body));
            match hyper::service::Service::call(&TowerToHyperService::new(router), request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
        // The rest of the body is not read: the connection closes after this answer.
        Err(problem) => {
            let mut response = problem.into_response();
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    };
    conn.set(Phase::Writing);
    response.map(|body| Body::new(Written { body, conn }))
}

/// The request body, whole: at most [`MAX_BODY`] bytes (a `Content-Length` over it is refused
/// before a byte is read), all within [`BODY_TIMEOUT`].
async fn read_body(mut body: Incoming, headers: &HeaderMap) -> Result<Bytes, Problem> {
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(Problem::body_too_large());
    }
    let collect = async {
        let mut bytes = Vec::with_capacity(declared.map_or(0, |n| n as usize));
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame.map_err(|e| {
                Problem::bad_request("bad_body", format!("cannot read the request body: {e}"))
            })?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_BODY {
                    return Err(Problem::body_too_large());
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(Bytes::from(bytes))
    };
    tokio::time::timeout(BODY_TIMEOUT, collect)
        .await
        .unwrap_or_else(|_| Err(Problem::body_timeout()))
}

/// An answer's body that marks its connection idle once it has been written (hyper drops
/// the body when it has sent its last frame, or gives up on it).
struct Written {
    body: Body,
    conn: Arc<Conn>,
}

impl Drop for Written {
    fn drop(&mut self) {
        self.conn.set(Phase::Idle);
    }
}

impl hyper::body::Body for Written {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
