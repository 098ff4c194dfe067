//! The mock platform's Feishu/Lark side, written from Feishu's and Lark's public docs and the
//! official SDKs' long-connection clients (larksuite/oapi-sdk-go `ws/`, node-sdk `ws-client/`,
//! oapi-sdk-python `lark_oapi/ws/`), not from any adapter.
//!
//! On the same port as the rest of the mock:
//! - `POST /callback/ws/endpoint`: discovery of the long connection's URL and ClientConfig.
//! - `GET /ws/v2?device_id=…&service_id=…&ticket=…` (upgrade): the long connection, binary
//!   pbbp2 frames ([`crate::platform::feishu::pbbp2`]); pushes events, answers pings, takes acks, and pushes an
//!   event again when its ack does not come in time.
//! - `POST /open-apis/auth/v3/tenant_access_token/internal`: the tenant token.
//! - `GET /open-apis/bot/v3/info`: who the app's bot is (its `open_id`).
//! - `POST /open-apis/im/v1/messages` and `…/messages/{message_id}/reply`: sends, recorded
//!   with the other platforms' posts ([`Platform::Feishu`]); an image, file or audio message
//!   with the upload it names.
//! - `POST /open-apis/im/v1/images` and `/open-apis/im/v1/files`: uploads (`uploads.rs`).
//!
//! Faults: [`FeishuFault`] for the long connection, [`SendFault`](super::SendFault) with
//! [`Platform::Feishu`] for the sends.

mod auth;
mod body;
pub(super) mod config;
mod connection;
mod endpoint;
mod events;
mod faults;
mod handle;
mod handshake;
mod record;
mod redelivery;
mod resources;
mod send;
mod state;
mod ticket;
mod uploads;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

pub use config::{ClientConfig, FeishuConfig};
pub use events::FeishuMessage;
pub use faults::{code, FeishuFault, Refusal};
pub use record::{FeishuAck, FeishuEventRecord, FeishuStats};

use super::ack_timer;
use super::http::RequestHead;
use super::http::MAX_UPLOAD_BODY;
#[cfg(doc)]
use super::post::Platform;
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{at_once, BodyLimit, Side, Upgrade};
use state::FeishuState;

/// Where the long connection upgrades; discovery puts it in the URL it hands out.
const WS_PATH: &str = "/ws/v2";

/// The sender of the messages [`MockPlatform::feishu_emit`](super::MockPlatform::feishu_emit)
/// generates.
const MOCK_SENDER: &str = "ou_mockuser000000000000000000000001";

/// Feishu's side of the mock: its state, and the send record its message endpoints write.
pub(super) struct Feishu {
    state: Arc<FeishuState>,
    posts: Arc<PostRecord>,
}

impl Feishu {
    /// `ws_base` is what discovery puts before [`WS_PATH`]: the mock's own `ws://` address.
    pub(super) fn new(config: FeishuConfig, ws_base: String, posts: Arc<PostRecord>) -> Self {
        Feishu {
            state: Arc::new(FeishuState::new(config, format!("{ws_base}{WS_PATH}"))),
            posts,
        }
    }
}

impl Side for Feishu {
    /// The send endpoints, endpoint discovery and the tenant token.
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        let state = &self.state;
        if uploads::is_upload(head) {
            return Some(Box::pin(async move {
                Reply::Answer(uploads::serve(head, body, state).await)
            }));
        }
        let reply = match send::endpoint(head) {
            Some((target, id)) => send::handle(state, &self.posts, target, id, head, body),
            None => Reply::Answer(
                resources::route(head, state).or_else(|| endpoint::route(head, body, state))?,
            ),
        };
        Some(at_once(reply))
    }

    /// An upload takes a whole file: read up to the mock's upload cap, past Feishu's 30 MB.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        uploads::is_upload(head).then_some(BodyLimit {
            max: MAX_UPLOAD_BODY,
            too_large: uploads::too_large,
        })
    }

    /// The long connection, at [`WS_PATH`].
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
        Ok(Box::pin(handshake::serve(stream, head, state, shutdown)))
    }

    /// The ack timer, which pushes again what was not acked in time.
    fn background(
        self: Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(ack_timer::run(self.state.clone(), shutdown)))
    }
}

impl FeishuMessage {
    /// A text message from the mock's user in a group chat.
    pub fn text(chat_id: &str, text: &str) -> FeishuMessage {
        FeishuMessage {
            chat_id: chat_id.to_owned(),
            chat_type: "group".to_owned(),
            sender_open_id: MOCK_SENDER.to_owned(),
            text: text.to_owned(),
        }
    }
}
