//! One Stream connection, from the upgrade to its end. Frames are JSON text:
//! `{specVersion, type: SYSTEM|EVENT|CALLBACK, headers: {topic, messageId, contentType, time,
//! …}, data: "<JSON as a string>"}` (dingtalk-stream-sdk-python `frames.py`).
//!
//! - SYSTEM `ping`: answered at once with its `messageId`, `code 200` and its `data` echoed
//!   (`handlers.py` `SystemHandler`). The server's cadence is its own, so it is not the probe.
//! - SYSTEM `disconnect`: the server is about to move the connection (it closes it about
//!   10 s later). The chain is told to open the next one, and this one goes on reading,
//!   storing and acknowledging whatever still comes on it until it is stopped for its
//!   successor or the server closes it (then it ends as [`End::Disconnect`], a planned end).
//! - CALLBACK `/v1.0/im/bot/messages/get`: the robot message is appended to the spool under
//!   its `msgId` (the same on a redelivery, which may come with a new `messageId`: the spool
//!   drops the repeat), and only then acknowledged with the frame's `messageId`. A crash in
//!   between means a redelivery, never a loss; DingTalk's docs say a robot message is not
//!   pushed again, the SDKs' comments and field reports that it is, once, after about a
//!   minute: either way nothing is acknowledged that is not stored. Other topics are
//!   acknowledged and not stored.
//!
//! The probe is the client's WebSocket ping under a deadline (the shared `frame_loop`,
//! strict, as Slack's and Feishu's): a half-open socket is dropped within the ping interval
//! plus the answer deadline; a FIN is a closed connection at once.
//!
//! Up is the upgrade (the server took the ticket) and then the first frame the server sends:
//! the answer to the ping sent at once, or any frame before it. The protocol has no `hello`,
//! and the SDKs take the upgrade alone (the Java SDK's "connection is established"); the
//! first frame also proves the path back, so a successor that cannot read takes no one over.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use super::open::ROBOT_TOPIC;
use crate::config::Timing;
use crate::gateway::adapter::chain::{LinkEnd, Signals};
use crate::gateway::adapter::connect;
use crate::gateway::adapter::frame_loop::{Ended, Frames, Step, Wire};
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::liveness::{self, Liveness, Zombie};
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::fence::Fence;
use crate::gateway::grid::Grid;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::{Event, Spool};
use crate::platform::dingtalk::normalise::KIND;

pub(super) struct Session<'a> {
    pub(super) adapter: &'a str,
    /// Holds the connection's ticket: never logged.
    pub(super) url: String,
    /// Tells the chain that the connection is up, and that the server moves it.
    pub(super) signals: Signals,
    /// Opened beside a live connection the server is moving: the adapter is connected
    /// meanwhile, and is not said to be connecting.
    pub(super) successor: bool,
    pub(super) ping_interval: Duration,
    pub(super) timing: &'a Timing,
    pub(super) heartbeat: &'a Heartbeat,
    pub(super) spool: &'a Spool,
    pub(super) proxies: &'a ProxyEnv,
    pub(super) fence: &'a Fence,
    pub(super) grid: &'a Grid,
}

#[derive(Debug, PartialEq)]
pub(super) enum End {
    Shutdown,
    Failed(String),
    Zombie(Zombie),
    Closed(Option<u16>),
    /// Closed after a SYSTEM `disconnect`: the server moved the connection.
    Disconnect,
    /// `connections/open` refused the credentials in a way no retry helps: the fix.
    Refused(String),
    /// The spool could not store an event: nothing more may be acknowledged.
    Spool(String),
}

impl LinkEnd for End {
    fn shutdown() -> Self {
        End::Shutdown
    }

    fn is_shutdown(&self) -> bool {
        *self == End::Shutdown
    }

    fn refused(fix: String) -> Self {
        End::Refused(fix)
    }

    fn failed(why: String) -> Self {
        End::Failed(why)
    }
}

pub(super) type Outcome = crate::gateway::adapter::chain::Outcome<End>;

impl From<Ended> for End {
    fn from(ended: Ended) -> End {
        match ended {
            Ended::Shutdown => End::Shutdown,
            Ended::Closed(code) => End::Closed(code),
            Ended::Zombie(z) => End::Zombie(z),
            Ended::Fenced => End::Failed("fenced: the cluster's lease may be gone".into()),
        }
    }
}

struct Live<'a> {
    s: &'a Session<'a>,
    inbox: Inbox<'a>,
    /// The server sent a first frame: the chain was told the connection is up.
    up: bool,
    /// The server said `disconnect`: the chain was told (once is enough).
    moving: bool,
}

