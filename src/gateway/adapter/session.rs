//! One connection of an adapter, from connect to its end: Hello, Identify or Resume,
//! heartbeats, WS pings, dispatches into the spool, and every way it can end.
//!
//! The loop is a single `select!` over shutdown, the liveness timer and the socket, with the
//! timer first so that a flood of dispatches can never delay a heartbeat. Every write has a
//! deadline; a connection is dropped without waiting for a close handshake when it is dead.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::close_code::GatewayPlatform;
use super::connect::{self, Socket};
use super::identify_queue::IdentifyQueue;
use super::liveness::{self, Action, Liveness, Zombie};
use crate::config::Timing;
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::{Event, Spool};
use crate::test_hook;

/// What the server speaks.
#[derive(Clone, Debug)]
pub enum Dialect {
    /// The QQ Bot / Discord gateway protocol. `token` is what Identify and Resume carry.
    Gateway {
        platform: GatewayPlatform,
        token: String,
        intents: u64,
        shard: Option<[u32; 2]>,
        properties: Value,
        /// Whether WebSocket pings probe the socket besides the heartbeat.
        ws_ping: bool,
    },
    /// A plain WebSocket: no handshake, liveness by WS ping and an optional app-level ping.
    Plain {
        ping_interval: Duration,
        app_ping: Option<String>,
    },
}

/// What a resume needs, carried from one connection to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumeState {
    pub session_id: String,
    pub seq: u64,
    pub resume_url: Option<String>,
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub enum SessionEnd {
    /// Could not connect, or the handshake did not complete (no Hello, no READY).
    Failed(String),
    Zombie(Zombie),
    Closed(Option<u16>),
    /// op 7: the server asks for a reconnect and resume.
    Reconnect,
    /// op 9: the session is invalid; `resumable` says whether a resume may still work.
    InvalidSession {
        resumable: bool,
    },
    /// The spool could not store a dispatch: stop reading so nothing is acknowledged.
    Spool(String),
    Shutdown,
}

pub struct Session<'a> {
    pub adapter: &'a str,
    pub url: &'a str,
    pub authorization: Option<&'a str>,
    pub dialect: &'a Dialect,
    pub timing: &'a Timing,
    pub heartbeat: &'a Heartbeat,
    pub spool: &'a Spool,
    pub proxies: &'a ProxyEnv,
    /// The credential's session start limit, which every Identify books a slot in.
    pub identify: &'a IdentifyQueue,
}

/// The result of one connection: how it ended, the resume state for the next one, and how long
/// it was connected (to reset the backoff after a stable period).
#[derive(Debug)]
pub struct Outcome {
    pub end: SessionEnd,
    pub resume: Option<ResumeState>,
    pub connected_for: Option<Duration>,
    /// Dispatches stored in the spool over this connection.
    pub stored: u64,
}

enum Step {
    Continue,
    End(SessionEnd),
}

enum Drained {
    CaughtUp,
    StillBusy,
    End(SessionEnd),
}

struct Conn<'a> {
    s: &'a Session<'a>,
    ws: Socket,
    resume: Option<ResumeState>,
    live: Option<Liveness>,
    ready_at: Option<Instant>,
    /// Until READY or RESUMED: when the handshake is given up. A resume replay that keeps
    /// delivering dispatches pushes it on, so a long replay is never cut off half way.
    handshake_deadline: Option<Instant>,
    /// An Identify waiting for its slot in the session start limit (heartbeats go on).
    identify_at: Option<Instant>,
    write_timeout: Duration,
    sent_pings: u64,
    stored: u64,
}

