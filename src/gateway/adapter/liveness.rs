//! Is the connection alive? A pure tracker of probes (heartbeats awaiting ACK, WS pings
//! awaiting pong) and inbound traffic, driven by explicit instants so it can be tested without
//! sockets or real time.
//!
//! The rules, chosen so that every known way of going deaf is caught quickly:
//! - A probe unanswered by its deadline, with *nothing at all* received since it was sent, is a
//!   half-open socket: zombie at once.
//! - While frames still arrive (the read path works), an answer may be queued behind them on a
//!   busy server, so the probe is given until the next probe of its kind; one such miss is
//!   tolerated, and the second consecutive one means the write path is dead: zombie.
//! - An ACK still missing at the next heartbeat tick counts as missed even if its deadline is
//!   longer than the interval, so a miss is declared by the next tick at the latest.
//! - Except while the reader is behind a flood (it could not drain what was readable within an
//!   ACK timeout, see [`Liveness::fell_behind`], or [`FLOOD_FRAMES`] overtook one probe): an
//!   answer can then be queued behind the flood, in our socket or still in the server's, for
//!   longer than two intervals, and a miss says nothing about the write path. Misses count again once the frames pause for an ACK
//!   timeout, or once nothing has been answered for [`BACKLOG_LIMIT`] (or four intervals, if
//!   longer): a write path that dies under a flood that never pauses is still caught.
//! - The WS ping goes out with every second heartbeat, in the same write: an independent
//!   check of the WebSocket layer for no extra wake-up or syscall, which matters at a thousand
//!   connections. A dead socket is detected within one interval plus
//!   the ACK timeout (a fifth of the interval by default): at most 1.2 heartbeat intervals.
//! - A platform whose server answers every ping at once, ahead of anything queued (a binary
//!   long connection, say), is tracked [`Liveness::strict`]ly: one probe unanswered by its
//!   deadline is a dead connection even while frames still arrive, once what was readable has
//!   been drained, so stopped answers are caught within one interval plus the ACK timeout.

use std::time::Duration;

use tokio::time::Instant;

/// Why a connection was declared dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Zombie {
    /// Nothing received since a probe went out, past its deadline.
    HalfOpen,
    /// Two probes in a row unanswered while other frames still arrive.
    WritePathDead,
    /// No frame of any kind for the idle deadline.
    Idle,
    /// A strictly tracked probe unanswered past its deadline while frames still arrive.
    NoAnswer,
}

impl std::fmt::Display for Zombie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Zombie::HalfOpen => "zombie: probe unanswered and nothing received (half-open)",
            Zombie::WritePathDead => {
                "zombie: 2 probes in a row unanswered while frames still arrive (write path dead)"
            }
            Zombie::Idle => "zombie: nothing received within the idle deadline",
            Zombie::NoAnswer => {
                "zombie: the server stopped answering pings, though frames still arrive"
            }
        })
    }
}

/// Frames overtaking one probe that mark a flood: far more than a chat sends in an ACK
/// timeout, far fewer than a replay or a burst that queues answers behind it.
const FLOOD_FRAMES: u32 = 256;

/// The longest a reader that fell behind excuses unanswered probes (at least four intervals).
const BACKLOG_LIMIT: Duration = Duration::from_secs(60);

/// What the connection should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    SendHeartbeat,
    SendPing,
    Dead(Zombie),
}

#[derive(Clone, Copy, Debug)]
struct Probe {
    deadline: Instant,
    /// When the next probe of the same kind is due: the latest a miss is declared while
    /// frames still arrive (an answer may be queued behind them on a busy server).
    late: Instant,
    inbound_since: bool,
    /// Frames received since it went out.
    overtaken_by: u32,
}

impl Probe {
    /// When this probe can next be declared missed.
    fn due(&self) -> Instant {
        if self.inbound_since {
            self.late.max(self.deadline)
        } else {
            self.deadline
        }
    }

    /// When this probe can be declared missed, given until when a reader that fell behind
    /// excuses a probe that frames overtook.
    fn due_unless(&self, excused: Option<Instant>) -> Instant {
        match excused {
            Some(until) if self.inbound_since => self.due().max(until),
            _ => self.due(),
        }
    }
}

/// One kind of probe, heartbeat or WS ping: both follow the same rules, each on its own clock
/// and with its own count of misses.
#[derive(Debug)]
struct Prober {
    /// Whether this kind is sent at all.
    on: bool,
    every: Duration,
    next: Instant,
    outstanding: Option<Probe>,
    /// Probes of this kind missed in a row while frames still arrived.
    missed: u32,
    /// One miss is death, and a probe is due at its deadline whatever arrived meanwhile.
    strict: bool,
}

impl Prober {
    fn new(on: bool, every: Duration, first: Instant) -> Self {
        Self {
            on,
            every,
            next: first,
            outstanding: None,
            missed: 0,
            strict: false,
        }
    }

    fn answered(&mut self) {
        self.outstanding = None;
        self.missed = 0;
    }

