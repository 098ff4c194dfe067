//! One Socket Mode connection, from the upgrade to its end: `hello`, WebSocket pings with a
//! pong deadline, envelopes into the spool and only then acknowledged, and every way it ends
//! (docs/research/slack-socket-mode.md §2–§5).
//!
//! An `events_api` envelope's event is appended to the spool under its `event_id`, which Slack
//! keeps across redeliveries (a redelivered envelope may carry a new `envelope_id`), so the
//! spool drops a repeat; then the envelope is acknowledged with `{"envelope_id": …}`, within
//! Slack's 3 s. Nothing is acknowledged before it is stored, so a crash in between means a
//! redelivery, never a loss. Other envelopes (slash commands, interactivity) are acknowledged
//! and not stored: this gateway serves chat.
//!
//! The loop itself, reads, pings and writes under a deadline, is the shared `frame_loop`;
//! this file says what Socket Mode's frames mean. Liveness is the runtime's tracker
//! (`liveness`), strict: Slack answers a ping at once, so
//! one pong missing past its deadline, after draining whatever was readable, is a dead
//! connection even while events still arrive. A half-open socket, or stopped pongs, are
//! dropped within the ping interval plus the pong deadline; a FIN is a closed connection at
//! once.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::config::Timing;
use crate::gateway::adapter::chain::{LinkEnd, Signals};
use crate::gateway::adapter::connect::{self, Socket};
use crate::gateway::adapter::frame_loop::{Ended, Frames, Step, Wire};
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::liveness::{self, Liveness, Zombie};
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::grid::Grid;
use crate::gateway::fence::Fence;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::{Event, Spool};

/// One connection attempt's inputs.
pub(super) struct Session<'a> {
    pub(super) adapter: &'a str,
    /// Holds the connection's ticket: never logged.
    pub(super) url: String,
    /// Tells the chain of `hello` (up) and of a refresh.
    pub(super) signals: Signals,
    /// Opened beside a live connection that Slack asked to refresh: the adapter is connected
    /// meanwhile, and is not said to be connecting.
    pub(super) successor: bool,
    pub(super) ping_interval: Duration,
    pub(super) timing: &'a Timing,
    pub(super) heartbeat: &'a Heartbeat,
    pub(super) spool: &'a Spool,
    pub(super) proxies: &'a ProxyEnv,
    /// Nothing is written (no ping, no ack) once it closes: a cluster's lease may be gone.
    pub(super) fence: &'a Fence,
    pub(super) grid: &'a Grid,
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub(super) enum End {
    Shutdown,
    /// Could not connect, or no `hello` in time.
    Failed(String),
    Zombie(Zombie),
    Closed(Option<u16>),
    /// `disconnect` with this reason.
    Disconnect(String),
    /// `apps.connections.open` refused the app-level token in a way no retry helps: the fix.
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

/// A connection's result, for the chain.
pub(super) type Outcome = crate::gateway::adapter::chain::Outcome<End>;

/// What Socket Mode's frames mean, over the shared loop
/// ([`frame_loop`](crate::gateway::adapter::frame_loop)).
struct Live<'a> {
    s: &'a Session<'a>,
    inbox: Inbox<'a>,
    /// A refresh was asked (once is enough).
    refreshing: bool,
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
        let mut ws = tokio::select! {
            r = connect => match r {
                Ok(ws) => ws,
                Err(e) => return failed(End::Failed(e.to_string())),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return failed(End::Shutdown),
        };
        // Connected is `hello`, not the upgrade: a socket that never says it is no
        // connection.
        match timeout(self.timing.hello_timeout, hello(&mut ws)).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return failed(end),
            Err(_) => {
                let m = format!("no hello within {:?}", self.timing.hello_timeout);
                return failed(End::Failed(m));
            }
        }
        let since = Instant::now();
        let live = Liveness::new(since, self.ping_interval, ack, 0.0, false, true).strict();
        let mut wire = Wire::new(self.adapter, ws, live, self.fence, self.grid);
        let mut conn = Live {
            s: self,
            inbox: Inbox::new(self.adapter, self.spool, None),
            refreshing: false,
        };
        self.heartbeat.set_deadline(wire.live.liveness_deadline());
        self.heartbeat.enter(State::Connected);
        self.signals.up();
        tracing::info!(adapter = %self.adapter, successor = self.successor, "socket mode connection up");
        let end = wire.drive(&mut conn, shutdown).await;
        let (_, stored) = conn.inbox.finish();
        Outcome {
            end,
            connected_for: Some(since.elapsed()),
            stored,
        }
    }
}

