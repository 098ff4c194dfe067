//! The WebSocket upgrade at the URL discovery handed out: admitted with a valid ticket, or
//! refused the way the SDKs read a refusal, with `Handshake-Status`, `Handshake-Msg` and
//! `Handshake-Autherrcode` headers on a non-101 answer (oapi-sdk-go `ws/client.go` `parseErr`,
//! oapi-sdk-python `_parse_ws_conn_exception`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::timeout;

use crate::platform::feishu::pbbp2::handshake;

use super::super::http::{self, RequestHead};
use super::super::reply::Answer;
use super::connection;
use super::faults::Refusal;
use super::state::FeishuState;

/// A client that opens a socket and never finishes its handshake must not pin a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) async fn serve(
    stream: TcpStream,
    head: RequestHead,
    state: Arc<FeishuState>,
    shutdown: watch::Receiver<bool>,
) {
    let query = |name: &str| head.query_param(name).unwrap_or_default();
    let admitted = state.admit(&query("ticket"), &query("device_id"), &query("service_id"));
    let ticket = match admitted {
        Ok(ticket) => ticket,
        Err(refusal) => return refuse(stream, &head, refusal).await,
    };
    let handshake = tokio_tungstenite::accept_async(stream);
    let ws = match timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(error)) => {
            tracing::debug!(%error, "mock feishu websocket handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("mock feishu websocket handshake timed out");
            return;
        }
    };
    connection::run(ws, state, shutdown, ticket).await;
}

/// The refusal's status goes in `Handshake-Status` and, when it is an error status, in the
/// status line too (the docs do not say which status line the platform uses; any non-101 is
/// a refusal to the SDKs).
async fn refuse(stream: TcpStream, head: &RequestHead, refusal: Refusal) {
    let Refusal::Handshake {
        status,
        msg,
        auth_err_code,
    } = refusal
    else {
        return;
    };
    tracing::info!(status, ?auth_err_code, "mock feishu refused an upgrade");
    let line = if (400..=599).contains(&status) {
        status
    } else {
        500
    };
    let mut answer = Answer::new(line, json!({"code": status, "msg": msg}));
    answer.headers.push((handshake::STATUS, status.to_string()));
    answer.headers.push((handshake::MSG, msg));
    if let Some(code) = auth_err_code {
        answer
            .headers
            .push((handshake::AUTH_ERR_CODE, code.to_string()));
    }
    http::answer_consumed(stream, head, &answer).await;
}