    /// When this kind next needs `poll`: its next send (if sent at all) or its probe's due time.
    fn next_wakeup(&self, excused: Option<Instant>) -> Option<Instant> {
        let send = self.on.then_some(self.next);
        let due = self.outstanding.map(|p| p.due_unless(excused));
        send.into_iter().chain(due).min()
    }

    /// Retire a probe past its deadline, counting the miss.
    fn expire(&mut self, now: Instant, excused: Option<Instant>) -> Option<Zombie> {
        let p = self.outstanding?;
        if now < p.due_unless(excused) {
            return None;
        }
        self.outstanding = None;
        if !p.inbound_since {
            return Some(Zombie::HalfOpen);
        }
        if self.strict {
            return Some(Zombie::NoAnswer);
        }
        self.missed += 1;
        (self.missed >= 2).then_some(Zombie::WritePathDead)
    }

    /// If a probe of this kind is due, send it (`send`), or say the connection is dead if the
    /// previous one, still unanswered, was its second miss.
    fn send_if_due(
        &mut self,
        now: Instant,
        ack: Duration,
        excused: Option<Instant>,
        send: Action,
    ) -> Option<Action> {
        if !self.on || now < self.next {
            return None;
        }
        Some(self.send(now, ack, excused).unwrap_or(send))
    }

    /// Retire the previous probe if still unanswered (it is missed at the next tick at the
    /// latest, whatever its deadline), schedule the next, and arm a new probe. Returns the
    /// verdict if retiring the old probe killed the connection. A probe that frames overtook
    /// while the reader is behind (until `excused`) is replaced without a miss: its answer
    /// may still be queued, and any answer answers the new probe too.
    fn send(&mut self, now: Instant, ack: Duration, excused: Option<Instant>) -> Option<Action> {
        if let Some(p) = self.outstanding.as_mut() {
            let overtaken = p.inbound_since && excused.is_some_and(|until| now < until);
            if !overtaken {
                p.deadline = now;
                p.late = now;
                if let Some(dead) = self.expire(now, None) {
                    return Some(Action::Dead(dead));
                }
            }
        }
        self.next += self.every;
        if self.next <= now {
            self.next = now + self.every;
        }
        self.outstanding = Some(Probe {
            deadline: now + ack,
            late: if self.strict {
                now + ack
            } else {
                now + self.every
            },
            inbound_since: false,
            overtaken_by: 0,
        });
        None
    }
}

#[derive(Debug)]
pub(crate) struct Liveness {
    interval: Duration,
    ack_timeout: Duration,
    idle_timeout: Duration,
    /// Sent only by a platform with an app-level ping (a plain WebSocket has only WS pings).
    heartbeat: Prober,
    /// Sent with every second heartbeat (every interval without heartbeats): the heartbeat
    /// already probes the link each interval, the ping adds an independent check of the
    /// WebSocket layer at half the cost. Off for a platform that may not answer them: an
    /// unanswered ping must never tear down a healthy session.
    ping: Prober,
    last_inbound: Instant,
    /// The last ACK or pong (or the start): how long probes have gone unanswered.
    last_answer: Instant,
    /// The reader fell behind a flood and has seen neither an answer nor a pause since.
    behind: bool,
}

