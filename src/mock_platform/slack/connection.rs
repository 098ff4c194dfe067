//! One Socket Mode connection: `hello` first, then the envelopes the state pushes; the
//! client's text frames are acks (`{"envelope_id": …}`, with or without `payload`), and its
//! WebSocket pings are answered by tungstenite while the socket is read.
//!
//! With `server_ping` set, the server pings too, as Slack does (docs/research/slack-socket-mode.md
//! §4, item 11), and a connection that has answered none of its last two pings is dropped: a
//! client that vanished without a FIN (a ghost registration) stops being chosen for
//! deliveries, and what was sent its way is redelivered on the client's other connections.
//!
//! Commands from the state are handled before the socket is read again, so a test that sets a
//! fault and then pings never races it.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use super::super::shutdown::stopped;
use super::super::websocket::{close, finish, End, Registration, Ws};
use super::faults::SlackFault;
use super::state::{disconnect, Admitted, ConnCommand, SlackState};

/// The close Slack sends a refreshed connection (java-slack-sdk#860: `onClose … code 1000`).
const CLOSE_NORMAL: u16 = 1000;

pub(crate) async fn run(
    ws: Ws,
    state: Arc<SlackState>,
    mut shutdown: watch::Receiver<bool>,
    debug_reconnects: bool,
) {
    let (tx, mut commands) = mpsc::unbounded_channel();
    let (mut sink, mut stream) = ws.split();
    let (conn_id, num_connections) = match state.register(tx) {
        Admitted::Open {
            conn_id,
            num_connections,
        } => (conn_id, num_connections),
        Admitted::Refused(reason) => {
            state.disconnect_sent();
            if sink.send(Message::text(disconnect(reason))).await.is_ok() {
                close(sink, stream, CLOSE_NORMAL).await;
            }
            return;
        }
    };
    let unregister = state.clone();
    let registration = Registration::new(move || unregister.unregister(conn_id));
    tracing::debug!(conn_id, "mock slack connection opened");
    let hello = state.hello(num_connections, debug_reconnects);
    let every = state.config.server_ping;
    let mut last_pong = tokio::time::Instant::now();
    let mut ping = every.map(|every| {
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping
    });
    // Deaf: events still go out, but nothing is read, so no pong and no ack.
    let mut deaf = false;
    let end = if sink.send(Message::text(hello)).await.is_err() {
        End::Gone
    } else {
        loop {
            let tick = async {
                match ping.as_mut() {
                    Some(ping) => ping.tick().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = stopped(&mut shutdown) => break End::Gone,
                command = commands.recv() => match command {
                    Some(ConnCommand::Push(frame)) => {
                        if sink.send(Message::text(frame)).await.is_err() {
                            break End::Gone;
                        }
                    }
                    Some(ConnCommand::Fault(SlackFault::Silence)) => break End::Silence,
                    Some(ConnCommand::Fault(SlackFault::Deaf)) => deaf = true,
                    Some(ConnCommand::Fault(SlackFault::CloseAll)) => break End::Close(CLOSE_NORMAL),
                    Some(ConnCommand::Fault(SlackFault::Disconnect(reason))) => {
                        state.disconnect_sent();
                        if sink.send(Message::text(disconnect(&reason))).await.is_err() {
                            break End::Gone;
                        }
                    }
                    None => break End::Gone,
                },
                _ = tick => {
                    if every.is_some_and(|every| last_pong.elapsed() > every * 2) {
                        tracing::info!(conn_id, "mock slack dropped a connection that answers no pings");
                        break End::Gone;
                    }
                    if sink.send(Message::Ping(Bytes::from_static(b"mock-slack"))).await.is_err() {
                        break End::Gone;
                    }
                }
                message = stream.next(), if !deaf => match message {
                    Some(Ok(Message::Text(text))) => on_text(&state, conn_id, &text),
                    Some(Ok(Message::Ping(_))) => state.on_ping(),
                    Some(Ok(Message::Pong(_))) => last_pong = tokio::time::Instant::now(),
                    Some(Ok(Message::Close(_))) | None => break End::Gone,
                    Some(Ok(_)) => {}
                    Some(Err(error)) => {
                        tracing::debug!(conn_id, %error, "mock slack connection read failed");
                        break End::Gone;
                    }
                },
            }
        }
    };
    if matches!(end, End::Silence) {
        tracing::info!(conn_id, "mock slack connection went half-open");
        // Still registered: envelopes sent its way are lost, as on a ghost registration
        // (python-slack-sdk#1940), until the client's FIN frees it.
        commands.close();
    }
    finish(end, sink, stream, &mut shutdown).await;
    drop(registration);
    tracing::debug!(conn_id, "mock slack connection closed");
}

/// A client text frame: an ack names its envelope; anything else is ignored, as Slack ignores
/// what it does not expect on the socket.
fn on_text(state: &SlackState, conn_id: u64, text: &str) {
    let ack = serde_json::from_str::<Value>(text).ok();
    match ack.as_ref().and_then(|v| v["envelope_id"].as_str()) {
        Some(envelope_id) => state.on_ack(envelope_id),
        None => tracing::warn!(conn_id, "mock slack got a frame that is not an ack"),
    }
}
