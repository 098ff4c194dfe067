//! What a WebSocket adapter's server speaks, and the frames of each dialect, read and written
//! without side effects: the connection (`session.rs`) carries out what a frame means.
//!
//! The op-code dialect, spoken by more than one platform: Hello, Identify or Resume, heartbeats with
//! the last seq and their ACKs, dispatches. A plain WebSocket has no handshake: any text
//! frame is an event, and answers the app-level ping.

use std::time::Duration;

use serde_json::{json, Value};

use super::inbox::ResumeState;
use super::opcode::OpCode;
use super::whoami::BotId;

/// What the server speaks.
#[derive(Clone, Debug)]
pub(crate) enum Dialect {
    /// The op-code gateway protocol.
    Gateway(Gateway),
    /// A plain WebSocket: no handshake, liveness by WS ping and an optional app-level ping.
    Plain {
        ping_interval: Duration,
        app_ping: Option<String>,
    },
}

/// What a session of the op-code dialect is opened with.
#[derive(Clone, Debug)]
pub(crate) struct Gateway {
    /// What Identify and Resume carry.
    pub(crate) token: String,
    pub(crate) intents: u64,
    pub(crate) shard: Option<[u32; 2]>,
    pub(crate) properties: Value,
    /// Whether WebSocket pings probe the socket besides the heartbeat.
    pub(crate) ws_ping: bool,
}

/// What Identify says about the client.
pub(crate) fn properties() -> Value {
    json!({"os": std::env::consts::OS, "browser": "hermes-svc", "device": "hermes-svc"})
}

/// What a text frame of the op-code dialect means.
#[derive(Debug, PartialEq)]
pub(super) enum GatewayFrame {
    /// op 11: a heartbeat was received.
    Ack,
    /// op 1 from the server: send a heartbeat now.
    HeartbeatRequest,
    /// op 7: reconnect and resume.
    Reconnect,
    /// op 9: `resumable` says whether a resume may still work.
    InvalidSession { resumable: bool },
    /// A new session: what a resume needs, and who the bot is when READY says (its `user`:
    /// the connection's own account, which tells a mention of the bot from anyone else's).
    Ready {
        resume: ResumeState,
        bot: Option<BotId>,
    },
    /// The session resumed, at `seq` if the server says.
    Resumed { seq: Option<u64> },
    Dispatch {
        id: Option<String>,
        kind: String,
        seq: Option<u64>,
        data: Value,
    },
    /// Any other opcode, or none: proof of life, nothing more.
    Other,
}

/// Read a text frame of the op-code dialect; `None` when it is not JSON.
pub(super) fn read_gateway(text: &str) -> Option<GatewayFrame> {
    // Most frames are ACKs: read only the opcode before building a tree.
    if let Ok(OpOnly { op: Some(op) }) = serde_json::from_str::<OpOnly>(text) {
        if OpCode::from_u64(op) == Some(OpCode::HeartbeatAck) {
            return Some(GatewayFrame::Ack);
        }
    }
    let mut v: Value = serde_json::from_str(text).ok()?;
    let frame = match v["op"].as_u64().and_then(OpCode::from_u64) {
        Some(OpCode::HeartbeatAck) => GatewayFrame::Ack,
        Some(OpCode::Heartbeat) => GatewayFrame::HeartbeatRequest,
        Some(OpCode::Reconnect) => GatewayFrame::Reconnect,
        Some(OpCode::InvalidSession) => GatewayFrame::InvalidSession {
            resumable: v["d"].as_bool().unwrap_or(false),
        },
        Some(OpCode::Dispatch) => {
            let seq = v["s"].as_u64();
            match v["t"].as_str().unwrap_or("") {
                "READY" => {
                    let d = &v["d"];
                    GatewayFrame::Ready {
                        resume: ResumeState {
                            session_id: d["session_id"].as_str().unwrap_or_default().to_owned(),
                            seq: seq.unwrap_or(0),
                            resume_url: d["resume_gateway_url"].as_str().map(str::to_owned),
                        },
                        bot: ready_user(&d["user"]),
                    }
                }
                "RESUMED" => GatewayFrame::Resumed { seq },
                kind => GatewayFrame::Dispatch {
                    kind: kind.to_owned(),
                    // Some platforms put an event id on every dispatch. Others do not, and
                    // their `d.id` names the message, shared by its CREATE, UPDATE and DELETE;
                    // session and seq identify the dispatch itself, which is what a replay
                    // after a resume repeats.
                    id: v.get("id").and_then(id_string),
                    seq,
                    data: v.get_mut("d").map_or(Value::Null, Value::take),
                },
            }
        }
        _ => GatewayFrame::Other,
    };
    Some(frame)
}

