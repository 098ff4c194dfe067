//! One WebSocket connection, as `app/platform/web_conn.go` serves it: `hello` (its `seq` 0,
//! with a fresh `connection_id`) at once when the upgrade carried a valid token, else after
//! an `authentication_challenge` that is answered `{"status": "OK", "seq_reply": N}`; then
//! every `posted` event with the connection's next `seq`. Client pings are answered by
//! tungstenite while the socket is read. A resume (`connection_id` and `sequence_number` in
//! the query) is never honoured: this mock is a server whose buffers no longer hold the gap,
//! so it answers with a new `connection_id` and replays nothing, and a client must catch up
//! by REST.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use super::super::shutdown::stopped;
use super::super::websocket::{finish, End, Registration, Ws};
use super::faults::MattermostFault;
use super::state::{ConnCommand, MattermostState};

pub(crate) async fn run(
    ws: Ws,
    state: Arc<MattermostState>,
    mut shutdown: watch::Receiver<bool>,
    authenticated: bool,
) {
    let (tx, mut commands) = mpsc::unbounded_channel();
    let (mut sink, mut stream) = ws.split();
    let conn_id = state.register(tx);
    let unregister = state.clone();
    let registration = Registration::new(move || unregister.unregister(conn_id));
    let connection_id = state.mint_id('w');
    let mut seq: u64 = 0;
    let mut authed = authenticated;
    let mut deaf = false;
    let hello = json!({"event": "hello", "data": {"connection_id": connection_id,
        "server_version": state.config.server_version}, "broadcast": {"omit_users": null,
        "user_id": state.config.bot_user_id, "channel_id": "", "team_id": ""}});
    let mut end = End::Gone;
    if authed && sink.send(frame(hello.clone(), &mut seq)).await.is_err() {
        drop(registration);
        return;
    }
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break,
            command = commands.recv() => match command {
                // Events go only to an authenticated connection, as the hub sends them.
                Some(ConnCommand::Event(event)) if authed => {
                    if sink.send(frame(event, &mut seq)).await.is_err() {
                        break;
                    }
                }
                Some(ConnCommand::Event(_)) => {}
                Some(ConnCommand::Fault(MattermostFault::Silence)) => { end = End::Silence; break }
                Some(ConnCommand::Fault(MattermostFault::Deaf)) => deaf = true,
                Some(ConnCommand::Fault(MattermostFault::Drop)) => break,
                Some(ConnCommand::Fault(MattermostFault::Close(code))) => { end = End::Close(code); break }
                None => break,
            },
            message = stream.next(), if !deaf => match message {
                Some(Ok(Message::Text(text))) => {
                    let Some((reply, now_authed)) = on_text(&state, &text, authed) else { continue };
                    if sink.send(Message::text(reply.to_string())).await.is_err() {
                        break;
                    }
                    if now_authed && !authed {
                        authed = true;
                        if sink.send(frame(hello.clone(), &mut seq)).await.is_err() {
                            break;
                        }
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
        tracing::info!(conn_id, "mock mattermost connection went half-open");
        commands.close();
    }
    finish(end, sink, stream, &mut shutdown).await;
    drop(registration);
}

/// `event` with the connection's next `seq`.
fn frame(mut event: Value, seq: &mut u64) -> Message {
    event["seq"] = json!(*seq);
    *seq += 1;
    Message::text(event.to_string())
}

/// A client action (`{"seq", "action", "data"}`): the answer to send, and whether the
/// connection is now authenticated. Only the challenge is served; any other action gets the
/// server's answer to an action it does not know.
fn on_text(state: &MattermostState, text: &str, authed: bool) -> Option<(Value, bool)> {
    let v: Value = serde_json::from_str(text).ok()?;
    let seq = v["seq"].clone();
    match v["action"].as_str()? {
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
                return Some((json!({"status": "OK", "seq_reply": seq}), true));
            }
            let error = json!({"id": "api.web_socket_router.not_authenticated.app_error",
                               "message": "Not authenticated", "status_code": 401});
            Some((
                json!({"status": "FAIL", "seq_reply": seq, "error": error}),
                authed,
            ))
        }
        _ => {
            let error = json!({"id": "api.web_socket_router.bad_action.app_error",
                               "message": "Unknown action", "status_code": 501});
            Some((
                json!({"status": "FAIL", "seq_reply": seq, "error": error}),
                authed,
            ))
        }
    }
}
