//! The gateway's JSON payloads. Server frames are rendered once to `Utf8Bytes` so a buffered
//! dispatch can be replayed and fanned out by reference count instead of re-serialised.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Utf8Bytes;

pub(super) const OP_DISPATCH: u64 = 0;
pub(super) const OP_HEARTBEAT: u64 = 1;
pub(super) const OP_IDENTIFY: u64 = 2;
pub(super) const OP_RESUME: u64 = 6;

pub(super) fn hello(heartbeat_interval: Duration) -> Utf8Bytes {
    let ms = u64::try_from(heartbeat_interval.as_millis()).unwrap_or(u64::MAX);
    render(&json!({"op": 10, "d": {"heartbeat_interval": ms}}))
}

/// READY: the new session, and the bot's own user, as Discord's "Ready" event and QQ's "Ready
/// Event" both carry it (`id`, `username`, `bot`).
pub(super) fn ready(seq: u64, session_id: &str, resume_gateway_url: Option<&str>) -> Utf8Bytes {
    let mut d = json!({
        "session_id": session_id,
        "version": 1,
        "user": {"id": "mock-bot", "username": "mock", "bot": true},
    });
    if let Some(url) = resume_gateway_url {
        d["resume_gateway_url"] = json!(url);
    }
    render(&json!({"op": OP_DISPATCH, "s": seq, "t": "READY", "d": d}))
}

pub(super) fn resumed(seq: u64) -> Utf8Bytes {
    render(&json!({"op": OP_DISPATCH, "s": seq, "t": "RESUMED", "d": ""}))
}

pub(super) fn heartbeat_ack() -> Utf8Bytes {
    Utf8Bytes::from_static(r#"{"op":11}"#)
}

pub(super) fn reconnect() -> Utf8Bytes {
    Utf8Bytes::from_static(r#"{"op":7,"d":null}"#)
}

pub(super) fn invalid_session(resumable: bool) -> Utf8Bytes {
    render(&json!({"op": 9, "d": resumable}))
}

/// `n` is the global event number, so the event id, the message id and the content all name
/// the same event across sessions and resumes.
pub(super) fn message_create(seq: u64, n: u64) -> Utf8Bytes {
    render(&json!({
        "op": OP_DISPATCH,
        "s": seq,
        "t": "MESSAGE_CREATE",
        "id": event_id(n),
        "d": {"id": format!("msg-{n}"), "content": format!("mock message {n}")},
    }))
}

/// A dispatch whose type, id and payload the caller chooses (a hostile platform's).
pub(super) fn dispatch(seq: u64, kind: &str, id: &str, d: &Value) -> Utf8Bytes {
    render(&json!({"op": OP_DISPATCH, "s": seq, "t": kind, "id": id, "d": d}))
}

pub(super) fn event_id(n: u64) -> String {
    format!("ev-{n}")
}

fn render(value: &Value) -> Utf8Bytes {
    Utf8Bytes::from(value.to_string())
}

/// What a client asked for, reduced to the fields the mock acts on.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientFrame {
    Heartbeat,
    Identify {
        token: String,
        /// `None` when the client sent no (numeric) intents.
        intents: Option<u64>,
    },
    Resume {
        token: String,
        session_id: String,
        seq: u64,
    },
    /// Opcodes the mock does not model (presence, voice state...), accepted and ignored so
    /// that a client sending them is not punished for the mock's gaps.
    Other(u64),
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("payload is not json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("missing or invalid field {0}")]
    Field(&'static str),
}

pub fn parse(bytes: &[u8]) -> Result<ClientFrame, DecodeError> {
    let value: Value = serde_json::from_slice(bytes)?;
    let op = value
        .get("op")
        .and_then(Value::as_u64)
        .ok_or(DecodeError::Field("op"))?;
    let d = value.get("d").unwrap_or(&Value::Null);
    match op {
        OP_HEARTBEAT => Ok(ClientFrame::Heartbeat),
        OP_IDENTIFY => Ok(ClientFrame::Identify {
            token: string_field(d, "token", "d.token")?,
            intents: d.get("intents").and_then(Value::as_u64),
        }),
        OP_RESUME => Ok(ClientFrame::Resume {
            token: string_field(d, "token", "d.token")?,
            session_id: string_field(d, "session_id", "d.session_id")?,
            // A client that never saw a dispatch may send null; that means "replay everything".
            seq: match d.get("seq") {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_u64().ok_or(DecodeError::Field("d.seq"))?,
            },
        }),
        other => Ok(ClientFrame::Other(other)),
    }
}

fn string_field(d: &Value, key: &str, name: &'static str) -> Result<String, DecodeError> {
    d.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or(DecodeError::Field(name))
}