/// Reads up to `hello`; a `disconnect` before it (Socket Mode off, too many connections) ends
/// the connection with its reason.
async fn hello(ws: &mut Socket) -> Result<(), End> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => {
                let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                match v["type"].as_str() {
                    Some("hello") => return Ok(()),
                    Some("disconnect") => return Err(End::Disconnect(reason(&v))),
                    _ => {}
                }
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(End::Closed(frame.map(|f| u16::from(f.code))))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(End::Failed(e.to_string())),
            None => return Err(End::Closed(None)),
        }
    }
}

fn reason(v: &Value) -> String {
    v["reason"].as_str().unwrap_or("unknown").to_owned()
}

impl Frames for Live<'_> {
    type End = End;

    fn probe(&self) -> Message {
        Message::Ping(Bytes::from_static(b"hermes-svc"))
    }

    async fn on_message(&mut self, wire: &mut Wire<'_>, msg: Message) -> Step<End> {
        let Some(text) = wire.text_of(msg, self.s.heartbeat) else {
            return Step::Continue;
        };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if v["type"] == "disconnect" {
            let reason = reason(&v);
            if !matches!(reason.as_str(), "refresh_requested" | "warning") {
                return Step::End(End::Disconnect(reason));
            }
            if !std::mem::replace(&mut self.refreshing, true) {
                self.s.signals.refresh(reason);
            }
            return Step::Continue;
        }
        let Some(envelope_id) = v["envelope_id"].as_str().map(str::to_owned) else {
            tracing::debug!(adapter = %self.s.adapter, kind = ?v["type"].as_str(), "ignoring a frame that is no envelope");
            return Step::Continue;
        };
        self.s.heartbeat.beat();
        if v["type"] == "events_api" {
            let event = event(self.s.adapter, &envelope_id, &v["payload"]);
            if let Err(e) = self.inbox.append(&event).await {
                return Step::End(End::Spool(e));
            }
            crate::test_hook::kill_at("slack-stored", &event.id);
        }
        let ack = json!({ "envelope_id": envelope_id }).to_string();
        match wire.send(Message::text(ack)).await {
            Ok(()) => Step::Continue,
            Err(end) => Step::End(end.into()),
        }
    }
}

/// The spool's record of an `events_api` payload: its id is `event_id` (the same on every
/// delivery; the envelope's id stands in for a payload without one), its kind the inner
/// event's type, its data the inner event with the payload's `event_id` and `team_id`.
fn event(adapter: &str, envelope_id: &str, payload: &Value) -> Event {
    let id = payload["event_id"]
        .as_str()
        .filter(|e| !e.is_empty())
        .unwrap_or(envelope_id)
        .to_owned();
    let inner = &payload["event"];
    let kind = inner["type"].as_str().unwrap_or("event").to_owned();
    Event::new(id, adapter, kind, None, inner.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_named_by_its_event_id_and_typed_by_its_inner_event() {
        let payload = json!({"event_id": "Ev1", "event": {"type": "message", "text": "hi"}});
        let e = event("sl", "env1", &payload);
        assert_eq!((e.id.as_str(), e.kind.as_str()), ("Ev1", "message"));
        assert_eq!(e.data["text"], "hi");
        assert_eq!(event("sl", "env2", &json!({})).id, "env2");
    }
}
