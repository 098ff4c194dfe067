//! The mock platform's DingTalk side: Stream mode and the robot API, written from DingTalk's
//! public docs (open.dingtalk.com: "Stream 模式" and its protocol page, "获取企业内部应用的
//! accessToken", "批量发送人与机器人会话中机器人消息", "机器人发送群聊消息", the server error
//! codes) and the official SDK's source (open-dingtalk/dingtalk-stream-sdk-python
//! `dingtalk_stream/stream.py` `open_connection`/`route_message`/`get_access_token`,
//! `frames.py` for the frame and ack shapes, `handlers.py` for the SYSTEM answer), with the
//! facts issue 50 measured against the official client. Not from any adapter.
//!
//! On the same port as the rest of the mock:
//! - `POST /v1.0/gateway/connections/open` (`clientId`, `clientSecret`, `subscriptions`):
//!   `{endpoint, ticket}`; the ticket is good for one connection within `ticket_ttl` (90 s).
//! - `GET /connect?ticket=…` (upgrade): the connection. Robot messages come as CALLBACK
//!   frames on topic `/v1.0/im/bot/messages/get`, spread over the app's connections in turn,
//!   each push with a new `messageId` and the same `msgId`; a push not acked within
//!   `ack_timeout` is pushed again, up to `max_retries` times. SYSTEM `ping`s at
//!   `server_ping` if set; SYSTEM `disconnect` on the fault, then the close
//!   `disconnect_grace` later (10 s, as issue 50 measured; the Java SDK's "connection will
//!   close later"), the socket still read meanwhile; nothing new is pushed on it, unless a
//!   test asks for pushes already under way (`dingtalk_disconnect_delivering`). Each
//!   connection's span is recorded (`dingtalk_connections`): opened, first client ping,
//!   `disconnect`, closed and by which side.
//! - `POST /v1.0/oauth2/accessToken`, `POST /v1.0/robot/oToMessages/batchSend` and
//!   `POST /v1.0/robot/groupMessages/send`; accepted posts are recorded with the other
//!   platforms' posts (no idempotency key: each request is a new message).
//! - `POST /robot/sendBySession?session=…`, the session webhook each message carries (here on
//!   this mock): `{"msgtype": "text", "text": {"content": …}}` answered `{"errcode": 0}`, the
//!   way the SDK's `reply_text` posts, recorded as a post to the message's group or sender.
//! - `POST /v1.0/robot/messageFiles/download`: a picture's download code exchanged for a link
//!   on this mock, `GET /dtfiles/<link>`, which serves the bytes (`files.rs`).
//!
//! Faults: [`DingTalkFault`] (half-open, deaf: no pong and no ack, a drop without a close
//! frame, a planned disconnect), [`OpenRefusal`] (a refused open), revoked credentials
//! (`dingtalk_revoke`), redelivery (`ack_timeout`/`max_retries`), and
//! [`SendFault`](super::SendFault) with [`Platform::DingTalk`](super::post::Platform::DingTalk).

pub(super) mod config;
mod connection;
mod endpoint;
mod files;
mod handle;
mod record;
mod state;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::timeout;

pub use config::DingTalkConfig;
pub use record::{
    DingTalkConnRecord, DingTalkEventRecord, DingTalkFault, DingTalkSide, DingTalkStats,
    OpenRefusal,
};

use super::ack_timer;
use super::http::{self, RequestHead};
use super::post_record::PostRecord;
use super::reply::{Answer, Reply};
use super::side::{at_once, Side, Upgrade};
use state::DingTalkState;

/// Where Stream connections upgrade.
const WS_PATH: &str = "/connect";

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct DingTalk {
    state: Arc<DingTalkState>,
    posts: Arc<PostRecord>,
}

impl DingTalk {
    /// `addr` is the mock's own address, which `connections/open` and the session webhooks
    /// point to.
    pub(super) fn new(
        config: DingTalkConfig,
        addr: std::net::SocketAddr,
        posts: Arc<PostRecord>,
    ) -> Self {
        let (ws_url, http_base) = (format!("ws://{addr}{WS_PATH}"), format!("http://{addr}"));
        DingTalk {
            state: Arc::new(DingTalkState::new(config, ws_url, http_base)),
            posts,
        }
    }
}

impl Side for DingTalk {
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        endpoint::route(head, body, &self.state, &self.posts).map(at_once)
    }

    fn upgrade(
        self: Arc<Self>,
        upgrade: Box<Upgrade>,
    ) -> Result<BoxFuture<'static, ()>, Box<Upgrade>> {
        if upgrade.head.path != WS_PATH {
            return Err(upgrade);
        }
        let Upgrade {
            stream,
            head,
            shutdown,
            ..
        } = *upgrade;
        let state = self.state.clone();
        Ok(Box::pin(async move {
            let ticket = head.query_param("ticket").unwrap_or_default();
            if !state.take_ticket(&ticket) {
                let refused = Answer::new(
                    401,
                    serde_json::json!({"code": "InvalidTicket", "message": "ticket is invalid or expired"}),
                );
                return http::answer_consumed(stream, &head, &refused).await;
            }
            match timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::accept_async(stream)).await {
                Ok(Ok(ws)) => connection::run(ws, state, shutdown).await,
                Ok(Err(error)) => tracing::debug!(%error, "mock dingtalk handshake failed"),
                Err(_) => tracing::debug!("mock dingtalk handshake timed out"),
            }
        }))
    }

    /// The ack timer, which pushes again what was not acked in time.
    fn background(
        self: Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(ack_timer::run(self.state.clone(), shutdown)))
    }
}