impl Session<'_> {
    pub(super) async fn run(&self, shutdown: &mut watch::Receiver<bool>) -> Outcome {
        let failed = Outcome::ended;
        if !self.successor {
            self.heartbeat.enter(State::Connecting);
            self.heartbeat.attempt();
        }
        let ack = self
            .timing
            .ack_timeout
            .unwrap_or_else(|| liveness::default_ack_timeout(self.ping_interval));
        let connect = connect::connect(&self.url, None, self.proxies, self.timing.connect_timeout, ack * 2);
        let ws = tokio::select! {
            r = connect => match r {
                Ok(ws) => ws,
                // The error names no URL, so the ticket stays out of it.
                Err(e) => return failed(End::Failed(e.to_string())),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return failed(End::Shutdown),
        };
        let since = Instant::now();
        // A ping at once: the first pong proves the connection.
        let live = Liveness::new(since, self.ping_interval, ack, 0.0, false, true).strict();
        let mut wire = Wire::new(self.adapter, ws, live, self.fence, self.grid);
        let inbox = Inbox::new(self.adapter, self.spool, None);
        let mut conn = Live { s: self, inbox, up: false, moving: false };
        self.heartbeat.set_deadline(wire.live.liveness_deadline());
        self.heartbeat.enter(State::Connected);
        tracing::info!(adapter = %self.adapter, successor = self.successor, "dingtalk stream connection up");
        let end = match wire.drive(&mut conn, shutdown).await {
            End::Closed(_) if conn.moving => End::Disconnect,
            end => end,
        };
        let (_, stored) = conn.inbox.finish();
        Outcome { end, connected_for: Some(since.elapsed()), stored }
    }
}

impl Frames for Live<'_> {
    type End = End;

    fn probe(&self) -> Message {
        Message::Ping(Bytes::from_static(b"hermes-svc"))
    }

    async fn on_message(&mut self, wire: &mut Wire<'_>, msg: Message) -> Step<End> {
        if !std::mem::replace(&mut self.up, true) {
            self.s.signals.up();
        }
        let Some(text) = wire.text_of(msg, self.s.heartbeat) else {
            return Step::Continue;
        };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let headers = &v["headers"];
        let topic = headers["topic"].as_str().unwrap_or("");
        let Some(message_id) = headers["messageId"].as_str().filter(|m| !m.is_empty()) else {
            tracing::debug!(adapter = %self.s.adapter, "ignoring a frame without a messageId");
            return Step::Continue;
        };
        let data = v["data"].as_str().unwrap_or("");
        match (v["type"].as_str().unwrap_or(""), topic) {
            ("SYSTEM", "disconnect") => {
                if !std::mem::replace(&mut self.moving, true) {
                    let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                    let reason = v["reason"].as_str().unwrap_or("unknown");
                    tracing::info!(adapter = %self.s.adapter, "dingtalk asked for a new connection");
                    self.s.signals.refresh(reason);
                }
                // Not answered, as the Java SDK does not; the connection goes on.
                return Step::Continue;
            }
            ("SYSTEM", _) => {
                // `ping`, and whatever else the server says: answered as the SDKs answer it.
                self.s.heartbeat.beat();
                return self.answer(wire, message_id, data.to_owned()).await;
            }
            ("CALLBACK", ROBOT_TOPIC) => {
                self.s.heartbeat.beat();
                let event = event(self.s.adapter, message_id, data);
                if let Err(e) = self.inbox.append(&event).await {
                    return Step::End(End::Spool(e));
                }
                crate::test_hook::kill_at("dingtalk-stored", &event.id);
            }
            _ => {}
        }
        // The SDKs' chatbot handler answers `{"response": null}` as its data.
        self.answer(wire, message_id, json!({"response": null}).to_string()).await
    }
}

impl Live<'_> {
    /// The acknowledgement of frame `message_id`: `code 200` with `data`.
    async fn answer(&self, wire: &mut Wire<'_>, message_id: &str, data: String) -> Step<End> {
        let ack = json!({
            "code": 200,
            "headers": {"messageId": message_id, "contentType": "application/json"},
            "message": "OK",
            "data": data,
        });
        match wire.send(Message::text(ack.to_string())).await {
            Ok(()) => Step::Continue,
            Err(end) => Step::End(end.into()),
        }
    }
}

/// The spool's record of a robot message: named by its `msgId` (kept across redeliveries;
/// the frame's `messageId` stands in when it has none), of kind [`KIND`], holding the
/// message as DingTalk sent it.
fn event(adapter: &str, message_id: &str, data: &str) -> Event {
    let data: Value =
        serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned()));
    let id = data["msgId"]
        .as_str()
        .filter(|m| !m.is_empty() && m.len() <= 256)
        .unwrap_or(message_id)
        .to_owned();
    Event::new(id, adapter, KIND.to_owned(), None, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_robot_message_is_named_by_its_msg_id() {
        let e = event("dt", "frame-1", r#"{"msgId":"msgA","text":{"content":"hi"}}"#);
        assert_eq!((e.id.as_str(), e.kind.as_str()), ("msgA", KIND));
        assert_eq!(e.data["text"]["content"], "hi");
        let odd = event("dt", "frame-2", "not json");
        assert_eq!((odd.id.as_str(), odd.data.as_str()), ("frame-2", Some("not json")));
    }
}
