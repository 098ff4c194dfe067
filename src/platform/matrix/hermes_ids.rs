//! A Matrix message as Hermes's own Matrix adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/matrix/adapter.py`, `_resolve_message_context`): in a room, with
//! Hermes's default `MATRIX_AUTO_THREAD`, every message is in a thread: its thread's, or the
//! one it starts, its own event id; so a conversation goes on in its Matrix thread. Hermes
//! tells a direct-message room (`dm`, no thread) from the room's state, which an event does
//! not carry: every room goes as a `group` here (docs/agent.md says so).

use serde_json::Value;

use crate::platform::message::{HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, _e: &Value) -> HermesSource {
    let mut ids = HermesSource::of(said);
    ids.chat_type = "group";
    ids.thread_id = said.thread_id.clone().or_else(|| said.message_id.clone());
    ids
}
