//! One WebSocket connection of an adapter, from connect to its end: Hello, Identify or Resume,
//! heartbeats, WS pings, dispatches into the spool, and every way it can end.
//!
//! A connection goes through phases, each a type: connecting (a socket, nothing known), then,
//! once the heartbeat interval is known (Hello, or a plain socket's configured ping), a live
//! connection that owns its liveness tracker, queued for an Identify slot, handshaking, or
//! ready. What the frames mean is the dialect's (`dialect.rs`); what every transport shares is
//! elsewhere: proof of life (`liveness.rs`), spool before ack (`inbox.rs`), how a connection
//! ended (`outcome.rs`), the sender's frames for a plain socket (`outlet.rs`).
//!
//! The loop is a single `select!` over shutdown, the liveness timer, the outlet (once ready)
//! and the socket, with the timer first so that a flood of dispatches can never delay a
//! heartbeat, and the outlet before the socket so that it can never delay a send either. Every write has a
//! deadline; a connection is dropped without waiting for a close handshake when it is dead.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::watch;
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::answer_batch::Outstanding;
use super::connect::{self, Socket};
use super::dialect::{self, Dialect, Gateway, Handshake};
use super::identify_queue::IdentifyQueue;
use super::inbox::{Inbox, ResumeState};
use super::liveness::{self, Action, Liveness, Zombie};
use super::outcome::{Outcome, SessionEnd};
use super::outlet::{self, Outlet};
use super::whoami::Whoami;
use crate::config::Timing;
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::fence::Fence;
use crate::gateway::grid::Grid;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::platform_number::{self, HEARTBEAT_INTERVAL};
use crate::gateway::spool::{Event, Spool};
use crate::test_hook;

mod read;

pub(crate) struct Session<'a> {
    pub(crate) adapter: &'a str,
    pub(crate) url: &'a str,
    pub(crate) authorization: Option<&'a str>,
    pub(crate) dialect: &'a Dialect,
    pub(crate) timing: &'a Timing,
    pub(crate) heartbeat: &'a Heartbeat,
    pub(crate) spool: &'a Spool,
    pub(crate) proxies: &'a ProxyEnv,
    /// Nothing is written once it closes: a cluster's lease may be gone.
    pub(crate) fence: &'a Fence,
    /// What its deadlines are on.
    pub(crate) grid: &'a Grid,
    /// The credential's session start limit, which every Identify books a slot in.
    pub(crate) identify: &'a IdentifyQueue,
    /// A plain socket that can send: where its sender's frames come from.
    pub(crate) outlet: Option<&'a Outlet>,
    /// Where READY's word on who the bot is goes, under [`Session::adapter`].
    pub(crate) whoami: &'a Whoami,
}

enum Step {
    Continue,
    End(SessionEnd),
}

/// What an inbound frame calls for, decided before anything is awaited, so that only this is
/// held across the await: the task's size is paid once per connection.
enum Effect {
    Continue,
    End(SessionEnd),
    /// The server asked for a heartbeat now.
    Heartbeat,
    /// Into the spool, and only then acknowledged (see `Inbox::append`).
    Store(Event),
    /// READY or RESUMED.
    Connected,
}

enum Drained {
    CaughtUp,
    StillBusy,
    End(SessionEnd),
}

/// Where a live connection is.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// An Identify waits for its slot in the session start limit; heartbeats go on.
    Queued {
        identify_at: Instant,
        deadline: Instant,
    },
    /// Identify or Resume went out: READY or RESUMED is due by `deadline`, which a resume
    /// replay that keeps delivering dispatches pushes on, so a long replay is never cut off.
    Handshaking { deadline: Instant },
    /// READY or RESUMED (a plain socket at once): from here on only proof of life counts.
    Ready { since: Instant },
}

/// A connection whose heartbeat interval is known: it owns its liveness tracker.
struct Live<'a> {
    s: &'a Session<'a>,
    ws: Socket,
    inbox: Inbox<'a>,
    live: Liveness,
    phase: Phase,
    write_timeout: Duration,
    sent_pings: u64,
    /// Frames to send, taken from the outlet once ready.
    outgoing: Option<outlet::Receiver<'a>>,
    /// This connection's probes in the process-wide count (`answer_batch`).
    probes_out: Outstanding,
}

