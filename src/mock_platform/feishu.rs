//! The mock platform's Feishu/Lark side, written from Feishu's and Lark's public docs and the
//! official SDKs' long-connection clients (larksuite/oapi-sdk-go `ws/`, node-sdk `ws-client/`,
//! oapi-sdk-python `lark_oapi/ws/`), not from any adapter.
//!
//! On the same port as the rest of the mock:
//! - `POST /callback/ws/endpoint`: discovery of the long connection's URL and ClientConfig.
//! - `GET /ws/v2?device_id=…&service_id=…&ticket=…` (upgrade): the long connection, binary
//!   pbbp2 frames ([`crate::pbbp2`]); pushes events, answers pings, takes acks, and pushes an
//!   event again when its ack does not come in time.
//! - `POST /open-apis/auth/v3/tenant_access_token/internal`: the tenant token.
//! - `POST /open-apis/im/v1/messages` and `…/messages/{message_id}/reply`: sends, recorded
//!   with the other platforms' posts ([`Platform::Feishu`]).
//!
//! Faults: [`FeishuFault`] for the long connection, [`SendFault`](super::SendFault) with
//! [`Platform::Feishu`] for the sends.

mod auth;
mod config;
mod connection;
mod endpoint;
mod events;
mod faults;
mod handshake;
mod record;
pub(super) mod redelivery;
pub(super) mod send;
pub(super) mod state;

use std::sync::Arc;

use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::watch;

pub use config::{ClientConfig, FeishuConfig};
pub use events::FeishuMessage;
pub use faults::{code, FeishuFault, Refusal};
pub use record::{FeishuAck, FeishuEventRecord, FeishuStats};

use super::http::RequestHead;
use super::reply::Answer;
#[cfg(doc)]
use super::Platform;
use super::{MockPlatform, Shared};
use events::EventIds;

/// Where the long connection upgrades; discovery puts it in the URL it hands out.
pub(super) const WS_PATH: &str = "/ws/v2";

/// The sender of the messages [`MockPlatform::feishu_emit`] generates.
const MOCK_SENDER: &str = "ou_mockuser000000000000000000000001";

/// Answers discovery and token requests; `None` for any other request.
pub(super) fn route(head: &RequestHead, body: &[u8], shared: &Shared) -> Option<Answer> {
    endpoint::route(head, body, shared)
}

/// An upgrade request for [`WS_PATH`].
pub(super) async fn serve_upgrade(
    stream: TcpStream,
    head: RequestHead,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    handshake::serve(stream, head, shared, shutdown).await;
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

/// The Feishu side of the handle. Events are pushed to the newest connection, or wait for one.
impl MockPlatform {
    /// What discovery puts before [`WS_PATH`] in the URLs it hands out; by default this mock's
    /// own `ws://` address. Lets a test send clients through a proxy.
    pub fn set_feishu_ws_base(&self, base: String) {
        self.shared.feishu.set_ws_base(base);
    }

    /// `n` text messages in the configured chat, as `im.message.receive_v1` events; returns
    /// their event ids.
    pub fn feishu_emit(&self, n: usize) -> Vec<String> {
        let chat = self.shared.config.feishu.chat_id.clone();
        (0..n)
            .map(|_| {
                let k = self.shared.feishu.event_count() + 1;
                self.feishu_emit_message(FeishuMessage::text(&chat, &format!("feishu message {k}")))
            })
            .collect()
    }

    /// One message as an `im.message.receive_v1` event; returns its event id.
    pub fn feishu_emit_message(&self, message: FeishuMessage) -> String {
        self.emit_message(message, None)
    }

    /// One message pushed in `parts` parts whatever the split fault says; returns its event id.
    pub fn feishu_emit_split(&self, message: FeishuMessage, parts: u32) -> String {
        self.emit_message(message, Some(parts.max(1)))
    }

    /// Any JSON as an event payload, however hostile. Its event id is `header.event_id` when
    /// that is a string, else `event_id`.
    pub fn feishu_emit_payload(&self, event_id: &str, payload: &Value) -> String {
        let event_id = payload
            .pointer("/header/event_id")
            .and_then(Value::as_str)
            .unwrap_or(event_id)
            .to_owned();
        let record = FeishuEventRecord {
            event_id: event_id.clone(),
            message_id: None,
            chat_id: None,
            text: None,
            emitted_at: std::time::Instant::now(),
            deliveries: 0,
            first_delivered_at: None,
            acked_at: None,
        };
        let bytes = serde_json::to_vec(payload).unwrap_or_default();
        self.shared.feishu.emit(record, bytes, None);
        event_id
    }

    fn emit_message(&self, message: FeishuMessage, parts: Option<u32>) -> String {
        let config = &self.shared.config.feishu;
        let ids = EventIds::new();
        let now_ms = super::post::unix_ms_now();
        let payload =
            events::receive_v1(&ids, &message, &config.app_id, &config.tenant_key, now_ms);
        let record = FeishuEventRecord {
            event_id: ids.event_id.clone(),
            message_id: Some(ids.message_id),
            chat_id: Some(message.chat_id),
            text: Some(message.text),
            emitted_at: std::time::Instant::now(),
            deliveries: 0,
            first_delivered_at: None,
            acked_at: None,
        };
        let bytes = serde_json::to_vec(&payload).unwrap_or_default();
        self.shared.feishu.emit(record, bytes, parts);
        ids.event_id
    }

    pub fn set_feishu_fault(&self, fault: FeishuFault) {
        self.shared.feishu.set_fault(fault);
    }

    /// Ends no-pong, split, and any duplicates or refusals still armed.
    pub fn clear_feishu_faults(&self) {
        self.shared.feishu.clear_faults();
    }

    /// Every data frame clients sent back, in order of arrival.
    pub fn feishu_acks(&self) -> Vec<FeishuAck> {
        self.shared.feishu.acks()
    }

    /// Every event generated, in order, with its deliveries and ack time.
    pub fn feishu_events(&self) -> Vec<FeishuEventRecord> {
        self.shared.feishu.events()
    }

    /// Event ids not yet acked with code 200.
    pub fn feishu_unacked(&self) -> Vec<String> {
        self.feishu_events()
            .into_iter()
            .filter(|e| e.acked_at.is_none())
            .map(|e| e.event_id)
            .collect()
    }

    pub fn feishu_stats(&self) -> FeishuStats {
        self.shared.feishu.stats()
    }

    /// Stop honouring every tenant token issued so far; new ones are issued as usual.
    pub fn expire_feishu_tokens(&self) {
        self.shared.feishu.tokens.expire_all();
    }

    /// Tenant tokens minted so far (a token handed out again is not counted twice).
    pub fn feishu_tokens_issued(&self) -> u64 {
        self.shared.feishu.tokens.issued()
    }
}
