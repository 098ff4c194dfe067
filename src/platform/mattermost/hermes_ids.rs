//! A Mattermost post as Hermes's own adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/mattermost/adapter.py`, `_handle_ws_event`): its `_CHANNEL_TYPE_MAP`
//! makes `D` a `dm`, `G` and `P` a `group`, `O` a `channel`; and with its default
//! `MATTERMOST_REPLY_MODE=off` a post's thread is its `root_id`, or none.

use serde_json::Value;

use crate::platform::message::{text, HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, e: &Value) -> HermesSource {
    let mut ids = HermesSource::of(said);
    ids.chat_type = match e["channel_type"].as_str() {
        Some("D") => "dm",
        Some("G" | "P") => "group",
        _ => "channel",
    };
    ids.thread_id = text(&e["post"]["root_id"]);
    ids
}
