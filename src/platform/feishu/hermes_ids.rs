//! A Feishu message as Hermes's own Feishu adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/feishu/adapter.py`, `_resolve_sender_profile` and the message handler):
//! the sender by its tenant `user_id` where the event has one, else its `open_id`, and its
//! `union_id` beside, which Hermes prefers for a member's own session in a group; the thread
//! by `thread_id`, else `root_id`.

use serde_json::Value;

use crate::platform::message::{text, HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, data: &Value) -> HermesSource {
    let message = &data["event"]["message"];
    let sender = &data["event"]["sender"]["sender_id"];
    let mut ids = HermesSource::of(said);
    ids.user_id = text(&sender["user_id"])
        .or_else(|| text(&sender["open_id"]))
        .or(ids.user_id);
    ids.user_id_alt = text(&sender["union_id"]);
    ids.thread_id = text(&message["thread_id"]).or_else(|| text(&message["root_id"]));
    ids
}
