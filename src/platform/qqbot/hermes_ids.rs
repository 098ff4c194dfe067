//! A QQ message as Hermes's own QQ Bot adapter names it (hermes-agent 0.19.0,
//! `gateway/platforms/qqbot/adapter.py`): the wing's ids, but a guild channel is a `group`
//! there, not a `channel`.

use serde_json::Value;

use crate::platform::message::{ChatType, HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, _d: &Value) -> HermesSource {
    let mut ids = HermesSource::of(said);
    if said.chat.chat_type == ChatType::Channel {
        ids.chat_type = "group";
    }
    ids
}
