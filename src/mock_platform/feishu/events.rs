//! What the platform pushes down the long connection: v2 event payloads and the pbbp2 frames
//! that carry them (split into parts when asked), and the pong.
//!
//! The event shape is the v2 schema of `im.message.receive_v1` ("接收消息", im-v1 message
//! events); the frame headers are the ones the SDKs read in `handleDataFrame` (oapi-sdk-go
//! `ws/client.go`) / `handleEventData` (node-sdk `ws-client/index.ts`).

use prost::Message as _;
use serde_json::{json, Value};

use crate::platform::feishu::pbbp2::{header, message_type, Frame, FrameKind, Header};

use super::config::ClientConfig;

/// A message a test asks the platform to deliver as an `im.message.receive_v1` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeishuMessage {
    pub chat_id: String,
    /// "p2p" or "group".
    pub chat_type: String,
    pub sender_open_id: String,
    pub text: String,
}

/// Ids the platform assigns to one event: both stay the same across redeliveries, which is
/// what a client deduplicates on (`header.event_id`, or the message's `message_id`).
pub(crate) struct EventIds {
    pub(crate) event_id: String,
    pub(crate) message_id: String,
}

impl EventIds {
    pub(crate) fn new() -> EventIds {
        EventIds {
            event_id: hex(32),
            message_id: format!("om_{}", hex(32)),
        }
    }
}

/// Lower-case hex of this many digits, the shape of Feishu's ids.
pub(crate) fn hex(digits: usize) -> String {
    (0..digits)
        .map(|_| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}

/// One @-mention in a received message: the placeholder its text holds (`@_user_1`), and who
/// it names.
pub(crate) struct Mention<'a> {
    pub(crate) key: &'a str,
    pub(crate) open_id: &'a str,
    pub(crate) name: &'a str,
}

/// The v2 event JSON of one received text message, with its @-mentions as the event lists
/// them (`mentions[]`: `key`, `id` with the `open_id`, `name`, `tenant_key`).
pub(crate) fn receive_v1(
    ids: &EventIds,
    message: &FeishuMessage,
    mentions: &[Mention<'_>],
    app_id: &str,
    tenant_key: &str,
    unix_ms: u64,
    file: Option<&(&'static str, Value)>,
) -> Value {
    let mentions: Vec<Value> = mentions
        .iter()
        .map(|m| {
            json!({
                "key": m.key,
                "id": {"open_id": m.open_id, "union_id": "", "user_id": ""},
                "name": m.name,
                "tenant_key": tenant_key,
            })
        })
        .collect();
    // A message with a file is of its kind, its `content` the keys that name the file.
    let (message_type, content) = match file {
        Some((kind, content)) => (*kind, content.to_string()),
        None => ("text", json!({"text": message.text}).to_string()),
    };
    json!({
        "schema": "2.0",
        "header": {
            "event_id": ids.event_id,
            "event_type": "im.message.receive_v1",
            "create_time": unix_ms.to_string(),
            "token": "",
            "app_id": app_id,
            "tenant_key": tenant_key,
        },
        "event": {
            "sender": {
                "sender_id": {"open_id": message.sender_open_id, "union_id": "", "user_id": ""},
                "sender_type": "user",
                "tenant_key": tenant_key,
            },
            "message": {
                "message_id": ids.message_id,
                "root_id": "",
                "parent_id": "",
                "create_time": unix_ms.to_string(),
                "update_time": unix_ms.to_string(),
                "chat_id": message.chat_id,
                "thread_id": "",
                "chat_type": message.chat_type,
                "message_type": message_type,
                "content": content,
                "mentions": mentions,
            },
        },
    })
}

/// The headers one push carries; the client's ack must echo them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PushHeaders {
    pub(crate) message_id: String,
    pub(crate) trace_id: String,
    pub(crate) sum: u32,
}

/// One push of `payload` as `sum` data frames with seq 0..sum-1, split on byte boundaries
/// (so a part may end inside a UTF-8 sequence: the SDKs concatenate bytes, not text).
/// `reversed` sends the last part first.
pub(crate) fn push_frames(
    payload: &[u8],
    push: &PushHeaders,
    service: i32,
    reversed: bool,
) -> Vec<Vec<u8>> {
    let sum = push.sum.max(1) as usize;
    let chunk = payload.len().div_ceil(sum).max(1);
    let mut parts: Vec<Vec<u8>> = (0..sum)
        .map(|seq| {
            let start = (seq * chunk).min(payload.len());
            let end = ((seq + 1) * chunk).min(payload.len());
            let frame = Frame {
                seq_id: seq as u64,
                log_id: fastrand::u64(1..=u64::from(u32::MAX)),
                service,
                method: FrameKind::Data.method(),
                headers: vec![
                    pair(header::TYPE, message_type::EVENT),
                    pair(header::MESSAGE_ID, &push.message_id),
                    pair(header::SUM, &sum.to_string()),
                    pair(header::SEQ, &seq.to_string()),
                    pair(header::TRACE_ID, &push.trace_id),
                ],
                payload: Some(payload[start..end].to_vec()),
                ..Frame::default()
            };
            frame.encode_to_vec()
        })
        .collect();
    if reversed {
        parts.reverse();
    }
    parts
}

/// The answer to a ping: a control frame typed pong whose payload is the ClientConfig, which
/// the SDKs apply when present (`handleControlFrame` / `handleControlData`).
pub(crate) fn pong(service: i32, config: &ClientConfig) -> Vec<u8> {
    let payload = serde_json::to_vec(config).unwrap_or_default();
    Frame {
        service,
        method: FrameKind::Control.method(),
        headers: vec![pair(header::TYPE, message_type::PONG)],
        payload: Some(payload),
        ..Frame::default()
    }
    .encode_to_vec()
}

fn pair(key: &str, value: &str) -> Header {
    Header {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parts_concatenate_to_the_payload_in_seq_order() {
        let payload = "héllo wörld, 飞书".as_bytes();
        let push = PushHeaders {
            message_id: "m".into(),
            trace_id: "t".into(),
            sum: 4,
        };
        let frames: Vec<Frame> = push_frames(payload, &push, 7, true)
            .iter()
            .map(|bytes| Frame::decode(bytes.as_slice()).unwrap())
            .collect();
        assert_eq!(frames.len(), 4);
        assert_eq!(frames[0].header_u32(header::SEQ), Some(3));
        let mut sorted = frames.clone();
        sorted.sort_by_key(|f| f.header_u32(header::SEQ));
        let joined: Vec<u8> = sorted
            .iter()
            .flat_map(|f| f.payload_bytes().to_vec())
            .collect();
        assert_eq!(joined, payload);
        assert!(frames.iter().all(|f| f.header(header::SUM) == Some("4")
            && f.header(header::MESSAGE_ID) == Some("m")
            && f.service == 7
            && f.kind() == Some(FrameKind::Data)));
    }

    #[test]
    fn pong_carries_the_client_config_in_seconds() {
        let frame = Frame::decode(pong(3, &ClientConfig::default()).as_slice()).unwrap();
        assert_eq!(frame.message_type(), Some(message_type::PONG));
        let config: Value = serde_json::from_slice(frame.payload_bytes()).unwrap();
        assert_eq!(config["PingInterval"], 1);
        assert_eq!(config["ReconnectCount"], 3);
    }
}
