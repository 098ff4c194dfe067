//! A DingTalk message as Hermes's own DingTalk adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/dingtalk/adapter.py`, the message handler's `build_source`): the chat by
//! `conversationId`, the sender by `senderId`, with `senderStaffId` beside as `user_id_alt`.

use serde_json::Value;

use crate::platform::message::{text, HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, data: &Value) -> HermesSource {
    let mut ids = HermesSource::of(said);
    ids.user_id = text(&data["senderId"]).or(ids.user_id);
    ids.user_id_alt = text(&data["senderStaffId"]);
    ids
}
