//! A Discord message as Hermes's own Discord adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/discord/adapter.py`, `_handle_message`): a direct message is `dm`, a
//! guild channel `group` (the wing says `channel`). A thread is `thread` there, with its id as
//! the thread; `MESSAGE_CREATE` does not say a channel is a thread, so a thread's messages go
//! as its channel's (docs/agent.md says so).

use serde_json::Value;

use crate::platform::message::{HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, d: &Value) -> HermesSource {
    let mut ids = HermesSource::of(said);
    ids.chat_type = if d["guild_id"].is_null() { "dm" } else { "group" };
    ids
}
