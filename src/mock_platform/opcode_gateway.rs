//! The op-code WebSocket gateway QQ Bot and Discord share: Hello, Identify and Resume,
//! heartbeats and their ACKs, dispatches with sequence numbers, and the close codes, written
//! from Discord's gateway docs (which QQ's copy), with the [`Fault`]s that break
//! it. What differs between the two platforms (how a client gets a token, discovery, the send
//! endpoints) is in `qqbot/` and `discord/`, which both lean on this; neither is named here.
//!
//! Sessions live apart from connections so that a client that loses its connection can
//! resume and get exactly the dispatches it missed; the event id log lets a test account for
//! every generated event (lost or duplicated).

mod command;
mod connection;
pub(super) mod discovery;
// Public for the fuzz target `gateway_frame` (fuzz/), which decodes client frames with `parse`.
pub mod frames;
mod generator;
mod handle;
mod session;
pub(super) mod state;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::fault::Fault;
use super::side::{Side, Upgrade};
use state::Gateway;

/// Where the gateway's WebSocket upgrades; discovery hands out a URL with this path.
pub(super) const WS_PATH: &str = "/ws";

/// A client that opens a socket and never finishes its handshake must not pin a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Client frames are small JSON; tungstenite's 128 KiB default read buffer would cost 128 MiB
/// of address space at a thousand connections for nothing.
const READ_BUFFER: usize = 8 * 1024;

/// The gateway serves no HTTP of its own: discovery is each platform's endpoint.
impl Side for Gateway {
    fn upgrade(
        self: Arc<Self>,
        upgrade: Box<Upgrade>,
    ) -> Result<BoxFuture<'static, ()>, Box<Upgrade>> {
        if upgrade.head.path != WS_PATH {
            return Err(upgrade);
        }
        Ok(Box::pin(accept(self, *upgrade)))
    }

    fn background(
        self: Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> Option<BoxFuture<'static, ()>> {
        let every = self.dispatch_every?;
        Some(Box::pin(generator::run(self, every, shutdown)))
    }
}

/// Completes the handshake, then serves the connection; Hello is held back when the socket
/// was accepted under `NoHello`.
async fn accept(gateway: Arc<Gateway>, upgrade: Upgrade) {
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    let handshake = tokio_tungstenite::accept_async_with_config(upgrade.stream, Some(config));
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
    let hello = upgrade.fault != Fault::NoHello;
    connection::run(ws, gateway, upgrade.shutdown, hello).await;
}
