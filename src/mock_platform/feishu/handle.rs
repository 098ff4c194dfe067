//! The Feishu side of the handle: what a test drives (events, faults, tokens) and reads (acks,
//! events, counters). Sends show in the shared `posts()` and `send_attempts()`.

use serde_json::Value;

use super::super::handle::MockPlatform;
use super::super::post::unix_ms_now;
use super::events::{self, EventIds, FeishuMessage, Mention};
use super::faults::FeishuFault;
use super::record::{FeishuAck, FeishuEventRecord, FeishuStats};
use super::resources::Resource;
use super::state::FeishuState;
use super::{Feishu, WS_PATH};

/// The Feishu side of the handle. Events are pushed to the newest connection, or wait for one.
impl MockPlatform {
    fn feishu(&self) -> &FeishuState {
        &self.side::<Feishu>().state
    }

    /// What discovery puts before the long connection's path (`/ws/v2`) in the URLs it hands
    /// out; by default this mock's own `ws://` address. Lets a test send clients through a
    /// proxy.
    pub fn set_feishu_ws_base(&self, base: String) {
        self.feishu().set_ws_url(format!("{base}{WS_PATH}"));
    }

    /// `n` text messages in the configured chat, as `im.message.receive_v1` events; returns
    /// their event ids.
    pub fn feishu_emit(&self, n: usize) -> Vec<String> {
        let chat = self.feishu().config.chat_id.clone();
        (0..n)
            .map(|_| {
                let k = self.feishu().event_count() + 1;
                self.feishu_emit_message(FeishuMessage::text(&chat, &format!("feishu message {k}")))
            })
            .collect()
    }

    /// One message as an `im.message.receive_v1` event; returns its event id.
    pub fn feishu_emit_message(&self, message: FeishuMessage) -> String {
        self.emit_feishu(message, &[], None)
    }

    /// An image message (`message_type` `image`, content `{"image_key"}`) in the configured
    /// chat, its bytes served by the resources endpoint; returns its event id.
    pub fn feishu_emit_image(&self, bytes: Vec<u8>) -> String {
        let key = format!("img_v3_{}", events::hex(24));
        let content = serde_json::json!({ "image_key": key });
        self.emit_feishu_file("image", content, "image", key, bytes)
    }

    /// A file message (`message_type` `file`, content `{"file_key", "file_name"}`) in the
    /// configured chat, its bytes served by the resources endpoint; returns its event id.
    pub fn feishu_emit_file(&self, name: &str, bytes: Vec<u8>) -> String {
        let key = format!("file_v3_{}", events::hex(24));
        let content = serde_json::json!({ "file_key": key, "file_name": name });
        self.emit_feishu_file("file", content, "file", key, bytes)
    }

    fn emit_feishu_file(
        &self,
        message_type: &'static str,
        content: Value,
        kind: &'static str,
        key: String,
        bytes: Vec<u8>,
    ) -> String {
        let chat = self.feishu().config.chat_id.clone();
        let ids = EventIds::new();
        self.feishu().add_resource(Resource {
            message_id: ids.message_id.clone(),
            key,
            kind,
            bytes,
        });
        self.emit_feishu_with(
            ids,
            FeishuMessage::text(&chat, ""),
            &[],
            None,
            Some(&(message_type, content)),
        )
    }

    /// A text message from the mock's user in group `chat_id` that @-mentions the app's bot
    /// as Feishu delivers one: the text `@_user_1 ` then `text`, and the bot (its `open_id` and
    /// name, as `bot/v3/info` gives them) under `mentions`. Returns its event id.
    pub fn feishu_emit_mention_of_bot(&self, chat_id: &str, text: &str) -> String {
        let config = &self.feishu().config;
        let (open_id, name) = (config.bot_open_id.clone(), config.bot_name.clone());
        self.feishu_emit_mention_of(chat_id, text, &open_id, &name)
    }

    /// The same, mentioning the user `open_id`, shown as `name`.
    pub fn feishu_emit_mention_of(
        &self,
        chat_id: &str,
        text: &str,
        open_id: &str,
        name: &str,
    ) -> String {
        let key = "@_user_1";
        let message = FeishuMessage::text(chat_id, &format!("{key} {text}"));
        let mention = Mention { key, open_id, name };
        self.emit_feishu(message, &[mention], None)
    }

    /// One message pushed in `parts` parts whatever the split fault says; returns its event id.
    pub fn feishu_emit_split(&self, message: FeishuMessage, parts: u32) -> String {
        self.emit_feishu(message, &[], Some(parts.max(1)))
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
        self.feishu().emit(record, bytes, None);
        event_id
    }

    fn emit_feishu(
        &self,
        message: FeishuMessage,
        mentions: &[Mention<'_>],
        parts: Option<u32>,
    ) -> String {
        self.emit_feishu_with(EventIds::new(), message, mentions, parts, None)
    }

    fn emit_feishu_with(
        &self,
        ids: EventIds,
        message: FeishuMessage,
        mentions: &[Mention<'_>],
        parts: Option<u32>,
        file: Option<&(&'static str, Value)>,
    ) -> String {
        let config = &self.feishu().config;
        let now_ms = unix_ms_now();
        let (app, tenant) = (&config.app_id, &config.tenant_key);
        let payload = events::receive_v1(&ids, &message, mentions, app, tenant, now_ms, file);
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
        self.feishu().emit(record, bytes, parts);
        ids.event_id
    }

    pub fn set_feishu_fault(&self, fault: FeishuFault) {
        self.feishu().set_fault(fault);
    }

    /// Ends no-pong, split, and any duplicates or refusals still armed.
    pub fn clear_feishu_faults(&self) {
        self.feishu().clear_faults();
    }

    /// Every data frame clients sent back, in order of arrival.
    pub fn feishu_acks(&self) -> Vec<FeishuAck> {
        self.feishu().acks()
    }

    /// Every event generated, in order, with its deliveries and ack time.
    pub fn feishu_events(&self) -> Vec<FeishuEventRecord> {
        self.feishu().events()
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
        self.feishu().stats()
    }

    /// Stop honouring every tenant token issued so far; new ones are issued as usual.
    pub fn expire_feishu_tokens(&self) {
        self.feishu().tokens.expire_all();
    }

    /// Tenant tokens minted so far (a token handed out again is not counted twice).
    pub fn feishu_tokens_issued(&self) -> u64 {
        self.feishu().tokens.issued()
    }
}
