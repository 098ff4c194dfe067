//! One long connection: the first frame must be `aibot_subscribe` (anything else, or nothing
//! within the handshake time, closes it), then the state's pushes go out and the client's
//! commands are answered, until a fault, a kick or either side's close.
//!
//! Commands from the state are handled before the socket is read again, so a test that sets
//! a fault and then acts never races it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

use super::super::shutdown::stopped;
use super::super::websocket::{finish, End, Registration, Ws};
use super::faults::WeComFault;
use super::state::{ConnCommand, WeComState};

/// The close after a kick or a refused subscription (**inferred**: the SDK closes on its own
/// side either way and never reads the code).
const CLOSE_NORMAL: u16 = 1000;

/// How long a new connection may take to subscribe.
const SUBSCRIBE_WITHIN: Duration = Duration::from_secs(10);

pub(crate) async fn run(ws: Ws, state: Arc<WeComState>, mut shutdown: watch::Receiver<bool>) {
    let (tx, mut commands) = mpsc::unbounded_channel();
    let (mut sink, mut stream) = ws.split();
    let conn = state.register(tx);
    let unregister = state.clone();
    let registration = Registration::new(move || unregister.unregister(conn));
    let end = match timeout(SUBSCRIBE_WITHIN, first_frame(&mut stream)).await {
        Ok(Some((req_id, body))) => {
            let (answer, backlog) = state.subscribe(conn, &req_id, &body);
            match backlog {
                Some(backlog) => {
                    let mut gone = sink.send(Message::text(answer)).await.is_err();
                    for frame in backlog {
                        gone = gone || sink.send(Message::text(frame)).await.is_err();
                    }
                    if gone {
                        End::Gone
                    } else {
                        serve(&state, &mut sink, &mut stream, &mut commands, &mut shutdown).await
                    }
                }
                None => match sink.send(Message::text(answer)).await {
                    Ok(()) => End::Close(CLOSE_NORMAL),
                    Err(_) => End::Gone,
                },
            }
        }
        _ => End::Close(CLOSE_NORMAL),
    };
    if matches!(end, End::Silence) {
        tracing::info!(conn, "mock wecom connection went half-open");
        commands.close();
    }
    finish(end, sink, stream, &mut shutdown).await;
    drop(registration);
    tracing::debug!(conn, "mock wecom connection closed");
}

type Sink = futures_util::stream::SplitSink<Ws, Message>;
type Stream = futures_util::stream::SplitStream<Ws>;

/// The subscription's `req_id` and body, if the first text frame is one.
async fn first_frame(stream: &mut Stream) -> Option<(String, Value)> {
    loop {
        match stream.next().await? {
            Ok(Message::Text(text)) => {
                let v: Value = serde_json::from_str(&text).ok()?;
                if v["cmd"] != "aibot_subscribe" {
                    return None;
                }
                let req_id = v["headers"]["req_id"].as_str()?.to_owned();
                return Some((req_id, v["body"].clone()));
            }
            Ok(Message::Ping(_) | Message::Pong(_)) => {}
            _ => return None,
        }
    }
}

async fn serve(
    state: &WeComState,
    sink: &mut Sink,
    stream: &mut Stream,
    commands: &mut mpsc::UnboundedReceiver<ConnCommand>,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    loop {
        tokio::select! {
            biased;
            _ = stopped(shutdown) => return End::Gone,
            command = commands.recv() => match command {
                Some(ConnCommand::Push(frame)) => {
                    if sink.send(Message::text(frame)).await.is_err() {
                        return End::Gone;
                    }
                }
                Some(ConnCommand::Fault(fault)) => match fault {
                    WeComFault::Silence => return End::Silence,
                    WeComFault::Drop => return End::Gone,
                    WeComFault::Close(code) => return End::Close(code),
                    WeComFault::Kick => {
                        let _ = sink.send(Message::text(state.kick_frame())).await;
                        return End::Close(CLOSE_NORMAL);
                    }
                    WeComFault::NoPong => {}
                },
                None => return End::Gone,
            },
            message = stream.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    if let Some(answer) = on_text(state, &text) {
                        if sink.send(Message::text(answer)).await.is_err() {
                            return End::Gone;
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return End::Gone,
                Some(Ok(_)) => {}
            },
        }
    }
}

/// A client command, answered (or not, under a fault); an unknown command is answered with
/// an error, a frame that is no command ignored.
fn on_text(state: &WeComState, text: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text).ok()?;
    let req_id = v["headers"]["req_id"].as_str()?;
    match v["cmd"].as_str()? {
        "ping" => state.ping(req_id),
        cmd @ ("aibot_respond_msg" | "aibot_send_msg") => state.post(cmd, req_id, &v["body"]),
        "aibot_subscribe" => Some(super::state::answer(req_id, 0, "ok")),
        _ => Some(super::state::answer(req_id, 40008, "unknown cmd")),
    }
}
