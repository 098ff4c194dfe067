//! One Feishu long connection: binary pbbp2 frames both ways. It writes what the state pushes
//! and answers the client's frames: a control ping gets a pong, a data frame is an ack.
//!
//! Commands from the state (pushes, and the faults' silence and close) are handled before the
//! socket is read again, so a test that sets a fault and then pings never races it.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use prost::Message as _;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use crate::platform::feishu::pbbp2::{message_type, Frame, FrameKind};

use super::super::shutdown::stopped;
use super::super::websocket::{finish, End, Registration, Ws};
use super::state::ConnCommand;
use super::state::FeishuState;
use super::ticket::Ticket;

/// The close code of the `CloseAll` fault: a plain normal closure.
const CLOSE_NORMAL: u16 = 1000;

pub(crate) async fn run(
    ws: Ws,
    state: Arc<FeishuState>,
    mut shutdown: watch::Receiver<bool>,
    ticket: Ticket,
) {
    let (tx, mut commands) = mpsc::unbounded_channel();
    let conn_id = state.register(tx, ticket.service);
    let unregister = state.clone();
    let registration = Registration::new(move || unregister.unregister(conn_id));
    tracing::debug!(conn_id, device_id = %ticket.device_id, "mock feishu connection opened");
    let (mut sink, mut stream) = ws.split();
    let end = loop {
        tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break End::Gone,
            command = commands.recv() => match command {
                Some(ConnCommand::Push(frames)) => {
                    let mut failed = false;
                    for frame in frames {
                        if sink.feed(Message::binary(frame)).await.is_err() {
                            failed = true;
                            break;
                        }
                    }
                    if failed || sink.flush().await.is_err() {
                        break End::Gone;
                    }
                }
                Some(ConnCommand::Silence) => break End::Silence,
                Some(ConnCommand::Close) => break End::Close(CLOSE_NORMAL),
                None => break End::Gone,
            },
            message = stream.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    if let Some(reply) = on_frame(&state, conn_id, ticket.service, &bytes) {
                        if sink.send(Message::binary(reply)).await.is_err() {
                            break End::Gone;
                        }
                    }
                }
                Some(Ok(Message::Text(_))) => state.bad_frame(),
                // WebSocket pings are answered by tungstenite while reading.
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::debug!(conn_id, %error, "mock feishu connection read failed");
                    break End::Gone;
                }
                None => break End::Gone,
            },
        }
    };
    if matches!(end, End::Silence) {
        tracing::info!(conn_id, "mock feishu connection went half-open");
        commands.close();
    }
    finish(end, sink, stream, &mut shutdown).await;
    drop(registration);
    tracing::debug!(conn_id, "mock feishu connection closed");
}

/// One client frame; the bytes to send back, if any.
fn on_frame(state: &FeishuState, conn_id: u64, service: i32, bytes: &[u8]) -> Option<Vec<u8>> {
    let Ok(frame) = Frame::decode(bytes) else {
        tracing::warn!(conn_id, "mock feishu got an undecodable frame");
        state.bad_frame();
        return None;
    };
    match frame.kind() {
        Some(FrameKind::Control) if frame.message_type() == Some(message_type::PING) => {
            state.on_ping(service, &frame)
        }
        Some(FrameKind::Control) => None,
        Some(FrameKind::Data) => {
            state.on_ack(conn_id, &frame);
            None
        }
        None => {
            state.bad_frame();
            None
        }
    }
}
