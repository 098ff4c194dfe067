//! One Stream connection: the frames the state pushes, SYSTEM pings at the server's cadence
//! when configured, the client's answers read as acks; WebSocket pings from the client are
//! answered by tungstenite while the socket is read. After a `disconnect` the socket is read
//! (and written what was already under way) until the client closes it or the server does,
//! `disconnect_grace` later; the state records which came first.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::super::shutdown::stopped;
use super::super::websocket::{finish, End, Registration, Ws};
use super::record::{DingTalkFault, DingTalkSide};
use super::state::{ConnCommand, DingTalkState};

const CLOSE_NORMAL: u16 = 1000;

pub(crate) async fn run(ws: Ws, state: Arc<DingTalkState>, mut shutdown: watch::Receiver<bool>) {
    let (tx, mut commands) = mpsc::unbounded_channel();
    let (mut sink, mut stream) = ws.split();
    let conn = state.register(tx);
    let unregister = state.clone();
    let registration = Registration::new(move || unregister.unregister(conn));
    let every = state.config.server_ping;
    let mut ping = every.map(|every| {
        let mut ping = tokio::time::interval_at(Instant::now() + every, every);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping
    });
    let mut deaf = false;
    let mut listening = true;
    // After a `disconnect`: when the server closes.
    let mut closing: Option<Instant> = None;
    let (end, by) = loop {
        let tick = async {
            match ping.as_mut() {
                Some(p) => p.tick().await,
                None => std::future::pending().await,
            }
        };
        let close_at = async {
            match closing {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break (End::Gone, DingTalkSide::Server),
            command = commands.recv(), if listening => match command {
                Some(ConnCommand::Push(frame)) => {
                    if sink.send(Message::text(frame)).await.is_err() {
                        break (End::Gone, DingTalkSide::Client);
                    }
                }
                Some(ConnCommand::Fault(DingTalkFault::Silence)) => {
                    break (End::Silence, DingTalkSide::Server)
                }
                Some(ConnCommand::Fault(DingTalkFault::Deaf)) => deaf = true,
                Some(ConnCommand::Fault(DingTalkFault::Drop)) => {
                    break (End::Gone, DingTalkSide::Server)
                }
                Some(ConnCommand::Fault(DingTalkFault::Disconnect)) => {
                    if sink.send(Message::text(state.disconnect(conn))).await.is_err() {
                        break (End::Gone, DingTalkSide::Client);
                    }
                    // Nothing new is pushed here (what is already queued is still written);
                    // acks are still read until the close.
                    state.unregister(conn);
                    closing = Some(Instant::now() + state.config.disconnect_grace);
                }
                // Unregistered (after a `disconnect`): nothing more comes to write, and the
                // socket is still read until one side closes it.
                None => listening = false,
            },
            _ = close_at => break (End::Close(CLOSE_NORMAL), DingTalkSide::Server),
            _ = tick => {
                if sink.send(Message::text(state.system_ping())).await.is_err() {
                    break (End::Gone, DingTalkSide::Client);
                }
            }
            message = stream.next(), if !deaf => match message {
                Some(Ok(Message::Text(text))) => {
                    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    state.on_answer(&v);
                }
                Some(Ok(Message::Ping(_))) => state.on_ws_ping(conn),
                Some(Ok(Message::Close(_))) | None => break (End::Gone, DingTalkSide::Client),
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::debug!(conn, %error, "mock dingtalk read failed");
                    break (End::Gone, DingTalkSide::Client);
                }
            },
        }
    };
    state.closed(conn, by);
    if matches!(end, End::Silence) {
        // Still registered: what is pushed its way is lost, as on a socket the platform has
        // not yet seen die, until the ack timer pushes it again elsewhere.
        tracing::info!(conn, "mock dingtalk connection went half-open");
        commands.close();
    }
    finish(end, sink, stream, &mut shutdown).await;
    drop(registration);
}
