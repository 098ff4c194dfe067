//! One WebSocket socket, as `app/platform/web_conn.go` serves it: what the hub gives it to
//! write first (`hello`, `seq` 0, for a new connection the upgrade's token authenticated; the
//! replay and what was held for a resumed one, `hub.rs`), then every event the hub numbers
//! for it. A client's `authentication_challenge` on a connection not yet authenticated puts
//! it in the hub (its `hello` first, then `{"status": "OK", "seq_reply": N}`, in the order
//! the server queues them); on one already authenticated it is ignored, without an answer
//! (`websocket_router.go`). The `ping` action is answered `pong` (`wsapi/system.go`). Client
//! pings (WebSocket frames) are answered by tungstenite while the socket is read.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use super::super::shutdown::stopped;
use super::super::websocket::{finish, End, Registration, Ws};
use super::faults::MattermostFault;
use super::hub::{Ask, Opening};
use super::state::{ConnCommand, MattermostState};

pub(crate) async fn run(
    ws: Ws,
    state: Arc<MattermostState>,
    mut shutdown: watch::Receiver<bool>,
    ask: Ask,
) {
    let (tx, mut commands) = mpsc::unbounded_channel();
    let mut authed = ask.authenticated;
    let (conn_id, first) = match state.open(&ask, tx) {
        Opening::Opened { conn, first } => (conn, first),
        Opening::Refused(why) => {
            // `ws.Close()` after the upgrade: the socket goes, without a close frame.
            tracing::debug!(%why, "mock mattermost refused a resume");
            return;
        }
    };
    let unregister = state.clone();
    let registration = Registration::new(move || unregister.close(conn_id));
    let (mut sink, mut stream) = ws.split();
    for frame in first {
        if sink.send(Message::text(frame.to_string())).await.is_err() {
            drop(registration);
            return;
        }
    }
    let mut deaf = false;
    let mut end = End::Gone;
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break,
            command = commands.recv() => match command {
                Some(ConnCommand::Event(event)) => {
                    if sink.send(Message::text(event.to_string())).await.is_err() {
                        break;
                    }
                }
                Some(ConnCommand::Fault(MattermostFault::Silence)) => { end = End::Silence; break }
                Some(ConnCommand::Fault(MattermostFault::Deaf)) => deaf = true,
                Some(ConnCommand::Fault(MattermostFault::Drop)) => break,
                Some(ConnCommand::Fault(MattermostFault::Close(code))) => { end = End::Close(code); break }
                None => break,
            },
            message = stream.next(), if !deaf => match message {
                Some(Ok(Message::Text(text))) => {
                    let Some((reply, now_authed)) = on_text(&state, &text, authed) else { continue };
                    if now_authed && !authed {
                        authed = true;
                        if let Some(hello) = state.authenticate(conn_id) {
                            if sink.send(Message::text(hello.to_string())).await.is_err() {
                                break;
                            }
                        }
                    }
                    let Some(reply) = reply else { continue };
                    if sink.send(Message::text(reply.to_string())).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Ping(_))) => state.count(|s| s.ws_pings += 1),
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::debug!(conn_id, %error, "mock mattermost read failed");
                    break;
                }
            },
        }
    }
    if matches!(end, End::Silence) {
        // Half-open: what the hub numbers for this socket from now on is written into the
        // void (kept in the dead queue, never read), until the client's FIN arrives.
        tracing::info!(conn_id, "mock mattermost connection went half-open");
        commands.close();
    }
    finish(end, sink, stream, &mut shutdown).await;
    drop(registration);
}

/// A client action (`{"seq", "action", "data"}`): the answer to send (none to a challenge on
/// an authenticated connection), and whether the connection is now authenticated.
fn on_text(state: &MattermostState, text: &str, authed: bool) -> Option<(Option<Value>, bool)> {
    let v: Value = serde_json::from_str(text).ok()?;
    let seq = v["seq"].clone();
    let fail = |id: &str, message: &str, status: u16| {
        let error = json!({"id": id, "message": message, "status_code": status});
        Some((
            Some(json!({"status": "FAIL", "seq_reply": seq, "error": error})),
            authed,
        ))
    };
    match v["action"].as_str()? {
        "authentication_challenge" if authed => {
            state.count(|s| s.challenges_ok += 1);
            Some((None, true))
        }
        "authentication_challenge" => {
            let ok = state.authorised(v["data"]["token"].as_str());
            state.count(|s| {
                if ok {
                    s.challenges_ok += 1
                } else {
                    s.challenges_failed += 1
                }
            });
            if ok {
                return Some((Some(json!({"status": "OK", "seq_reply": seq})), true));
            }
            fail(
                "api.web_socket_router.not_authenticated.app_error",
                "Not authenticated",
                401,
            )
        }
        _ if !authed => fail(
            "api.web_socket_router.not_authenticated.app_error",
            "Not authenticated",
            401,
        ),
        "ping" => {
            let data = json!({"text": "pong", "version": state.config.server_version,
                              "server_time": chrono::Utc::now().timestamp_millis(), "node_id": ""});
            Some((
                Some(json!({"status": "OK", "seq_reply": seq, "data": data})),
                authed,
            ))
        }
        _ => fail(
            "api.web_socket_router.bad_action.app_error",
            "Unknown action",
            500,
        ),
    }
}