/// The ACK deadline when none is configured: a fifth of the interval, between 100 ms and 10 s.
pub(crate) fn default_ack_timeout(interval: Duration) -> Duration {
    (interval / 5).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

impl Liveness {
    /// `jitter` in [0, 1) places the first heartbeat, so that many clients that connected at
    /// once do not heartbeat in lockstep. At least one of `heartbeats` and `pings` must be on
    /// (without either, only the idle deadline would notice a dead socket); with neither,
    /// pings are sent.
    pub(crate) fn new(
        now: Instant,
        interval: Duration,
        ack_timeout: Duration,
        jitter: f64,
        heartbeats: bool,
        pings: bool,
    ) -> Self {
        let first = now + interval.mul_f64(jitter.clamp(0.0, 1.0));
        let ping_every = if heartbeats { interval * 2 } else { interval };
        Self {
            interval,
            ack_timeout,
            idle_timeout: interval + ack_timeout * 2,
            heartbeat: Prober::new(heartbeats, interval, first),
            ping: Prober::new(pings || !heartbeats, ping_every, first),
            last_inbound: now,
            last_answer: now,
            behind: false,
        }
    }

    /// One unanswered probe is a dead connection (see the module doc): for a platform whose
    /// answers never queue behind other frames on the server.
    #[must_use]
    pub(crate) fn strict(mut self) -> Self {
        self.heartbeat.strict = true;
        self.ping.strict = true;
        self
    }

    /// The platform changed its heartbeat interval (new settings in a pong, say): from
    /// now on, probes go out every `interval` with `ack_timeout` to answer, the next one
    /// `interval` from now. A probe already out keeps the deadline it was sent with.
    pub(crate) fn set_interval(&mut self, now: Instant, interval: Duration, ack_timeout: Duration) {
        let pings_follow_heartbeats = self.heartbeat.on;
        self.interval = interval;
        self.ack_timeout = ack_timeout;
        self.idle_timeout = interval + ack_timeout * 2;
        self.heartbeat.every = interval;
        self.heartbeat.next = now + interval;
        self.ping.every = if pings_follow_heartbeats {
            interval * 2
        } else {
            interval
        };
        self.ping.next = self.ping.next.min(now + self.ping.every);
    }

    /// Probes sent and not yet answered, missed or replaced: at most one of each kind.
    pub(crate) fn outstanding(&self) -> usize {
        self.probes().count()
    }

    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    pub(crate) fn ack_timeout(&self) -> Duration {
        self.ack_timeout
    }

    /// How long the component may go without proof of life while connected.
    pub(crate) fn liveness_deadline(&self) -> Duration {
        self.idle_timeout + self.ack_timeout
    }

    /// When `poll` next has something to do.
    pub(crate) fn next_wakeup(&self) -> Instant {
        let excused = self.excused_until();
        [
            self.heartbeat.next_wakeup(excused),
            self.ping.next_wakeup(excused),
        ]
        .into_iter()
        .flatten()
        .fold(self.last_inbound + self.idle_timeout, Instant::min)
    }

    /// Until when a reader that fell behind excuses probes that frames overtook: while frames
    /// keep arriving (each pushes it an ACK timeout on), up to the backlog limit. `None` when
    /// the reader is not behind.
    fn excused_until(&self) -> Option<Instant> {
        let limit = BACKLOG_LIMIT.max(self.interval * 4);
        self.behind
            .then(|| (self.last_inbound + self.ack_timeout).min(self.last_answer + limit))
    }

    fn probes(&self) -> impl Iterator<Item = Probe> {
        [self.heartbeat.outstanding, self.ping.outstanding]
            .into_iter()
            .flatten()
    }

    fn probes_mut(&mut self) -> impl Iterator<Item = &mut Probe> {
        [&mut self.heartbeat.outstanding, &mut self.ping.outstanding]
            .into_iter()
            .flatten()
    }

    /// Any frame at all (proof the read path works).
    pub(crate) fn on_inbound(&mut self, now: Instant) {
        self.last_inbound = now;
        let mut flooded = false;
        for p in self.probes_mut() {
            p.inbound_since = true;
            p.overtaken_by = p.overtaken_by.saturating_add(1);
            flooded |= p.overtaken_by >= FLOOD_FRAMES;
        }
        // So many frames overtook a probe that its answer is likely queued behind them, here
        // or still in the server's buffers (which no drain of our socket can see).
        self.behind |= flooded;
    }

    pub(crate) fn on_ack(&mut self, now: Instant) {
        self.on_answer(now);
        self.heartbeat.answered();
    }

    pub(crate) fn on_pong(&mut self, now: Instant) {
        self.on_answer(now);
        self.ping.answered();
    }

    /// An answer proves the write path and that the reader reached it.
    fn on_answer(&mut self, now: Instant) {
        self.on_inbound(now);
        self.last_answer = now;
        self.behind = false;
    }

    /// Is a probe past its deadline while frames have been arriving since it went out? Then
    /// its answer may simply be queued behind those frames, unread: the caller should drain
    /// what is readable before `poll` counts the miss.
    pub(crate) fn overdue_with_traffic(&self, now: Instant) -> bool {
        let excused = self.excused_until();
        self.probes()
            .any(|p| p.inbound_since && now >= p.due_unless(excused))
    }

    /// The reader could not catch up with a flood within its budget: give the overdue probes
    /// another ACK timeout rather than blame the write path for a backlog on the read side,
    /// and excuse misses until the flood pauses (see the module doc).
    pub(crate) fn fell_behind(&mut self, now: Instant) {
        self.behind = true;
        let (ack, excused) = (self.ack_timeout, self.excused_until());
        for p in self.probes_mut() {
            if p.inbound_since && now >= p.due_unless(excused) {
                p.late = now + ack;
            }
        }
    }

    /// Advance to `now` and say what to do. Call repeatedly until it returns `None`.
    pub(crate) fn poll(&mut self, now: Instant) -> Option<Action> {
        if now >= self.last_inbound + self.idle_timeout {
            return Some(Action::Dead(Zombie::Idle));
        }
        if self.excused_until().is_some_and(|until| now >= until) {
            self.behind = false;
        }
        let excused = self.excused_until();
        if let Some(dead) = self.heartbeat.expire(now, excused) {
            return Some(Action::Dead(dead));
        }
        if let Some(dead) = self.ping.expire(now, excused) {
            return Some(Action::Dead(dead));
        }
        let ack = self.ack_timeout;
        self.heartbeat
            .send_if_due(now, ack, excused, Action::SendHeartbeat)
            .or_else(|| self.ping.send_if_due(now, ack, excused, Action::SendPing))
    }
}

#[cfg(test)]
mod tests;
