//! The Relay's frames, as Hermes 0.19.0 speaks them (`gateway/relay/ws_transport.py`): JSON
//! objects, each ended by a newline, in WebSocket text messages that may carry several frames
//! or part of one.

use serde::Deserialize;
use serde_json::{json, Value};

use super::address::Wire;
use crate::gateway::outbox::Route;
use crate::gateway::send::TextUnit;
use crate::platform::Message;

/// The longest frame taken. A reply is a few thousand characters; Hermes never sends media
/// inline. A longer line is a broken or hostile peer.
pub const MAX_FRAME: usize = 1024 * 1024;

/// The most lines one WebSocket message may hold. Hermes sends a frame a message; a message of
/// thousands of tiny frames is a peer making the connector work for nothing.
pub const MAX_LINES: usize = 1024;

/// The largest WebSocket message taken (the listener's limit): a few frames of [`MAX_FRAME`].
pub const MAX_MESSAGE: usize = 4 * MAX_FRAME;

/// What Hermes sends the connector.
#[derive(Debug, PartialEq)]
pub enum FromAgent {
    /// One per platform it fronts (`GATEWAY_RELAY_PLATFORMS`; `relay` by default).
    Hello { platform: String },
    /// It has taken the inbound message sent with this buffer id.
    InboundAck { buffer_id: String },
    /// An action (`send`, and others) to answer with an `outbound_result`; `platform` is the
    /// platform Hermes tagged it with (the one the chat came from, when it was not `relay`).
    Outbound {
        request_id: String,
        platform: Option<String>,
        action: Value,
    },
    /// It is stopping: deliver nothing more on this connection.
    GoingIdle,
    /// Anything else: `interrupt` (a `/stop`, which has no platform side here), and frame
    /// types newer than this connector.
    Other { kind: String },
}

/// Splits the text of WebSocket messages into frames.
#[derive(Default)]
pub struct Lines {
    partial: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame longer than {MAX_FRAME} bytes")]
    TooLong,
    #[error("a message of more than {MAX_LINES} lines")]
    TooManyLines,
}

impl Lines {
    /// The frames `text` completes, in order; a bad frame is an `Err` in its place, and the
    /// ones after it still come. Linear in `text`: the lines are found in one pass, and what
    /// they used is dropped from the front once.
    pub fn push(&mut self, text: &str) -> Result<Vec<Result<FromAgent, String>>, FrameError> {
        self.partial.push_str(text);
        let mut out = vec![];
        let mut start = 0;
        let mut lines = 0;
        while let Some(len) = self.partial[start..].find('\n') {
            lines += 1;
            if lines > MAX_LINES {
                return Err(FrameError::TooManyLines);
            }
            if len > MAX_FRAME {
                return Err(FrameError::TooLong);
            }
            let line = self.partial[start..start + len].trim();
            if !line.is_empty() {
                out.push(parse(line));
            }
            start += len + 1;
        }
        self.partial.drain(..start);
        if self.partial.len() > MAX_FRAME {
            return Err(FrameError::TooLong);
        }
        Ok(out)
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "type")]
    kind: String,
    platform: Option<String>,
    #[serde(rename = "bufferId")]
    buffer_id: Option<Value>,
    #[serde(rename = "requestId")]
    request_id: Option<Value>,
    action: Option<Value>,
}

fn parse(line: &str) -> Result<FromAgent, String> {
    let raw: Raw = serde_json::from_str(line).map_err(|e| format!("not a frame: {e}"))?;
    let text = |v: Option<Value>, what: &str| match v {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(format!("{} frame without {what}", raw.kind)),
    };
    Ok(match raw.kind.as_str() {
        "hello" => FromAgent::Hello {
            platform: raw
                .platform
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "relay".into()),
        },
        "inbound_ack" => FromAgent::InboundAck {
            buffer_id: text(raw.buffer_id, "bufferId")?,
        },
        "outbound" => FromAgent::Outbound {
            request_id: text(raw.request_id, "requestId")?,
            platform: raw.platform.filter(|p| !p.is_empty() && p.len() <= 64),
            action: raw.action.unwrap_or(Value::Null),
        },
        "going_idle" => FromAgent::GoingIdle,
        other => FromAgent::Other {
            kind: other.chars().take(40).collect(),
        },
    })
}

/// What the connector declares about the platform it fronts, in reply to `hello`. Hermes
/// requires all nine fields: one missing crashes its reader, which then re-dials every second.
pub struct Descriptor<'a> {
    pub platform: &'a str,
    pub label: &'a str,
    pub max_message_length: usize,
    /// `chars` or `utf16`.
    pub len_unit: &'a str,
}

impl Descriptor<'_> {
    pub fn frame(&self) -> String {
        line(&json!({
            "type": "descriptor",
            "descriptor": {
                "contract_version": 1,
                "platform": self.platform,
                "label": self.label,
                "max_message_length": self.max_message_length,
                // Streaming edits a message as it grows, and Hermes then resends the whole
                // text: off. Edits and threads are not offered to the agent.
                "supports_draft_streaming": false,
                "supports_edit": false,
                "supports_threads": false,
                "markdown_dialect": "plain",
                "len_unit": self.len_unit,
                "emoji": "\u{1f50c}",
                "platform_hint": "",
                "pii_safe": false,
                "supports_context": false,
            }
        }))
    }
}

