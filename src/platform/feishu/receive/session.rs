//! One Feishu/Lark long connection, from the upgrade to its end: pings with a pong deadline,
//! events into the spool and only then acknowledged, and every way it can end.
//!
//! Frames are binary pbbp2 (`crate::platform::feishu::pbbp2`). The client pings (a control frame) every
//! PingInterval and the server pongs, sometimes with a new ClientConfig that applies at once.
//! Events come as data frames, split into parts when large (`reassembly`); each whole event
//! is appended to the spool, deduplicated by its `event_id` (the server delivers again what
//! it did not see acknowledged), and then acknowledged by sending its frame back with
//! `{"code":200}` and a `biz_rt` header, as the SDKs do. Nothing is acknowledged before it is
//! stored, so a crash in between means a redelivery, never a loss.
//!
//! The loop itself, reads, pings and writes under a deadline, is the shared `frame_loop`;
//! this file says what Feishu's frames mean. Liveness is the runtime's tracker (`liveness`), strict: the server answers a ping at once,
//! so one pong missing past its deadline, after draining whatever was readable, is a dead
//! connection even while events still arrive. A half-open socket or stopped pongs are
//! dropped within PingInterval plus the pong deadline.

use std::time::Duration;

use prost::Message as _;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::discovery::ClientConfig;
use super::handshake::{self, Refusal};
use super::reassembly::{Part, Reassembly};
use crate::config::Timing;
use crate::gateway::adapter::connect::{self, ConnectError};
use crate::gateway::adapter::frame_loop::{Ended, Frames, Step, Wire};
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::liveness::{self, Liveness, Zombie};
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::grid::Grid;
use crate::gateway::fence::Fence;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::{Event, Spool};
use crate::platform::feishu::pbbp2::{header, message_type, Frame, FrameKind};

/// One connection attempt's inputs.
pub(super) struct Session<'a> {
    pub(super) adapter: &'a str,
    /// Holds the connection's ticket: never logged.
    pub(super) url: &'a str,
    pub(super) config: ClientConfig,
    pub(super) timing: &'a Timing,
    pub(super) heartbeat: &'a Heartbeat,
    pub(super) spool: &'a Spool,
    pub(super) proxies: &'a ProxyEnv,
    /// Nothing is written (no ping, no acknowledgement) once it closes: a cluster's lease may
    /// be gone.
    pub(super) fence: &'a Fence,
    pub(super) grid: &'a Grid,
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub(super) enum End {
    Shutdown,
    /// The upgrade was refused; the headers said whether for good.
    Refused(Refusal),
    /// Could not connect.
    Failed(String),
    Zombie(Zombie),
    Closed(Option<u16>),
    /// The spool could not store an event: nothing more may be acknowledged.
    Spool(String),
}

/// A connection's result, for the runner.
pub(super) struct Outcome {
    pub(super) end: End,
    /// How long it was up, if the upgrade succeeded.
    pub(super) connected_for: Option<Duration>,
    /// Events stored over it.
    pub(super) stored: u64,
    /// The server's settings as the connection left them (a pong may have changed them).
    pub(super) config: ClientConfig,
}

/// The SDKs' acknowledgement payload (`NewResponseByCode(http.StatusOK)`).
const ACK_PAYLOAD: &[u8] = br#"{"code":200}"#;

