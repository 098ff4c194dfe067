//! The listener: accepts TCP, applies the connection-level faults, and routes each socket to
//! the WebSocket gateway or the HTTP endpoints by peeking at its request head.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::fault::Fault;
use super::opcode_gateway::connection;
use super::shutdown::stopped;
use super::state::Shared;
use super::{feishu, http};

/// How long connection tasks get to finish on their own at shutdown before being aborted.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// A client that opens a socket and never finishes its handshake must not pin a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Client frames are small JSON; tungstenite's 128 KiB default read buffer would cost 128 MiB
/// of address space at a thousand connections for nothing.
const READ_BUFFER: usize = 8 * 1024;

pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut sockets = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tracing::trace!(%peer, "mock accepted tcp connection");
                    sockets.spawn(handle(stream, shared.clone(), shutdown.clone()));
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

async fn handle(stream: TcpStream, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let fault = shared.gateway.fault();
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
        http::serve(stream, head, &shared, shutdown).await;
        return;
    }
    if fault == Fault::NoUpgrade {
        tracing::debug!("mock answered an upgrade with plain 200");
        http::answer_without_upgrade(stream, &head).await;
        return;
    }
    if head.path == feishu::WS_PATH {
        feishu::serve_upgrade(stream, head, shared, shutdown).await;
        return;
    }
    if head.path != "/ws" {
        http::serve(stream, head, &shared, shutdown).await;
        return;
    }
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    let handshake = tokio_tungstenite::accept_async_with_config(stream, Some(config));
    let ws = match timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(error)) => {
            tracing::debug!(%error, "mock websocket handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("mock websocket handshake timed out");
            return;
        }
    };
    let gateway = shared.gateway.clone();
    connection::run(ws, gateway, shutdown, fault != Fault::NoHello).await;
}