/// The descriptor for `platform`, given the `routes` of the gateway's adapters: the limits of
/// its adapters when Hermes names a kind this gateway has, else the tightest of all (the same
/// for every chat on one connection).
pub fn descriptor(routes: &[Route], label: &str, platform: &str) -> String {
    let named: Vec<_> = routes.iter().filter(|r| r.kind == platform).collect();
    let chosen: Vec<_> = if named.is_empty() {
        routes.iter().collect()
    } else {
        named
    };
    let max = chosen.iter().map(|r| r.max_piece).min().unwrap_or(4096);
    let unit = if chosen.iter().any(|r| r.unit == TextUnit::Utf16) {
        "utf16"
    } else {
        "chars"
    };
    Descriptor {
        platform,
        label,
        max_message_length: max,
        len_unit: unit,
    }
    .frame()
}

/// An `inbound` frame for a normalised message: `source` is Hermes's `SessionSource` on the
/// wire, the chat named as `wire` says (`relay/address.rs`).
pub fn inbound(m: &Message, wire: &Wire, buffer_id: &str) -> String {
    let media_urls: Vec<&str> = m
        .said
        .media
        .iter()
        .filter_map(|x| x.url.as_deref())
        .collect();
    line(&json!({
        "type": "inbound",
        "bufferId": buffer_id,
        "event": {
            "text": m.said.text,
            "message_type": m.said.message_type.as_str(),
            "message_id": m.said.message_id,
            "reply_to_message_id": m.said.reply_to_message_id,
            "media_urls": media_urls,
            "source": {
                "platform": wire.platform,
                "chat_id": wire.chat_id,
                "chat_type": wire.chat_type,
                "chat_name": m.said.chat.name,
                "user_id": wire.user_id,
                "user_id_alt": wire.user_id_alt,
                "user_name": m.said.sender.name,
                "thread_id": wire.thread_id,
                "message_id": m.said.message_id,
            }
        }
    }))
}

/// The answer to an `outbound`.
pub fn outbound_result(request_id: &str, result: &Value) -> String {
    line(&json!({"type": "outbound_result", "requestId": request_id, "result": result}))
}

pub fn going_idle_ack() -> String {
    line(&json!({"type": "going_idle_ack"}))
}

fn line(v: &Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_joined_across_messages() {
        let mut lines = Lines::default();
        let two = "{\"type\":\"hello\",\"platform\":\"relay\",\"botId\":\"\"}\n{\"type\":\"inbound_ack\",\"buff";
        let got = lines.push(two).unwrap();
        assert_eq!(
            got,
            vec![Ok(FromAgent::Hello {
                platform: "relay".into()
            })]
        );
        let got = lines.push("erId\":\"c1\"}\n\n").unwrap();
        assert_eq!(
            got,
            vec![Ok(FromAgent::InboundAck {
                buffer_id: "c1".into()
            })]
        );
        let got = lines
            .push("{\"type\":\"outbound\",\"requestId\":\"r1\",\"action\":{\"op\":\"send\"}}\nnot json\n{\"type\":\"interrupt\"}\n")
            .unwrap();
        assert_eq!(got.len(), 3);
        assert!(
            matches!(&got[0], Ok(FromAgent::Outbound { request_id, .. }) if request_id == "r1")
        );
        assert!(got[1].is_err());
        assert_eq!(
            got[2],
            Ok(FromAgent::Other {
                kind: "interrupt".into()
            })
        );
        assert!(lines.push("{\"type\":\"inbound_ack\"}\n").unwrap()[0].is_err());
    }

    #[test]
    fn a_message_of_too_many_lines_or_too_long_a_line_is_refused() {
        let mut lines = Lines::default();
        let many = "{}\n".repeat(MAX_LINES + 1);
        assert_eq!(lines.push(&many).unwrap_err(), FrameError::TooManyLines);
        // The most lines a message may hold, each a whole frame: all read.
        let mut lines = Lines::default();
        let ack = "{\"type\":\"inbound_ack\",\"bufferId\":\"c1\"}\n";
        assert_eq!(lines.push(&ack.repeat(MAX_LINES)).unwrap().len(), MAX_LINES);
        let mut lines = Lines::default();
        assert_eq!(
            lines
                .push(&format!("{}\n", "x".repeat(MAX_FRAME + 1)))
                .unwrap_err(),
            FrameError::TooLong
        );
    }

    #[test]
    fn a_line_without_end_is_refused_past_the_limit() {
        let mut lines = Lines::default();
        assert!(lines.push(&"x".repeat(MAX_FRAME)).unwrap().is_empty());
        assert_eq!(lines.push("xx").unwrap_err(), FrameError::TooLong);
    }

    #[test]
    fn the_descriptor_has_every_field_hermes_requires() {
        let frame = Descriptor {
            platform: "relay",
            label: "x",
            max_message_length: 2000,
            len_unit: "chars",
        }
        .frame();
        assert!(frame.ends_with('\n'));
        let v: Value = serde_json::from_str(&frame).unwrap();
        for key in [
            "contract_version",
            "platform",
            "label",
            "max_message_length",
            "supports_draft_streaming",
            "supports_edit",
            "supports_threads",
            "markdown_dialect",
            "len_unit",
        ] {
            assert!(!v["descriptor"][key].is_null(), "{key}");
        }
    }
}