/// READY's `user`, the account the connection is: its `id` and `username`. Nothing when it
/// has no id, since a name alone tells no mention apart.
fn ready_user(user: &Value) -> Option<BotId> {
    let id = user.get("id").and_then(id_string)?;
    Some(BotId {
        id: Some(id),
        handle: user["username"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

/// The heartbeat interval a Hello frame (op 10) carries: `None` for any other frame, `Some(0)`
/// for a Hello without one.
pub(super) fn read_hello(text: &str) -> Option<u64> {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    (v["op"].as_u64().and_then(OpCode::from_u64) == Some(OpCode::Hello))
        .then(|| v["d"]["heartbeat_interval"].as_u64().unwrap_or(0))
}

/// The first frame after Hello, as text.
pub(super) enum Handshake {
    Identify(String),
    Resume(String),
}

/// Identify, or Resume when there is a session to resume.
pub(super) fn handshake(gateway: &Gateway, resume: Option<&ResumeState>) -> Handshake {
    let Gateway {
        token,
        intents,
        shard,
        properties,
        ..
    } = gateway;
    match resume {
        Some(r) => Handshake::Resume(
            json!({"op": OpCode::Resume.code(), "d": {"token": token, "session_id": r.session_id, "seq": r.seq}})
                .to_string(),
        ),
        None => {
            let mut d = json!({"token": token, "intents": intents, "properties": properties});
            if let Some(shard) = shard {
                d["shard"] = json!(shard);
            }
            Handshake::Identify(json!({"op": OpCode::Identify.code(), "d": d}).to_string())
        }
    }
}

/// A heartbeat (op 1) with the last seq stored, or null before the first dispatch.
pub(super) fn heartbeat_frame(resume: Option<&ResumeState>) -> String {
    let op = OpCode::Heartbeat.code();
    match resume {
        Some(r) => format!("{{\"op\":{op},\"d\":{}}}", r.seq),
        None => format!("{{\"op\":{op},\"d\":null}}"),
    }
}

/// A plain WebSocket's event id: its `id`, or else its `event_id`.
pub(super) fn plain_event_id(value: &Value) -> Option<String> {
    value
        .get("id")
        .or_else(|| value.get("event_id"))
        .and_then(id_string)
}

/// Just the opcode of a gateway frame; everything else is skipped without allocating.
#[derive(serde::Deserialize)]
struct OpOnly {
    op: Option<u64>,
}

fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_the_op_code_dialect_read_as_what_they_mean() {
        assert_eq!(read_gateway(r#"{"op":11}"#), Some(GatewayFrame::Ack));
        assert_eq!(
            read_gateway(r#"{"op":1,"d":5}"#),
            Some(GatewayFrame::HeartbeatRequest)
        );
        assert_eq!(read_gateway(r#"{"op":7}"#), Some(GatewayFrame::Reconnect));
        assert_eq!(
            read_gateway(r#"{"op":9,"d":true}"#),
            Some(GatewayFrame::InvalidSession { resumable: true })
        );
        assert_eq!(
            read_gateway(r#"{"op":9}"#),
            Some(GatewayFrame::InvalidSession { resumable: false })
        );
        assert_eq!(
            read_gateway(
                r#"{"op":0,"s":1,"t":"READY","d":{"session_id":"s","resume_gateway_url":"wss://r"}}"#
            ),
            Some(GatewayFrame::Ready {
                resume: ResumeState {
                    session_id: "s".into(),
                    seq: 1,
                    resume_url: Some("wss://r".into()),
                },
                bot: None,
            })
        );
        assert_eq!(
            read_gateway(r#"{"op":0,"t":"RESUMED"}"#),
            Some(GatewayFrame::Resumed { seq: None })
        );
        assert_eq!(
            read_gateway(r#"{"op":0,"s":7,"t":"AT_MESSAGE_CREATE","id":"e1","d":{"x":1}}"#),
            Some(GatewayFrame::Dispatch {
                id: Some("e1".into()),
                kind: "AT_MESSAGE_CREATE".into(),
                seq: Some(7),
                data: json!({"x": 1}),
            })
        );
        for other in [r#"{"op":12}"#, r#"{"op":10,"d":{}}"#, r#"{"d":1}"#, "[]"] {
            assert_eq!(read_gateway(other), Some(GatewayFrame::Other), "{other}");
        }
        assert_eq!(read_gateway("not json"), None);
    }

    #[test]
    fn ready_names_the_bot_by_its_user() {
        // Discord's READY (gateway events, "Ready") and QQ's (接入方法, "Ready Event").
        let discord = r#"{"op":0,"s":1,"t":"READY","d":{"v":10,"session_id":"s",
            "user":{"id":"1100000000000000001","username":"hermes","discriminator":"0","bot":true}}}"#;
        let qq = r#"{"op":0,"s":1,"t":"READY","d":{"version":1,"session_id":"s",
            "user":{"id":"6158788878435714165","username":"群pro测试机器人","bot":true},"shard":[0,0]}}"#;
        for (text, id, name) in [
            (discord, "1100000000000000001", "hermes"),
            (qq, "6158788878435714165", "群pro测试机器人"),
        ] {
            let Some(GatewayFrame::Ready { bot, .. }) = read_gateway(text) else {
                panic!("{text}");
            };
            let want = BotId {
                id: Some(id.into()),
                handle: Some(name.into()),
            };
            assert_eq!(bot, Some(want));
        }
        let nameless = r#"{"op":0,"t":"READY","d":{"session_id":"s","user":{"username":"x"}}}"#;
        assert!(matches!(
            read_gateway(nameless),
            Some(GatewayFrame::Ready { bot: None, .. })
        ));
    }

    #[test]
    fn hello_carries_the_interval_and_heartbeats_the_last_seq() {
        assert_eq!(
            read_hello(r#"{"op":10,"d":{"heartbeat_interval":41250}}"#),
            Some(41250)
        );
        assert_eq!(read_hello(r#"{"op":10,"d":{}}"#), Some(0));
        assert_eq!(read_hello(r#"{"op":11}"#), None);
        assert_eq!(read_hello("nope"), None);
        assert_eq!(heartbeat_frame(None), r#"{"op":1,"d":null}"#);
        let r = ResumeState {
            session_id: "s".into(),
            seq: 42,
            resume_url: None,
        };
        assert_eq!(heartbeat_frame(Some(&r)), r#"{"op":1,"d":42}"#);
    }
}