impl Session<'_> {
    pub(crate) async fn run(
        &self,
        resume: Option<ResumeState>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Outcome {
        self.heartbeat.enter(State::Connecting);
        self.heartbeat.attempt();
        let user_timeout = self.timing.ack_timeout.unwrap_or(Duration::from_secs(10)) * 2;
        let ws = tokio::select! {
            // Boxed, as is Hello below: what a connect and a handshake hold lives only while
            // they run, and inline it would enlarge every connected adapter's task for good.
            r = Box::pin(connect::connect(self.url, self.authorization, self.proxies, self.timing.connect_timeout, user_timeout)) => match r {
                Ok(ws) => ws,
                Err(e) => return Outcome::failed(SessionEnd::Failed(e.to_string()), resume),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return Outcome::failed(SessionEnd::Shutdown, resume),
        };
        // Phase 1: learn the heartbeat interval. The socket moves through Hello rather than
        // being borrowed by it, so that the task holds it once (its size is per connection).
        let (ws, interval) = match self.dialect {
            Dialect::Plain { ping_interval, .. } => (ws, *ping_interval),
            Dialect::Gateway(_) => match Box::pin(self.await_hello(ws, shutdown)).await {
                Ok(i) => i,
                Err(end) => {
                    dropping(self.adapter, &end);
                    return Outcome::failed(end, resume);
                }
            },
        };
        let mut conn = Live::new(self, ws, resume, interval);
        let end = conn.drive(shutdown).await;
        dropping(self.adapter, &end);
        let connected_for = match conn.phase {
            Phase::Ready { since } => Some(since.elapsed()),
            Phase::Queued { .. } | Phase::Handshaking { .. } => None,
        };
        let (resume, stored) = conn.inbox.finish();
        Outcome {
            connected_for,
            resume,
            stored,
            end,
        }
    }

    /// Wait for Hello (op 10) within the hello timeout: the heartbeat interval.
    async fn await_hello(
        &self,
        mut ws: Socket,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(Socket, Duration), SessionEnd> {
        let deadline = Instant::now() + self.timing.hello_timeout;
        loop {
            let frame = tokio::select! {
                _ = crate::gateway::until_shutdown(shutdown) => return Err(SessionEnd::Shutdown),
                _ = sleep_until(deadline) => return Err(SessionEnd::Failed(format!("no Hello within {:?}", self.timing.hello_timeout))),
                f = ws.next() => f,
            };
            match frame {
                Some(Ok(Message::Text(t))) => match dialect::read_hello(&t) {
                    Some(0) => {
                        return Err(SessionEnd::Failed(
                            "Hello without a heartbeat interval".into(),
                        ))
                    }
                    Some(ms) => {
                        self.heartbeat.beat();
                        let interval = platform_number::millis(ms, HEARTBEAT_INTERVAL);
                        return Ok((ws, interval));
                    }
                    None => {}
                },
                Some(Ok(Message::Close(frame))) => {
                    return Err(SessionEnd::Closed(frame.map(|f| u16::from(f.code))))
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(SessionEnd::Failed(format!("before Hello: {e}"))),
                None => return Err(SessionEnd::Failed("closed before Hello".into())),
            }
        }
    }
}

/// Dead or abandoned: the socket is dropped without a close handshake.
fn dropping(adapter: &str, end: &SessionEnd) {
    if !matches!(end, SessionEnd::Closed(_) | SessionEnd::Shutdown) {
        tracing::debug!(adapter, ?end, "dropping connection");
    }
}

impl<'a> Live<'a> {
    fn new(
        s: &'a Session<'a>,
        ws: Socket,
        resume: Option<ResumeState>,
        interval: Duration,
    ) -> Self {
        let ack = s
            .timing
            .ack_timeout
            .unwrap_or_else(|| liveness::default_ack_timeout(interval));
        let (heartbeats, pings) = match s.dialect {
            Dialect::Gateway(gateway) => (true, gateway.ws_ping),
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
        s.heartbeat
            .set_deadline(live.liveness_deadline().max(s.timing.hello_timeout + ack));
        Live {
            s,
            ws,
            inbox: Inbox::new(s.adapter, s.spool, resume),
            live,
            // Replaced before the first wait: queued, handshaking from the moment Identify or
            // Resume goes out, or (a plain socket) ready.
            phase: Phase::Handshaking {
                deadline: Instant::now() + s.timing.hello_timeout,
            },
            write_timeout: ack.max(Duration::from_millis(500)),
            sent_pings: 0,
            outgoing: None,
            probes_out: Outstanding::default(),
        }
    }
}

impl Live<'_> {
    async fn drive(&mut self, shutdown: &mut watch::Receiver<bool>) -> SessionEnd {
        let timing = self.s.timing;
        let interval = self.live.interval();
        // Phase 2: identify or resume (the gateway protocol), then run.
        match self.s.dialect {
            Dialect::Gateway(gateway) => {
                let at = match self.inbox.resume() {
                    Some(_) => Instant::now(),
                    None => self.s.identify.book(gateway.shard.map_or(0, |s| s[0])),
                };
                if at > Instant::now() {
                    let secs = at.saturating_duration_since(Instant::now()).as_secs_f64();
                    self.s.heartbeat.error(format!(
                        "waiting {secs:.0}s for the platform's session start limit"
                    ));
                    self.s.heartbeat.enter(State::Identifying);
                    self.phase = Phase::Queued {
                        identify_at: at,
                        deadline: at + timing.hello_timeout,
                    };
                } else if let Err(end) = self.send_handshake(gateway).await {
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
        let mut timer = self.s.grid.deadline(Instant::now());
        loop {
            let wake = match self.phase {
                Phase::Queued {
                    identify_at,
                    deadline,
                } => self.live.next_wakeup().min(identify_at).min(deadline),
                Phase::Handshaking { deadline } => self.live.next_wakeup().min(deadline),
                Phase::Ready { .. } => self.live.next_wakeup(),
            };
            let wake = coalesce(wake, interval);
            self.probes_out.set(self.live.outstanding());
            timer.reset(wake);
            let step = tokio::select! {
                biased;
                _ = &mut stop => {
                    let close = self.closing_frame();
                    let _ = timeout(Duration::from_secs(1), self.ws.send(Message::Close(Some(close)))).await;
                    Step::End(SessionEnd::Shutdown)
                }
                _ = timer.elapsed() => self.on_timer().await,
                frame = outlet::next(&mut self.outgoing) => self.write_outgoing(frame).await,
                frame = self.ws.next() => match frame {
                    Some(Ok(msg)) => self.on_frame(msg).await,
                    Some(Err(e)) => {
                        tracing::debug!(adapter = %self.s.adapter, error = %e, "read failed");
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

    /// Identify or Resume, and the handshake deadline that starts with it.
    async fn send_handshake(&mut self, gateway: &Gateway) -> Result<(), SessionEnd> {
        let (state, payload) = match dialect::handshake(gateway, self.inbox.resume()) {
            Handshake::Resume(p) => (State::Resuming, p),
            Handshake::Identify(p) => (State::Identifying, p),
        };
        self.s.heartbeat.enter(state);
        self.send(Message::text(payload)).await?;
        self.phase = Phase::Handshaking {
            deadline: Instant::now() + self.s.timing.hello_timeout,
        };
        Ok(())
    }

    /// The close frame of a clean stop. 1001 (going away) ends an op-code session on the
    /// platform (the op-code gateways' docs: 1000 and 1001 invalidate it), which is right when
    /// nobody will resume it. In a cluster the next active resumes it from the replica, so
    /// the session is closed with 4000 instead, which leaves it resumable.
    fn closing_frame(&self) -> CloseFrame {
        if matches!(self.s.dialect, Dialect::Gateway(_)) && self.s.spool.hands_over() {
            CloseFrame {
                code: CloseCode::Library(4000),
                reason: "handing over to the cluster's next active".into(),
            }
        } else {
            CloseFrame {
                code: CloseCode::Away,
                reason: "shutting down".into(),
            }
        }
    }

    fn connected(&mut self) {
        self.phase = Phase::Ready {
            since: Instant::now(),
        };
        // From here on, only proof of life counts, on the platform's own schedule.
        self.s.heartbeat.set_deadline(self.live.liveness_deadline());
        self.s.heartbeat.enter(State::Connected);
        if self.outgoing.is_none() {
            self.outgoing = self.s.outlet.and_then(Outlet::receiver);
        }
    }

    /// A frame from the adapter's sender, written unless the sender gave up on it, with word
    /// back of how the write went. A failed write ends the connection, as any write does.
    async fn write_outgoing(&mut self, frame: outlet::Frame) -> Step {
        let Some((text, taken)) = frame.take() else {
            return Step::Continue;
        };
        match self.send(Message::text(text)).await {
            Ok(()) => {
                taken.written();
                Step::Continue
            }
            Err(end) => {
                taken.failed(match &end {
                    SessionEnd::Zombie(z) => format!("the write did not finish: {z}"),
                    _ => "the write failed and the connection closed".into(),
                });
                Step::End(end)
            }
        }
    }

    /// Queue several frames and flush once, under one write deadline.
    async fn send_all(&mut self, msgs: Vec<Message>) -> Result<(), SessionEnd> {
        let adapter = self.s.adapter;
        if !self.s.fence.holds() {
            return Err(SessionEnd::Failed(
                "fenced: the cluster's lease may be gone".into(),
            ));
        }
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
        if let (Phase::Queued { identify_at, .. }, Dialect::Gateway(gateway)) =
            (self.phase, self.s.dialect)
        {
            if now >= identify_at {
                if let Err(end) = self.send_handshake(gateway).await {
                    return Step::End(end);
                }
            }
        }
        let deadline = match self.phase {
            Phase::Queued { deadline, .. } | Phase::Handshaking { deadline } => Some(deadline),
            Phase::Ready { .. } => None,
        };
        if deadline.is_some_and(|d| now >= d) {
            return Step::End(SessionEnd::Failed(format!(
                "no READY/RESUMED within {:?}",
                self.s.timing.hello_timeout
            )));
        }
        if self.live.overdue_with_traffic(now) {
            match self.drain_readable().await {
                Drained::CaughtUp => {}
                Drained::StillBusy => self.live.fell_behind(Instant::now()),
                Drained::End(end) => return Step::End(end),
            }
        }
        let now = Instant::now();
        // Everything due now goes out in one write: a heartbeat and its WS ping share a syscall.
        let mut batch = vec![];
        loop {
            let msg = match self.live.poll(now) {
                None => break,
                Some(Action::Dead(z)) => return Step::End(SessionEnd::Zombie(z)),
                Some(Action::SendPing) => {
                    self.sent_pings += 1;
                    Message::Ping(self.sent_pings.to_be_bytes().to_vec().into())
                }
                Some(Action::SendHeartbeat) => match self.s.dialect {
                    Dialect::Gateway(_) => {
                        Message::text(dialect::heartbeat_frame(self.inbox.resume()))
                    }
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
        let budget = self.live.ack_timeout();
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
        let effect = self.read(msg, now);
        match effect {
            Effect::Continue => Step::Continue,
            Effect::End(end) => Step::End(end),
            Effect::Heartbeat => {
                let beat = dialect::heartbeat_frame(self.inbox.resume());
                match self.send(Message::text(beat)).await {
                    Ok(()) => Step::Continue,
                    Err(end) => Step::End(end),
                }
            }
            Effect::Store(ref event) => {
                if let Err(e) = self.inbox.append(event).await {
                    return Step::End(SessionEnd::Spool(e));
                }
                // A replay before RESUMED is progress: give the handshake more time.
                let more = Instant::now() + self.s.timing.hello_timeout;
                if let Phase::Queued { deadline, .. } | Phase::Handshaking { deadline } =
                    &mut self.phase
                {
                    *deadline = more;
                }
                Step::Continue
            }
            Effect::Connected => {
                if let Err(e) = self.inbox.settle().await {
                    return Step::End(SessionEnd::Spool(e));
                }
                self.connected();
                test_hook::hang_if_wedged(self.s.adapter).await;
                Step::Continue
            }
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
