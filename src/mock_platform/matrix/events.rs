//! The events the mock homeserver stores and how a client is shown them
//! (docs/research/matrix-client-server.md §2, §7): `ClientEventWithoutRoomID` in `/sync`,
//! `ClientEvent` (with `room_id`) in `/messages`, `unsigned.age` computed when served, and
//! `unsigned.transaction_id` only on the sending device's own echo.

use serde_json::{json, Value};

use super::super::post::unix_ms_now;

/// Who put an event in a room, for the handle's lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The mock's human, through the handle: `m.room.message` …
    HumanMessage,
    /// … or anything else (an encrypted message, a state change).
    Human,
    /// The bot, through `PUT …/send/…`.
    Bot,
}

/// One event in the stream.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    /// Its place in the one stream of the homeserver: 1 for the first event.
    pub(crate) position: u64,
    pub(crate) room: String,
    /// The event without `room_id` and `unsigned`.
    pub(crate) event: Value,
    pub(crate) origin: Origin,
    /// The sending device's transaction id, for the bot's own events.
    pub(crate) transaction_id: Option<String>,
}

impl Stored {
    pub(crate) fn event_id(&self) -> &str {
        self.event["event_id"].as_str().unwrap_or_default()
    }

    /// As `/sync` shows it (no `room_id`), or `/messages` (`with_room`).
    pub(crate) fn client_event(&self, with_room: bool) -> Value {
        served(
            &self.event,
            &self.room,
            with_room,
            self.transaction_id.as_deref(),
        )
    }
}

/// An event as served now: `unsigned.age` from its `origin_server_ts`, the transaction id if
/// the client being given the event is the device that sent it (the mock has only one).
pub(crate) fn served(
    event: &Value,
    room: &str,
    with_room: bool,
    transaction_id: Option<&str>,
) -> Value {
    let mut served = event.clone();
    let sent = event["origin_server_ts"].as_u64().unwrap_or(0);
    let mut unsigned = json!({"age": unix_ms_now().saturating_sub(sent)});
    if let Some(txn) = transaction_id {
        unsigned["transaction_id"] = json!(txn);
    }
    served["unsigned"] = unsigned;
    if with_room {
        served["room_id"] = json!(room);
    }
    served
}

/// A timeline event (no `state_key`).
pub(crate) fn message(event_id: &str, kind: &str, sender: &str, content: Value) -> Value {
    json!({
        "event_id": event_id,
        "type": kind,
        "sender": sender,
        "origin_server_ts": unix_ms_now(),
        "content": content,
    })
}

/// A state event: `state_key` present, even when empty.
pub(crate) fn state(
    event_id: &str,
    kind: &str,
    state_key: &str,
    sender: &str,
    content: Value,
) -> Value {
    let mut event = message(event_id, kind, sender, content);
    event["state_key"] = json!(state_key);
    event
}

/// `m.room.message` with `msgtype: m.text`.
pub(crate) fn text(body: &str) -> Value {
    json!({"msgtype": "m.text", "body": body})
}

/// `m.room.encryption` content as rooms are created with it (§7; only `algorithm` is
/// required).
pub(crate) fn encryption() -> Value {
    json!({
        "algorithm": "m.megolm.v1.aes-sha2",
        "rotation_period_ms": 604_800_000u64,
        "rotation_period_msgs": 100,
    })
}

/// `m.room.encrypted` content as a Megolm sender writes it (§7), `sender_key` and
/// `device_id` included although deprecated since v1.3. The ciphertext is not a real one:
/// the bot cannot read it either way.
pub(crate) fn megolm(n: u64) -> Value {
    json!({
        "algorithm": "m.megolm.v1.aes-sha2",
        "ciphertext": format!("AwgAEpABbW9jayBjaXBoZXJ0ZXh0IHtufQ{n:08}"),
        "session_id": "bW9ja3Nlc3Npb25pZA",
        "sender_key": "bW9ja3NlbmRlcmtleWN1cnZlMjU1MTk",
        "device_id": "ALICEDEVICE",
    })
}
