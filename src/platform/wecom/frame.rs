//! The long connection's frames, as the official SDK writes and reads them
//! (`@wecom/aibot-node-sdk` 1.0.7, `WsCmd` and `WsConnectionManager.handleFrame`): every frame
//! is a JSON text frame `{cmd, headers: {req_id}, body}`; the server's answer to a command has
//! no `cmd`, the command's `req_id`, and `errcode`/`errmsg`.
//!
//! What the server sends is hostile input: a frame that does not read as one of these is
//! [`Inbound::Other`], never an error, and nothing here panics on it.

use serde_json::{json, Value};

pub(super) const SUBSCRIBE: &str = "aibot_subscribe";
pub(super) const PING: &str = "ping";
pub(super) const CALLBACK: &str = "aibot_msg_callback";
pub(super) const EVENT_CALLBACK: &str = "aibot_event_callback";
pub(super) const RESPOND: &str = "aibot_respond_msg";
pub(super) const SEND: &str = "aibot_send_msg";
/// The event the server sends an old connection when a new one subscribed the same bot.
pub(super) const KICKED: &str = "disconnected_event";

/// The longest `req_id` taken from the server (the SDK's are under 60 characters); a longer
/// one is no request of ours and names no callback worth answering.
const MAX_REQ_ID: usize = 256;

/// A fresh request id, shaped as the SDK's `generateReqId`: `{prefix}_{ms}_{random}`.
pub(super) fn req_id(prefix: &str) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}_{ms}_{:08x}", fastrand::u32(..))
}

fn command(cmd: &str, req_id: &str, body: Option<Value>) -> String {
    let mut frame = json!({"cmd": cmd, "headers": {"req_id": req_id}});
    if let Some(body) = body {
        frame["body"] = body;
    }
    frame.to_string()
}

/// `aibot_subscribe` with the bot's id and secret: the frame holds the secret, so it is
/// never logged.
pub(super) fn subscribe(req_id: &str, bot_id: &str, secret: &str) -> String {
    command(
        SUBSCRIBE,
        req_id,
        Some(json!({"bot_id": bot_id, "secret": secret})),
    )
}

/// The application-level ping, answered by the server with `errcode` 0.
pub(super) fn ping(req_id: &str) -> String {
    command(PING, req_id, None)
}

/// An answer to callback `req_id` as one finished stream message: the stream's `id` names
/// the message, and a second reply with the same id refreshes that message rather than
/// posting another, so a repeat after a lost answer posts nothing new.
pub(super) fn respond(req_id: &str, stream_id: &str, content: &str) -> String {
    let body = json!({
        "msgtype": "stream",
        "stream": {"id": stream_id, "finish": true, "content": content},
    });
    command(RESPOND, req_id, Some(body))
}

/// A message the bot starts in `chatid` (`aibot_send_msg`, markdown).
pub(super) fn send(req_id: &str, chatid: &str, content: &str) -> String {
    let body = json!({"chatid": chatid, "msgtype": "markdown", "markdown": {"content": content}});
    command(SEND, req_id, Some(body))
}

/// The `req_id` a frame of ours was written with, to match the server's answer to it.
pub(super) fn own_req_id(text: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text).ok()?;
    v["headers"]["req_id"].as_str().map(str::to_owned)
}

/// One frame from the server, read.
#[derive(Debug, PartialEq)]
pub(super) enum Inbound {
    /// A message callback (`aibot_msg_callback`, or the older `aibot_callback`).
    Message { req_id: String, body: Value },
    /// An event callback other than the kick.
    Event {
        req_id: String,
        eventtype: String,
        body: Value,
    },
    /// `disconnected_event`: another connection subscribed this bot.
    Kicked,
    /// The answer to one of our commands.
    Answer {
        req_id: String,
        errcode: i64,
        errmsg: String,
    },
    Other,
}

pub(super) fn read(text: &str) -> Inbound {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Inbound::Other;
    };
    let req_id = v["headers"]["req_id"]
        .as_str()
        .filter(|r| !r.is_empty() && r.len() <= MAX_REQ_ID)
        .map(str::to_owned);
    let body = &v["body"];
    match (v["cmd"].as_str(), req_id) {
        (Some(CALLBACK | "aibot_callback"), Some(req_id)) if body.is_object() => Inbound::Message {
            req_id,
            body: body.clone(),
        },
        (Some(EVENT_CALLBACK), req_id) if body.is_object() => {
            let eventtype = body["event"]["eventtype"].as_str().unwrap_or("event");
            match req_id {
                _ if eventtype == KICKED => Inbound::Kicked,
                Some(req_id) => Inbound::Event {
                    req_id,
                    eventtype: eventtype.to_owned(),
                    body: body.clone(),
                },
                None => Inbound::Other,
            }
        }
        (None, Some(req_id)) => Inbound::Answer {
            req_id,
            // The SDK takes anything but a 0 for a failure; so does this.
            errcode: v["errcode"].as_i64().unwrap_or(-1),
            errmsg: v["errmsg"].as_str().unwrap_or("").chars().take(200).collect(),
        },
        _ => Inbound::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_as_the_sdk_reads_them() {
        let cb = r#"{"cmd":"aibot_msg_callback","headers":{"req_id":"r1"},"body":{"msgid":"m"}}"#;
        assert!(matches!(read(cb), Inbound::Message { req_id, .. } if req_id == "r1"));
        let kick = r#"{"cmd":"aibot_event_callback","headers":{"req_id":"r2"},
            "body":{"msgtype":"event","event":{"eventtype":"disconnected_event"}}}"#;
        assert_eq!(read(kick), Inbound::Kicked);
        let enter = r#"{"cmd":"aibot_event_callback","headers":{"req_id":"r3"},
            "body":{"event":{"eventtype":"enter_chat"}}}"#;
        assert!(matches!(read(enter), Inbound::Event { eventtype, .. } if eventtype == "enter_chat"));
        let ok = r#"{"headers":{"req_id":"ping_1"},"errcode":0,"errmsg":"ok"}"#;
        assert!(matches!(read(ok), Inbound::Answer { errcode: 0, .. }));
        let no_code = r#"{"headers":{"req_id":"ping_1"}}"#;
        assert!(matches!(read(no_code), Inbound::Answer { errcode: -1, .. }));
        for junk in ["", "[]", "null", r#"{"cmd":"aibot_msg_callback","body":{}}"#, r#"{"cmd":"aibot_msg_callback","headers":{"req_id":"r"},"body":"x"}"#] {
            assert_eq!(read(junk), Inbound::Other, "{junk}");
        }
        let long = format!(r#"{{"headers":{{"req_id":"{}"}},"errcode":0}}"#, "r".repeat(300));
        assert_eq!(read(&long), Inbound::Other);
    }

    #[test]
    fn commands_carry_their_req_id() {
        let f = respond("cb1", "s1", "hi");
        assert_eq!(own_req_id(&f).as_deref(), Some("cb1"));
        let v: Value = serde_json::from_str(&f).unwrap();
        assert_eq!(v["cmd"], RESPOND);
        assert_eq!(v["body"]["stream"]["id"], "s1");
        assert_eq!(v["body"]["stream"]["finish"], true);
        assert!(req_id(PING).starts_with("ping_"));
    }
}
