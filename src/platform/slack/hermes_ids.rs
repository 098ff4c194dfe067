//! A Slack message as Hermes's own Slack adapter names it (hermes-agent 0.19.0,
//! `plugins/platforms/slack/adapter.py`, `_handle_slack_message`): a direct message (`im`, and
//! a group DM, `mpim`) is `dm`, anything else `group`; and with Hermes's defaults
//! (`reply_in_thread` and `dm_top_level_threads_as_sessions` both on) every message is in a
//! thread: its thread's, or the one it starts, its own `ts`. So a conversation goes on in its
//! Slack thread.

use serde_json::Value;

use crate::platform::message::{text, HermesSource, Said};

pub(super) fn source(said: &Said, _kind: &str, e: &Value) -> HermesSource {
    let mut ids = HermesSource::of(said);
    let dm = matches!(e["channel_type"].as_str(), Some("im" | "mpim"))
        || (e["channel_type"].is_null() && said.chat.id.starts_with('D'));
    ids.chat_type = if dm { "dm" } else { "group" };
    ids.thread_id = text(&e["thread_ts"]).or_else(|| text(&e["ts"]));
    ids
}
