//! The mock platform's WeCom side: an AI bot's (智能机器人) long connection, written from
//! the platform's docs ("智能机器人长连接", developer.work.weixin.qq.com/document/path/101463:
//! subscription, message and event callbacks, replies, proactive messages, heartbeat) and
//! the official SDK's source (`@wecom/aibot-node-sdk` 1.0.7 on npm, `dist/index.cjs.js`:
//! `WsCmd`, `WsConnectionManager.handleFrame`, `sendHeartbeat`, `sendReply`; and
//! `dist/types/{message,event}.d.ts` for the bodies), not from any adapter.
//!
//! On the same port as the rest of the mock, one WebSocket at [`WS_PATH`]:
//! - the first frame is `aibot_subscribe` `{bot_id, secret}`, answered
//!   `{headers: {req_id}, errcode, errmsg}`; a bad pair (or a revoked secret) gets 40001 and
//!   a close; a good one takes the bot, and the connection that held it before gets
//!   `aibot_event_callback` with `disconnected_event` and is closed ("one connection per bot");
//! - `ping` is answered `errcode` 0;
//! - message callbacks (`aibot_msg_callback`, a fresh `req_id` per delivery, the body's
//!   `msgid` the same on every one) go to the bot's connection, or wait for the next one;
//! - `aibot_respond_msg` must carry a callback's `req_id`; a stream reply whose stream id was
//!   seen under that `req_id` refreshes that message instead of posting another;
//!   `aibot_send_msg` posts markdown to a `chatid`.
//!
//! - files people send come as a link on this mock (`GET /wecom/files/<token>`) and its
//!   `aeskey` in the callback, the bytes encrypted as the docs say (`files.rs`).
//!
//! Faults: [`WeComFault`] on the live connection (half-open, no pong, drop without a close
//! frame, a close, a kick), a revoked secret, lost answers, an explicit redelivery; refused
//! opens are the shared [`Fault::Refuse`](super::Fault::Refuse); a damaged file,
//! [`WeComFileFault`].

pub(super) mod config;
mod connection;
mod faults;
mod files;
mod handle;
mod record;
mod state;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::timeout;

pub use config::WeComConfig;
pub use faults::WeComFault;
pub use files::{WeComFileFault, WeComMedia};
pub use record::{WeComEventRecord, WeComPost, WeComStats};

use super::http::RequestHead;
use super::reply::Reply;
use super::side::{at_once, Side, Upgrade};
use state::WeComState;

/// Where the long connection upgrades (the real one is the host's root).
pub const WS_PATH: &str = "/wecom/aibot";

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct WeCom {
    state: Arc<WeComState>,
}

impl WeCom {
    pub(super) fn new(config: WeComConfig) -> Self {
        WeCom {
            state: Arc::new(WeComState::new(config)),
        }
    }
}

impl Side for WeCom {
    /// `GET /wecom/files/<token>`: a file behind a callback's link (`files.rs`).
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        _body: &'a [u8],
        _shutdown: &tokio::sync::watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        self.state
            .files
            .serve(head)
            .map(|answer| at_once(Reply::Answer(answer)))
    }

    fn upgrade(
        self: Arc<Self>,
        upgrade: Box<Upgrade>,
    ) -> Result<BoxFuture<'static, ()>, Box<Upgrade>> {
        if upgrade.head.path != WS_PATH {
            return Err(upgrade);
        }
        let Upgrade {
            stream, shutdown, ..
        } = *upgrade;
        let state = self.state.clone();
        Ok(Box::pin(async move {
            match timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::accept_async(stream)).await {
                Ok(Ok(ws)) => connection::run(ws, state, shutdown).await,
                Ok(Err(error)) => tracing::debug!(%error, "mock wecom handshake failed"),
                Err(_) => tracing::debug!("mock wecom handshake timed out"),
            }
        }))
    }
}
