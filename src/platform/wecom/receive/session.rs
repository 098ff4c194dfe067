//! One long connection, from the upgrade to its end: `aibot_subscribe` and its answer, the
//! application-level `ping` with an answer deadline, callbacks into the spool, the sender's
//! commands written and matched with their answers, and every way it ends.
//!
//! WeCom has no acknowledgement of a callback: the reply is the only word back, and it is
//! the agent's, long after the event is stored. What the spool guarantees here is that a
//! callback is stored (under its `msgid`, which the docs call "the callback's unique mark,
//! for deduplication") before anything else is done with it, so a callback WeCom delivers
//! again (after a crash, or on a new connection) is stored once.
//!
//! Liveness is the runtime's tracker, strict: the server answers a ping at once, so one ping
//! without an `errcode` 0 answer past its deadline (after draining whatever was readable) is
//! a dead connection, even while callbacks still arrive. A half-open socket is dropped within
//! the ping interval plus the answer deadline; the official SDK waits for two missed pings
//! (69–81 s at its defaults), Hermes's adapter for none.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::Message;

use super::super::frame::{self, Inbound};
use crate::config::{Secret, Timing};
use crate::gateway::adapter::connect::{self, Socket};
use crate::gateway::adapter::frame_loop::{Ended, Frames, Step, Wire};
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::liveness::{self, Liveness, Zombie};
use crate::gateway::adapter::outlet::{self, Outlet, Taken};
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::fence::Fence;
use crate::gateway::grid::Grid;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::{Event, Spool};

/// How long a command of the sender's waits for its answer before the send counts as
/// unanswered (its message is then unknown, and retried where a repeat posts nothing new).
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// What a failed command's answer says to the sender: `errcode=N: errmsg`.
pub(in crate::platform::wecom) const ERRCODE: &str = "errcode=";

/// One connection attempt's inputs.
pub(super) struct Session<'a> {
    pub(super) adapter: &'a str,
    pub(super) url: &'a str,
    pub(super) bot_id: &'a Secret,
    pub(super) secret: &'a Secret,
    pub(super) ping_interval: Duration,
    pub(super) timing: &'a Timing,
    pub(super) heartbeat: &'a Heartbeat,
    pub(super) spool: &'a Spool,
    pub(super) proxies: &'a ProxyEnv,
    pub(super) fence: &'a Fence,
    pub(super) grid: &'a Grid,
    /// The sender's way into this connection.
    pub(super) outlet: &'a Outlet,
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub(super) enum End {
    Shutdown,
    /// Could not connect, or no answer to the subscription in time.
    Failed(String),
    /// The subscription was answered with a non-zero `errcode`.
    Refused { errcode: i64, errmsg: String },
    Zombie(Zombie),
    Closed(Option<u16>),
    /// `disconnected_event`: another connection took the bot.
    Kicked,
    /// The spool could not store a callback.
    Spool(String),
}

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

/// A connection's result, for the transport.
pub(super) struct Outcome {
    pub(super) end: End,
    /// How long it was up, once the subscription was answered.
    pub(super) connected_for: Option<Duration>,
    pub(super) stored: u64,
}

impl Outcome {
    fn ended(end: End) -> Outcome {
        Outcome {
            end,
            connected_for: None,
            stored: 0,
        }
    }
}

impl Session<'_> {
    pub(super) async fn run(&self, shutdown: &mut watch::Receiver<bool>) -> Outcome {
        self.heartbeat.enter(State::Connecting);
        self.heartbeat.attempt();
        let ack = self
            .timing
            .ack_timeout
            .unwrap_or_else(|| liveness::default_ack_timeout(self.ping_interval));
        let connect = connect::connect(self.url, None, self.proxies, self.timing.connect_timeout, ack * 2);
        let mut ws = tokio::select! {
            r = connect => match r {
                Ok(ws) => ws,
                Err(e) => return Outcome::ended(End::Failed(e.to_string())),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return Outcome::ended(End::Shutdown),
        };
        // Connected is the subscription's answer, not the upgrade.
        match timeout(self.timing.hello_timeout, self.subscribe(&mut ws)).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return Outcome::ended(end),
            Err(_) => {
                let m = format!("no answer to aibot_subscribe within {:?}", self.timing.hello_timeout);
                return Outcome::ended(End::Failed(m));
            }
        }
        let since = Instant::now();
        let live = Liveness::new(since, self.ping_interval, ack, 0.0, false, true).strict();
        let mut wire = Wire::new(self.adapter, ws, live, self.fence, self.grid);
        let mut conn = Live {
            s: self,
            inbox: Inbox::new(self.adapter, self.spool, None),
            outgoing: self.outlet.receiver(),
            pending: HashMap::new(),
        };
        self.heartbeat.set_deadline(wire.live.liveness_deadline());
        self.heartbeat.enter(State::Connected);
        tracing::info!(adapter = %self.adapter, "wecom long connection up");
        let end = wire.drive(&mut conn, shutdown).await;
        let (_, stored) = conn.inbox.finish();
        Outcome {
            end,
            connected_for: Some(since.elapsed()),
            stored,
        }
    }

    /// Writes `aibot_subscribe` and reads up to its answer.
    async fn subscribe(&self, ws: &mut Socket) -> Result<(), End> {
        if !self.fence.holds() {
            return Err(End::Failed("fenced: the cluster's lease may be gone".into()));
        }
        let req_id = frame::req_id(frame::SUBSCRIBE);
        let text = frame::subscribe(&req_id, self.bot_id.expose(), self.secret.expose());
        ws.send(Message::text(text))
            .await
            .map_err(|e| End::Failed(format!("writing aibot_subscribe failed: {e}")))?;
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => match frame::read(&text) {
                    Inbound::Answer { req_id: r, errcode, errmsg } if r == req_id => {
                        return match errcode {
                            0 => Ok(()),
                            _ => Err(End::Refused { errcode, errmsg }),
                        }
                    }
                    Inbound::Kicked => return Err(End::Kicked),
                    _ => {}
                },
                Some(Ok(Message::Close(frame))) => {
                    return Err(End::Closed(frame.map(|f| u16::from(f.code))))
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(End::Failed(e.to_string())),
                None => return Err(End::Closed(None)),
            }
        }
    }
}