/// What Feishu's frames mean, over the shared loop
/// ([`frame_loop`](crate::gateway::adapter::frame_loop)).
struct Live<'a> {
    s: &'a Session<'a>,
    inbox: Inbox<'a>,
    config: ClientConfig,
    parts: Reassembly,
    /// The connect URL's `service_id`, which every ping carries.
    service: i32,
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
        let failed = |end, config| Outcome {
            end,
            connected_for: None,
            stored: 0,
            config,
        };
        self.heartbeat.enter(State::Connecting);
        self.heartbeat.attempt();
        let ack = self.ack_timeout(self.config.ping_interval);
        let ws = tokio::select! {
            r = connect::connect(self.url, None, self.proxies, self.timing.connect_timeout, ack * 2) => match r {
                Ok(ws) => ws,
                Err(ConnectError::Refused { status, headers }) => {
                    return failed(End::Refused(handshake::classify(status, &headers)), self.config)
                }
                Err(e) => return failed(End::Failed(e.to_string()), self.config),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return failed(End::Shutdown, self.config),
        };
        let since = Instant::now();
        // The SDKs ping at once on connecting: the first pong proves the connection.
        let live = Liveness::new(since, self.config.ping_interval, ack, 0.0, true, false).strict();
        let mut wire = Wire::new(self.adapter, ws, live, self.fence, self.grid);
        let mut conn = Live {
            s: self,
            inbox: Inbox::new(self.adapter, self.spool, None),
            config: self.config,
            parts: Reassembly::new(),
            service: service_id(self.url),
        };
        self.heartbeat.set_deadline(wire.live.liveness_deadline());
        self.heartbeat.enter(State::Connected);
        tracing::info!(
            adapter = %self.adapter,
            ping_interval_s = self.config.ping_interval.as_secs(),
            "long connection up"
        );
        let end = wire.drive(&mut conn, shutdown).await;
        if !matches!(end, End::Shutdown | End::Closed(_)) {
            tracing::debug!(adapter = %self.adapter, ?end, "dropping connection");
        }
        let config = conn.config;
        let (_, stored) = conn.inbox.finish();
        Outcome {
            end,
            connected_for: Some(since.elapsed()),
            stored,
            config,
        }
    }

    /// The pong deadline: `ack-timeout`, or a fifth of the interval within 100 ms and 10 s.
    fn ack_timeout(&self, interval: Duration) -> Duration {
        self.timing
            .ack_timeout
            .unwrap_or_else(|| liveness::default_ack_timeout(interval))
    }
}

/// The `service_id` query parameter of the connect URL, which pings carry (0 if absent).
fn service_id(url: &str) -> i32 {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let query = query.split('#').next().unwrap_or("");
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "service_id")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

impl Frames for Live<'_> {
    type End = End;

    fn probe(&self) -> Message {
        Message::Binary(Frame::ping(self.service).encode_to_vec().into())
    }

    fn on_tick(&mut self, now: Instant) {
        self.parts.expire(now);
    }

    async fn on_message(&mut self, wire: &mut Wire<'_>, msg: Message) -> Step<End> {
        let now = Instant::now();
        let Message::Binary(bytes) = msg else {
            // WebSocket pings (answered by the library), pongs and text: the read path works,
            // and that is all they say.
            wire.live.on_inbound(now);
            return Step::Continue;
        };
        let Ok(frame) = Frame::decode(bytes.as_ref()) else {
            wire.live.on_inbound(now);
            tracing::debug!(
                adapter = %self.s.adapter,
                "ignoring a frame that is not pbbp2"
            );
            return Step::Continue;
        };
        match frame.kind() {
            Some(FrameKind::Control) if frame.message_type() == Some(message_type::PONG) => {
                wire.live.on_ack(now);
                self.s.heartbeat.beat();
                self.on_pong(wire, now, frame.payload_bytes());
                Step::Continue
            }
            Some(FrameKind::Data) => {
                wire.live.on_inbound(now);
                self.s.heartbeat.beat();
                self.on_data(wire, now, frame).await
            }
            _ => {
                wire.live.on_inbound(now);
                Step::Continue
            }
        }
    }
}

