//! The loop of a WebSocket whose liveness is a probe the client sends and the server answers
//! (a WebSocket ping, or an application frame): read frames, send the probe when the
//! liveness tracker says so, end the connection when it says the connection is dead, and
//! write every frame under a deadline. What the frames mean is the wing's ([`Frames`]).
//!
//! The tracker's strict rule needs one care here: a probe's answer may be queued behind
//! frames already readable (a burst of events), so before a missing answer counts, whatever
//! is readable is read first, for at most one answer deadline; a reader that could not catch
//! up in that time tells the tracker, which then excuses the flood.

use std::future::Future;
use std::time::Duration;

use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::connect::Socket;
use super::liveness::{Action, Liveness, Zombie};
use super::outlet;
use crate::gateway::fence::Fence;
use crate::gateway::grid::Grid;
use crate::gateway::health::Heartbeat;

/// How the loop itself ended a connection.
#[derive(Debug, PartialEq)]
pub(crate) enum Ended {
    Shutdown,
    /// A close frame (with its code), an error on read or write, or the end of the stream.
    Closed(Option<u16>),
    Zombie(Zombie),
    /// The cluster's lease may be gone: nothing more is written.
    Fenced,
}

pub(crate) enum Step<E> {
    Continue,
    End(E),
}

/// A wing's side of the loop: the probe it sends, and what each frame means.
pub(crate) trait Frames: Send {
    type End: From<Ended> + Send;

    /// The probe to write when the tracker asks for one.
    fn probe(&self) -> Message;

    /// Each time the timer wakes, before the tracker is asked (a wing's own expiries).
    fn on_tick(&mut self, _now: Instant) {}

    /// One frame read; close frames end the loop and never come here.
    fn on_message(
        &mut self,
        wire: &mut Wire<'_>,
        msg: Message,
    ) -> impl Future<Output = Step<Self::End>> + Send;

    /// The next frame the wing's sender hands over (`outlet`), for a platform whose sends go
    /// over this socket; never, by default. Must be cancel-safe.
    fn outgoing(&mut self) -> impl Future<Output = outlet::Frame> + Send {
        std::future::pending()
    }

    /// Write a frame [`Frames::outgoing`] handed over.
    fn on_outgoing(
        &mut self,
        _wire: &mut Wire<'_>,
        _frame: outlet::Frame,
    ) -> impl Future<Output = Step<Self::End>> + Send {
        async { Step::Continue }
    }
}

/// The connection as the loop and the wing's frames share it.
pub(crate) struct Wire<'a> {
    pub(crate) adapter: &'a str,
    ws: Socket,
    pub(crate) live: Liveness,
    /// A write that cannot finish in this long is a dead write path, whatever reads say.
    pub(crate) write_timeout: Duration,
    fence: &'a Fence,
    grid: &'a Grid,
}

impl Wire<'_> {
    /// A text frame's text, for a platform that speaks JSON in text frames; every frame is
    /// proof that the read path works, and a pong answers the probe (and beats `heartbeat`,
    /// the adapter's own proof of life). `None`: nothing more to read in it.
    pub(crate) fn text_of(&mut self, msg: Message, heartbeat: &Heartbeat) -> Option<Utf8Bytes> {
        let now = Instant::now();
        match msg {
            Message::Text(text) => {
                self.live.on_inbound(now);
                Some(text)
            }
            Message::Pong(_) => {
                self.live.on_pong(now);
                heartbeat.beat();
                None
            }
            // Pings (answered by the library) and binary frames: the read path works, and
            // that is all they say.
            _ => {
                self.live.on_inbound(now);
                None
            }
        }
    }
}

impl<'a> Wire<'a> {
    pub(crate) fn new(
        adapter: &'a str,
        ws: Socket,
        live: Liveness,
        fence: &'a Fence,
        grid: &'a Grid,
    ) -> Self {
        let write_timeout = write_timeout(live.ack_timeout());
        Wire {
            adapter,
            ws,
            live,
            write_timeout,
            fence,
            grid,
        }
    }