impl Session<'_> {
    pub async fn run(
        &self,
        resume: Option<ResumeState>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Outcome {
        self.heartbeat.enter(State::Connecting);
        self.heartbeat.attempt();
        let fail = |end, resume| Outcome {
            end,
            resume,
            connected_for: None,
            stored: 0,
        };
        let user_timeout = self.timing.ack_timeout.unwrap_or(Duration::from_secs(10)) * 2;
        let ws = tokio::select! {
            r = connect::connect(self.url, self.authorization, self.proxies, self.timing.connect_timeout, user_timeout) => match r {
                Ok(ws) => ws,
                Err(e) => return fail(SessionEnd::Failed(e.to_string()), resume),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return fail(SessionEnd::Shutdown, resume),
        };
        let mut conn = Conn {
            s: self,
            ws,
            resume,
            live: None,
            ready_at: None,
            handshake_deadline: None,
            identify_at: None,
            write_timeout: self.timing.connect_timeout,
            sent_pings: 0,
            stored: 0,
        };
        let end = conn.drive(shutdown).await;
        if !matches!(end, SessionEnd::Closed(_) | SessionEnd::Shutdown) {
            // Dead or abandoned: drop the socket without a close handshake.
            tracing::debug!(adapter = self.adapter, ?end, "dropping connection");
        }
        Outcome {
            connected_for: conn.ready_at.map(|t| t.elapsed()),
            resume: conn.resume,
            stored: conn.stored,
            end,
        }
    }
}

impl Conn<'_> {
    async fn drive(&mut self, shutdown: &mut watch::Receiver<bool>) -> SessionEnd {
        let timing = self.s.timing;
        // Phase 1: learn the heartbeat interval.
        let interval = match self.s.dialect {
            Dialect::Plain { ping_interval, .. } => *ping_interval,
            Dialect::Gateway { .. } => match self.await_hello(shutdown).await {
                Ok(i) => i,
                Err(end) => return end,
            },
        };
        let ack = timing
            .ack_timeout
            .unwrap_or_else(|| liveness::default_ack_timeout(interval));
        self.write_timeout = ack.max(Duration::from_millis(500));
        let (heartbeats, pings) = match self.s.dialect {
            Dialect::Gateway { ws_ping, .. } => (true, *ws_ping),
            Dialect::Plain { app_ping, .. } => (app_ping.is_some(), true),
        };
        let live = Liveness::new(
            Instant::now(),
            interval,
            ack,
            fastrand::f64(),
            heartbeats,
            pings,
        );
        self.s
            .heartbeat
            .set_deadline(live.liveness_deadline().max(timing.hello_timeout + ack));
        self.live = Some(live);

        // Phase 2: identify or resume (the gateway protocol), then run.
        match self.s.dialect {
            Dialect::Gateway { shard, .. } => {
                let at = match self.resume {
                    Some(_) => Instant::now(),
                    None => self.s.identify.book(shard.map_or(0, |s| s[0])),
                };
                if at > Instant::now() {
                    let secs = at.saturating_duration_since(Instant::now()).as_secs_f64();
                    self.s.heartbeat.error(format!(
                        "waiting {secs:.0}s for the platform's session start limit"
                    ));
                    self.s.heartbeat.enter(State::Identifying);
                    self.identify_at = Some(at);
                    self.handshake_deadline = Some(at + timing.hello_timeout);
                } else if let Err(end) = self.send_handshake().await {
                    return end;
                }
            }
            Dialect::Plain { .. } => self.connected(),
        }
        // Both futures live for the whole connection: re-creating them on every frame would
        // cost a timer registration and a watch subscription per frame, which adds up over a
        // thousand connections.
        let stop = crate::gateway::until_shutdown(shutdown);
        tokio::pin!(stop);
        let timer = sleep_until(Instant::now());
        tokio::pin!(timer);
        loop {
            let live = self.live.as_ref().expect("set above");
            let mut wake = live.next_wakeup();
            if self.ready_at.is_none() {
                for d in [self.handshake_deadline, self.identify_at]
                    .into_iter()
                    .flatten()
                {
                    wake = wake.min(d);
                }
            }
            let wake = coalesce(wake, interval);
            if timer.deadline() != wake || timer.is_elapsed() {
                timer.as_mut().reset(wake);
            }
            let step = tokio::select! {
                biased;
                _ = &mut stop => {
                    let close = CloseFrame { code: CloseCode::Away, reason: "shutting down".into() };
                    let _ = timeout(Duration::from_secs(1), self.ws.send(Message::Close(Some(close)))).await;
                    Step::End(SessionEnd::Shutdown)
                }
                _ = &mut timer => self.on_timer().await,
                frame = self.ws.next() => match frame {
                    Some(Ok(msg)) => self.on_frame(msg).await,
                    Some(Err(e)) => {
                        tracing::debug!(adapter = self.s.adapter, error = %e, "read failed");
                        Step::End(SessionEnd::Closed(None))
                    }
                    None => Step::End(SessionEnd::Closed(None)),
                },
            };
            if let Step::End(end) = step {
                return end;
            }
        }
    }

    /// Wait for op 10 within the hello timeout.
    async fn await_hello(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Duration, SessionEnd> {
        let deadline = Instant::now() + self.s.timing.hello_timeout;
        loop {
            let frame = tokio::select! {
                _ = crate::gateway::until_shutdown(shutdown) => return Err(SessionEnd::Shutdown),
                _ = sleep_until(deadline) => return Err(SessionEnd::Failed(format!("no Hello within {:?}", self.s.timing.hello_timeout))),
                f = self.ws.next() => f,
            };
            match frame {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if v["op"] == 10 {
                        let ms = v["d"]["heartbeat_interval"].as_u64().unwrap_or(0);
                        if ms == 0 {
                            return Err(SessionEnd::Failed(
                                "Hello without a heartbeat interval".into(),
                            ));
                        }
                        self.s.heartbeat.beat();
                        return Ok(Duration::from_millis(ms));
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    return Err(SessionEnd::Closed(frame.map(|f| u16::from(f.code))))
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(SessionEnd::Failed(format!("before Hello: {e}"))),
                None => return Err(SessionEnd::Failed("closed before Hello".into())),
            }
        }
    }

    fn handshake_payload(&self) -> (State, Value) {
        let Dialect::Gateway {
            token,
            intents,
            shard,
            properties,
            ..
        } = self.s.dialect
        else {
            unreachable!("plain sockets have no handshake")
        };
        match &self.resume {
            Some(r) => (
                State::Resuming,
                json!({"op": 6, "d": {"token": token, "session_id": r.session_id, "seq": r.seq}}),
            ),
            None => {
                let mut d = json!({"token": token, "intents": intents, "properties": properties});
                if let Some(shard) = shard {
                    d["shard"] = json!(shard);
                }
                (State::Identifying, json!({"op": 2, "d": d}))
            }
        }
    }

    /// Identify or Resume, and the handshake deadline that starts with it.
    async fn send_handshake(&mut self) -> Result<(), SessionEnd> {
        let (state, payload) = self.handshake_payload();
        self.s.heartbeat.enter(state);
        self.send(Message::text(payload.to_string())).await?;
        self.handshake_deadline = Some(Instant::now() + self.s.timing.hello_timeout);
        Ok(())
    }

    /// op 1 with the last seq we stored (or null before the first dispatch).
    fn heartbeat_frame(&self) -> String {
        match self.resume.as_ref() {
            Some(r) => format!("{{\"op\":1,\"d\":{}}}", r.seq),
            None => "{\"op\":1,\"d\":null}".to_owned(),
        }
    }

    fn connected(&mut self) {
        self.ready_at = Some(Instant::now());
        // From here on, only proof of life counts, on the platform's own schedule.
        if let Some(live) = &self.live {
            self.s.heartbeat.set_deadline(live.liveness_deadline());
        }
        self.s.heartbeat.enter(State::Connected);
    }

    /// Queue several frames and flush once, under one write deadline.
    async fn send_all(&mut self, msgs: Vec<Message>) -> Result<(), SessionEnd> {
        let adapter = self.s.adapter;
        let write_timeout = self.write_timeout;
        let ws = &mut self.ws;
        let write = async move {
            for m in msgs {
                ws.feed(m).await?;
            }
            ws.flush().await
        };
        tokio::pin!(write);
        // Nearly every write completes at once (the socket buffer has room); only one that
        // has to wait pays for a timer, which at a thousand connections is most of the cost
        // of a heartbeat.
        let result = match futures_util::FutureExt::now_or_never(write.as_mut()) {
            Some(r) => Ok(r),
            None => timeout(write_timeout, write).await,
        };
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                tracing::debug!(adapter, error = %e, "write failed");
                Err(SessionEnd::Closed(None))
            }
            // A write that cannot finish is a dead write path, whatever the reads say.
            Err(_) => Err(SessionEnd::Zombie(Zombie::WritePathDead)),
        }
    }

    async fn send(&mut self, msg: Message) -> Result<(), SessionEnd> {
        self.send_all(vec![msg]).await
    }

    async fn on_timer(&mut self) -> Step {
        let now = Instant::now();
        if self.identify_at.is_some_and(|at| now >= at) {
            self.identify_at = None;
            if let Err(end) = self.send_handshake().await {
                return Step::End(end);
            }
        }
        if self.ready_at.is_none() && self.handshake_deadline.is_some_and(|d| now >= d) {
            return Step::End(SessionEnd::Failed(format!(
                "no READY/RESUMED within {:?}",
                self.s.timing.hello_timeout
            )));
        }
        if self.live.as_ref().expect("set").overdue_with_traffic(now) {
            match self.drain_readable().await {
                Drained::CaughtUp => {}
                Drained::StillBusy => self
                    .live
                    .as_mut()
                    .expect("set")
                    .defer_overdue(Instant::now()),
                Drained::End(end) => return Step::End(end),
            }
        }
        let now = Instant::now();
        // Everything due now goes out in one write: a heartbeat and its WS ping share a syscall.
        let mut batch = vec![];
        loop {
            let action = self.live.as_mut().expect("set").poll(now);
            let msg = match action {
                None => break,
                Some(Action::Dead(z)) => return Step::End(SessionEnd::Zombie(z)),
                Some(Action::SendPing) => {
                    self.sent_pings += 1;
                    Message::Ping(self.sent_pings.to_be_bytes().to_vec().into())
                }
                Some(Action::SendHeartbeat) => match self.s.dialect {
                    Dialect::Gateway { .. } => Message::text(self.heartbeat_frame()),
                    Dialect::Plain { app_ping, .. } => {
                        Message::text(app_ping.clone().unwrap_or_default())
                    }
                },
            };
            batch.push(msg);
        }
        if batch.is_empty() {
            return Step::Continue;
        }
        match self.send_all(batch).await {
            Ok(()) => Step::Continue,
            Err(end) => Step::End(end),
        }
    }

    /// Process every frame that is already readable, for at most one ACK timeout, so that an
    /// answer queued behind a flood of dispatches is seen before a probe is declared missed.
    async fn drain_readable(&mut self) -> Drained {
        use futures_util::FutureExt;
        let budget = self.live.as_ref().expect("set").ack_timeout();
        let started = Instant::now();
        loop {
            if started.elapsed() >= budget {
                return Drained::StillBusy;
            }
            match self.ws.next().now_or_never() {
                None => return Drained::CaughtUp,
                Some(Some(Ok(msg))) => {
                    if let Step::End(end) = self.on_frame(msg).await {
                        return Drained::End(end);
                    }
                }
                Some(Some(Err(_))) | Some(None) => return Drained::End(SessionEnd::Closed(None)),
            }
        }
    }

    async fn on_frame(&mut self, msg: Message) -> Step {
        let now = Instant::now();
        self.s.heartbeat.beat();
        let live = self.live.as_mut().expect("set");
        match msg {
            Message::Pong(_) => {
                live.on_pong(now);
                Step::Continue
            }
            Message::Ping(_) | Message::Binary(_) | Message::Frame(_) => {
                live.on_inbound(now);
                Step::Continue
            }
            Message::Close(frame) => {
                Step::End(SessionEnd::Closed(frame.map(|f| u16::from(f.code))))
            }
            Message::Text(text) => {
                let value: Value = match serde_json::from_str(&text) {
                    Ok(v) => v,
                    Err(_) => {
                        live.on_inbound(now);
                        tracing::debug!(adapter = self.s.adapter, "ignoring a non-JSON frame");
                        return Step::Continue;
                    }
                };
                if let Dialect::Gateway { .. } = self.s.dialect {
                    // Most frames are ACKs: read only the opcode before building a tree.
                    if let Ok(OpOnly { op: Some(11) }) = serde_json::from_str::<OpOnly>(&text) {
                        live.on_ack(now);
                        return Step::Continue;
                    }
                }
                match self.s.dialect {
                    Dialect::Plain { .. } => {
                        // Any frame answers the app-level ping.
                        live.on_ack(now);
                        let id = value
                            .get("id")
                            .or_else(|| value.get("event_id"))
                            .and_then(id_string);
                        self.store(id, "message".into(), None, value).await
                    }
                    Dialect::Gateway { .. } => self.on_gateway(value, now).await,
                }
            }
        }
    }

    async fn on_gateway(&mut self, v: Value, now: Instant) -> Step {
        let live = self.live.as_mut().expect("set");
        match v["op"].as_u64() {
            Some(11) => {
                live.on_ack(now);
                Step::Continue
            }
            Some(1) => {
                live.on_inbound(now);
                let seq = self.resume.as_ref().map(|r| r.seq);
                match self
                    .send(Message::text(json!({"op": 1, "d": seq}).to_string()))
                    .await
                {
                    Ok(()) => Step::Continue,
                    Err(end) => Step::End(end),
                }
            }
            Some(7) => Step::End(SessionEnd::Reconnect),
            Some(9) => Step::End(SessionEnd::InvalidSession {
                resumable: v["d"].as_bool().unwrap_or(false),
            }),
            Some(0) => {
                live.on_inbound(now);
                let seq = v["s"].as_u64();
                let kind = v["t"].as_str().unwrap_or("").to_owned();
                match kind.as_str() {
                    "READY" => {
                        let d = &v["d"];
                        self.resume = Some(ResumeState {
                            session_id: d["session_id"].as_str().unwrap_or_default().to_owned(),
                            seq: seq.unwrap_or(0),
                            resume_url: d["resume_gateway_url"].as_str().map(str::to_owned),
                        });
                        self.connected();
                        test_hook::hang_if_wedged(self.s.adapter).await;
                        Step::Continue
                    }
                    "RESUMED" => {
                        self.advance(seq);
                        self.connected();
                        test_hook::hang_if_wedged(self.s.adapter).await;
                        Step::Continue
                    }
                    _ => {
                        // QQ puts an event id on every dispatch. Discord does not, and its
                        // `d.id` names the message, shared by its CREATE, UPDATE and DELETE;
                        // session and seq identify the dispatch itself, which is what a
                        // replay after a resume repeats.
                        let id = v.get("id").and_then(id_string);
                        let data = v.get("d").cloned().unwrap_or(Value::Null);
                        self.store(id, kind, seq, data).await
                    }
                }
            }
            _ => {
                live.on_inbound(now);
                Step::Continue
            }
        }
    }

    /// Spool first, then advance the seq: a dispatch is acknowledged (by the seq we report)
    /// only once it is stored, so a crash in between means a replay, never a loss.
    async fn store(
        &mut self,
        id: Option<String>,
        kind: String,
        seq: Option<u64>,
        data: Value,
    ) -> Step {
        let id = id.unwrap_or_else(|| {
            let session = self.resume.as_ref().map_or("", |r| r.session_id.as_str());
            match seq {
                Some(s) => format!("{}:{session}:{s}", self.s.adapter),
                None => format!("{}:{}", self.s.adapter, fastrand::u64(..)),
            }
        });
        let event = Event {
            id,
            adapter: self.s.adapter.to_owned(),
            kind,
            seq,
            received_at: now_rfc3339(),
            data,
        };
        if let Err(e) = self.s.spool.append(&event).await {
            return Step::End(SessionEnd::Spool(e.to_string()));
        }
        self.stored += 1;
        self.advance(seq);
        if self.ready_at.is_none() {
            // A replay before RESUMED is progress: give the handshake more time.
            self.handshake_deadline = Some(Instant::now() + self.s.timing.hello_timeout);
        }
        Step::Continue
    }

    fn advance(&mut self, seq: Option<u64>) {
        if let (Some(seq), Some(r)) = (seq, self.resume.as_mut()) {
            r.seq = r.seq.max(seq);
        }
    }
}

/// Round a wake-up time up onto a grid shared by every connection in the process, so that the
/// probes of a thousand connections fire in a few batches per second instead of a thousand
/// separate wake-ups. The grid is 1/50 of the heartbeat interval (at most 100 ms), so probes
/// and deadlines move by at most 2% of an interval, and only later, never earlier.
fn coalesce(wake: Instant, interval: Duration) -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    let grid = (interval / 50).clamp(Duration::from_millis(1), Duration::from_millis(100));
    let since = wake.saturating_duration_since(origin).as_nanos();
    let g = grid.as_nanos();
    let slots = since.div_ceil(g);
    origin + Duration::from_nanos((slots * g).min(u64::MAX as u128) as u64)
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

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