impl Live<'_> {
    /// A pong's ClientConfig applies at once: a new interval reschedules the next ping and
    /// moves the heartbeat's deadline with it.
    fn on_pong(&mut self, wire: &mut Wire<'_>, now: Instant, payload: &[u8]) {
        let Some(config) = self.config.updated_by_pong(payload) else {
            return;
        };
        if config.ping_interval != self.config.ping_interval {
            let ack = self.s.ack_timeout(config.ping_interval);
            wire.set_interval(now, config.ping_interval, ack);
            self.s.heartbeat.set_deadline(wire.live.liveness_deadline());
            tracing::info!(
                adapter = %self.s.adapter,
                from_s = self.config.ping_interval.as_secs(),
                to_s = config.ping_interval.as_secs(),
                "the server changed the ping interval"
            );
        }
        self.config = config;
    }

    /// An event (or a part of one): whole, it goes into the spool and is then acknowledged.
    async fn on_data(&mut self, wire: &mut Wire<'_>, now: Instant, mut frame: Frame) -> Step<End> {
        if frame.message_type() != Some(message_type::EVENT) {
            // Card callbacks and anything newer: the SDKs leave them unanswered too.
            tracing::debug!(adapter = %self.s.adapter, kind = ?frame.message_type(), "ignoring a data frame that is not an event");
            return Step::Continue;
        }
        let id = frame.header(header::MESSAGE_ID).unwrap_or("").to_owned();
        let sum = frame.header_u32(header::SUM).unwrap_or(1);
        let seq = frame.header_u32(header::SEQ).unwrap_or(0);
        let payload = frame.payload.take().unwrap_or_default();
        let payload = match self.parts.add(now, &id, sum, seq, payload) {
            Part::Whole(p) => p,
            Part::Waiting => return Step::Continue,
            Part::Refused(why) => {
                tracing::warn!(adapter = %self.s.adapter, message_id = %id, why, "dropping a part of a split event");
                return Step::Continue;
            }
        };
        let started = std::time::Instant::now();
        let event = event(self.s.adapter, &id, &payload);
        if let Err(e) = self.inbox.append(&event).await {
            return Step::End(End::Spool(e));
        }
        crate::test_hook::kill_at("feishu-stored", &event.id);
        // The frame goes back as it came, with the SDKs' answer and how long we took.
        frame.headers.push(crate::platform::feishu::pbbp2::Header {
            key: header::BIZ_RT.to_owned(),
            value: started.elapsed().as_millis().to_string(),
        });
        frame.payload = Some(ACK_PAYLOAD.to_vec());
        match wire
            .send(Message::Binary(frame.encode_to_vec().into()))
            .await
        {
            Ok(()) => Step::Continue,
            Err(end) => Step::End(end.into()),
        }
    }
}

/// The spool's record of an event. Its id is the event's `header.event_id`, which the
/// platform keeps across redeliveries and tells clients to deduplicate by ("事件可能重复推送,
/// 根据 event_id 去重"); the frame's `message_id` stands in for an event without one. Its kind
/// is the event type.
fn event(adapter: &str, message_id: &str, payload: &[u8]) -> Event {
    let data: Value = serde_json::from_slice(payload)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(payload).into_owned()));
    let header = &data["header"];
    let kind = header["event_type"].as_str().unwrap_or("event").to_owned();
    let id = header["event_id"]
        .as_str()
        .filter(|e| !e.is_empty())
        .or(Some(message_id).filter(|m| !m.is_empty()))
        .map_or_else(|| format!("{adapter}:{}", fastrand::u64(..)), str::to_owned);
    Event::new(id, adapter, kind, None, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_id_comes_from_the_query() {
        let url = "wss://msg-frontier.feishu.cn/ws/v2?fpid=493&aid=552564&device_id=7&access_key=k&service_id=33554678&ticket=t";
        assert_eq!(service_id(url), 33554678);
        assert_eq!(service_id("ws://127.0.0.1:9/ws"), 0);
        assert_eq!(service_id("ws://h/ws?service_id=x"), 0);
        assert_eq!(service_id("ws://h/ws?a=1&service_id=5#f"), 5);
    }

    #[test]
    fn an_event_is_named_by_its_event_id_and_typed_by_its_header() {
        let payload = br#"{"schema":"2.0","header":{"event_id":"ev1","event_type":"im.message.receive_v1"},"event":{}}"#;
        let e = event("fs", "m1", payload);
        assert_eq!(
            (e.id.as_str(), e.kind.as_str()),
            ("ev1", "im.message.receive_v1")
        );
        assert_eq!(event("fs", "", payload).id, "ev1");
        let odd = event("fs", "m2", b"not json");
        assert_eq!(odd.id, "m2");
        assert_eq!(
            (odd.kind.as_str(), odd.data.as_str()),
            ("event", Some("not json"))
        );
        assert!(event("fs", "", b"{}").id.starts_with("fs:"));
    }
}