    /// Change the probe's interval and answer deadline (a server that sets them).
    pub(crate) fn set_interval(&mut self, now: Instant, interval: Duration, ack: Duration) {
        self.live.set_interval(now, interval, ack);
        self.write_timeout = write_timeout(ack);
    }

    /// Run until the connection ends, the wing ends it, or `shutdown` (a close frame is sent,
    /// for at most a second).
    pub(crate) async fn drive<F: Frames>(
        &mut self,
        frames: &mut F,
        shutdown: &mut watch::Receiver<bool>,
    ) -> F::End {
        let stop = crate::gateway::until_shutdown(shutdown);
        tokio::pin!(stop);
        let mut timer = self.grid.deadline(Instant::now());
        loop {
            let wake = self.live.next_wakeup();
            timer.reset(wake);
            let step = tokio::select! {
                biased;
                _ = &mut stop => {
                    // What the platform already sent is handled (stored, acknowledged) before
                    // the close, within one answer deadline: a connection stopped for its
                    // successor may hold a frame the server pushed just before it moved.
                    if self.drain_readable(frames).await.is_none() {
                        let _ = timeout(Duration::from_secs(1), self.ws.send(Message::Close(None))).await;
                    }
                    Step::End(Ended::Shutdown.into())
                }
                _ = timer.elapsed() => self.on_timer(frames).await,
                frame = frames.outgoing() => frames.on_outgoing(self, frame).await,
                frame = self.ws.next() => match frame {
                    Some(Ok(msg)) => self.on_message(frames, msg).await,
                    Some(Err(e)) => {
                        tracing::debug!(adapter = %self.adapter, error = %e, "read failed");
                        Step::End(Ended::Closed(None).into())
                    }
                    None => Step::End(Ended::Closed(None).into()),
                },
            };
            if let Step::End(end) = step {
                return end;
            }
        }
    }

    async fn on_message<F: Frames>(&mut self, frames: &mut F, msg: Message) -> Step<F::End> {
        match msg {
            Message::Close(frame) => {
                Step::End(Ended::Closed(frame.map(|f| u16::from(f.code))).into())
            }
            msg => frames.on_message(self, msg).await,
        }
    }

    async fn on_timer<F: Frames>(&mut self, frames: &mut F) -> Step<F::End> {
        if self.live.overdue_with_traffic(Instant::now()) {
            if let Some(end) = self.drain_readable(frames).await {
                return Step::End(end);
            }
        }
        let now = Instant::now();
        frames.on_tick(now);
        while let Some(action) = self.live.poll(now) {
            match action {
                Action::Dead(z) => return Step::End(Ended::Zombie(z).into()),
                Action::SendHeartbeat | Action::SendPing => {
                    if let Err(end) = self.send(frames.probe()).await {
                        return Step::End(end.into());
                    }
                }
            }
        }
        Step::Continue
    }

    /// Handle every frame already readable, for at most one answer deadline.
    async fn drain_readable<F: Frames>(&mut self, frames: &mut F) -> Option<F::End> {
        let budget = self.live.ack_timeout();
        let started = Instant::now();
        loop {
            if started.elapsed() >= budget {
                self.live.fell_behind(Instant::now());
                return None;
            }
            match self.ws.next().now_or_never() {
                None => return None,
                Some(Some(Ok(msg))) => {
                    if let Step::End(end) = self.on_message(frames, msg).await {
                        return Some(end);
                    }
                }
                Some(Some(Err(_)) | None) => return Some(Ended::Closed(None).into()),
            }
        }
    }

    /// Write one frame under the write deadline, unless fenced.
    pub(crate) async fn send(&mut self, msg: Message) -> Result<(), Ended> {
        if !self.fence.holds() {
            return Err(Ended::Fenced);
        }
        match timeout(self.write_timeout, self.ws.send(msg)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                tracing::debug!(adapter = %self.adapter, error = %e, "write failed");
                Err(Ended::Closed(None))
            }
            Err(_) => Err(Ended::Zombie(Zombie::WritePathDead)),
        }
    }
}

fn write_timeout(ack: Duration) -> Duration {
    ack.max(Duration::from_millis(500))
}