/// What the long connection's frames mean, over the shared loop.
struct Live<'a> {
    s: &'a Session<'a>,
    inbox: Inbox<'a>,
    /// The sender's frames, while this connection holds the outlet.
    outgoing: Option<outlet::Receiver<'a>>,
    /// The sender's commands written and not yet answered, by `req_id`, with when they went.
    pending: HashMap<String, (Taken, Instant)>,
}

impl Frames for Live<'_> {
    type End = End;

    fn probe(&self) -> Message {
        Message::text(frame::ping(&frame::req_id(frame::PING)))
    }

    /// A command unanswered past its deadline: the sender is told, and the connection's own
    /// probe decides whether the socket is dead.
    fn on_tick(&mut self, now: Instant) {
        let late: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) >= ANSWER_WITHIN)
            .map(|(r, _)| r.clone())
            .collect();
        for req_id in late {
            if let Some((taken, _)) = self.pending.remove(&req_id) {
                taken.failed(format!("no answer within {ANSWER_WITHIN:?}"));
            }
        }
    }

    async fn on_message(&mut self, wire: &mut Wire<'_>, msg: Message) -> Step<End> {
        let now = Instant::now();
        let Message::Text(text) = msg else {
            wire.live.on_inbound(now);
            return Step::Continue;
        };
        match frame::read(&text) {
            Inbound::Answer { req_id, errcode, errmsg } => {
                if req_id.starts_with(frame::PING) && !self.pending.contains_key(&req_id) {
                    if errcode == 0 {
                        wire.live.on_pong(now);
                        self.s.heartbeat.beat();
                    } else {
                        wire.live.on_inbound(now);
                        tracing::warn!(adapter = %self.s.adapter, errcode, "wecom answered a ping with an error");
                    }
                    return Step::Continue;
                }
                wire.live.on_inbound(now);
                if let Some((taken, _)) = self.pending.remove(&req_id) {
                    match errcode {
                        0 => taken.written(),
                        _ => taken.failed(format!("{ERRCODE}{errcode}: {errmsg}")),
                    }
                }
                Step::Continue
            }
            Inbound::Message { req_id, body } => {
                wire.live.on_inbound(now);
                self.store(event(self.s.adapter, "message", &req_id, body)).await
            }
            Inbound::Event { req_id, eventtype, body } => {
                wire.live.on_inbound(now);
                self.store(event(self.s.adapter, &eventtype, &req_id, body)).await
            }
            Inbound::Kicked => Step::End(End::Kicked),
            Inbound::Other => {
                wire.live.on_inbound(now);
                tracing::debug!(adapter = %self.s.adapter, "ignoring a frame that is no callback or answer");
                Step::Continue
            }
        }
    }

    async fn outgoing(&mut self) -> outlet::Frame {
        outlet::next(&mut self.outgoing).await
    }

    async fn on_outgoing(&mut self, wire: &mut Wire<'_>, frame: outlet::Frame) -> Step<End> {
        let Some((text, taken)) = frame.take() else {
            return Step::Continue;
        };
        let Some(req_id) = frame::own_req_id(&text) else {
            taken.failed("the frame has no req_id".into());
            return Step::Continue;
        };
        match wire.send(Message::text(text)).await {
            Ok(()) => {
                // A command already waiting under this id can no longer be matched: its
                // sender hears that it may have gone out.
                if let Some((old, _)) = self.pending.insert(req_id, (taken, Instant::now())) {
                    old.failed("a later command took its req_id".into());
                }
                Step::Continue
            }
            Err(end) => {
                taken.failed("the write failed".into());
                Step::End(end.into())
            }
        }
    }
}

impl Live<'_> {
    async fn store(&mut self, event: Event) -> Step<End> {
        self.s.heartbeat.beat();
        if let Err(e) = self.inbox.append(&event).await {
            return Step::End(End::Spool(e));
        }
        crate::test_hook::kill_at("wecom-stored", &event.id);
        Step::Continue
    }
}

/// The spool's record of a callback: its id is the body's `msgid` (the same on every
/// delivery; the `req_id` stands in for a body without one), its kind `message` or the
/// event's type, its data the body with the callback's `req_id`, which a reply must carry.
fn event(adapter: &str, kind: &str, req_id: &str, mut body: Value) -> Event {
    let id = body["msgid"]
        .as_str()
        .filter(|m| !m.is_empty() && m.len() <= 256)
        .unwrap_or(req_id)
        .to_owned();
    body["req_id"] = Value::String(req_id.to_owned());
    Event::new(id, adapter, kind, None, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_callback_is_named_by_its_msgid_and_keeps_its_req_id() {
        let e = event("wc", "message", "r1", json!({"msgid": "m1", "msgtype": "text"}));
        assert_eq!((e.id.as_str(), e.kind.as_str()), ("m1", "message"));
        assert_eq!(e.data["req_id"], "r1");
        assert_eq!(event("wc", "enter_chat", "r2", json!({})).id, "r2");
        assert_eq!(event("wc", "message", "r3", json!({"msgid": 7})).id, "r3");
    }
}
