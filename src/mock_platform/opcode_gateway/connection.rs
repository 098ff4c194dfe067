//! One WebSocket connection: a single task that reads client frames, writes server frames and
//! obeys fault commands. Everything it writes goes through one timed queue so that `Slow` and
//! `SlowAck` delay frames without stalling the reader or reordering the stream.
//!
//! Fault commands and dispatches arrive on separate channels because faults must win every
//! race: a test that sets `DropClientFrames` and then sends a Ping must never see a Pong, so
//! pending commands are always handled before the socket is read again, while dispatches
//! queue behind reads so a busy generator cannot starve heartbeats.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::super::fault::Fault;
use super::super::shutdown::stopped;
use super::super::stats::bump;
use super::super::websocket::{close, hold_silently, Ws};
use super::command::{Command, Kind, Outgoing};
use super::frames::{self, ClientFrame};
use super::state::Gateway;

/// Dispatches moved from the channel to the write queue per wakeup, so a burst is written
/// with one flush without letting a huge burst delay the next read indefinitely.
const DISPATCH_BATCH: usize = 512;

/// Close codes the mock uses on its own account (besides `Fault::Close`).
const CLOSE_DECODE_ERROR: u16 = 4002;
const CLOSE_AUTHENTICATION_FAILED: u16 = 4004;
/// QQ's "intent 无权限" and Discord's "disallowed intents".
const CLOSE_INTENT_NOT_PERMITTED: u16 = 4014;

struct Queued {
    due: Instant,
    out: Outgoing,
}

enum Flow {
    Continue,
    Close(u16),
    Silence,
}

/// How the main loop ended, and so what is left to do with the socket.
enum End {
    Gone,
    Close(u16),
    Silence,
}

pub(super) async fn run(
    ws: Ws,
    shared: Arc<Gateway>,
    mut shutdown: watch::Receiver<bool>,
    hello: bool,
) {
    let (commands_tx, commands) = mpsc::unbounded_channel();
    let (dispatch_tx, dispatches) = mpsc::unbounded_channel();
    let conn_id = shared.register(commands_tx);
    tracing::debug!(conn_id, hello, "mock connection opened");
    let mut conn = Connection {
        shared,
        conn_id,
        dispatch_tx,
        dispatches,
        commands,
        session: None,
        outbound: VecDeque::new(),
        pending_acks: VecDeque::new(),
        reading: true,
    };
    if hello {
        let frame = frames::hello(conn.shared.heartbeat_interval);
        conn.enqueue(Outgoing::control(frame));
    }
    let (mut sink, mut stream) = ws.split();
    let end = conn.serve(&mut sink, &mut stream, &mut shutdown).await;
    match end {
        End::Gone => {}
        End::Close(code) => close(sink, stream, code).await,
        End::Silence => {
            conn.commands.close();
            conn.dispatches.close();
            if let Ok(ws) = stream.reunite(sink) {
                hold_silently(ws, &mut shutdown).await;
            }
        }
    }
    tracing::debug!(conn_id, "mock connection closed");
}

struct Connection {
    shared: Arc<Gateway>,
    conn_id: u64,
    /// Handed to the session on identify/resume so the generator can reach this connection.
    dispatch_tx: mpsc::UnboundedSender<Utf8Bytes>,
    dispatches: mpsc::UnboundedReceiver<Utf8Bytes>,
    commands: mpsc::UnboundedReceiver<Command>,
    session: Option<String>,
    outbound: VecDeque<Queued>,
    pending_acks: VecDeque<Instant>,
    reading: bool,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // In Drop rather than at the end of `run` so an aborted task is unregistered too.
        self.shared
            .unregister(self.conn_id, self.session.as_deref());
    }
}

impl Connection {
    async fn serve(
        &mut self,
        sink: &mut SplitSink<Ws, Message>,
        stream: &mut SplitStream<Ws>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> End {
        loop {
            self.release_due_acks();
            if let Err(error) = self.write_due(sink).await {
                tracing::debug!(conn_id = self.conn_id, %error, "mock connection write failed");
                return End::Gone;
            }
            let wake = [
                self.outbound.front().map(|q| q.due),
                self.pending_acks.front().copied(),
            ]
            .into_iter()
            .flatten()
            .min();
            let flow = tokio::select! {
                biased;
                _ = stopped(shutdown) => return End::Gone,
                Some(command) = self.commands.recv() => self.on_command(command),
                message = stream.next(), if self.reading => match message {
                    Some(Ok(message)) => self.on_message(message),
                    Some(Err(error)) => {
                        tracing::debug!(conn_id = self.conn_id, %error, "mock connection read failed");
                        return End::Gone;
                    }
                    None => return End::Gone,
                },
                Some(frame) = self.dispatches.recv() => {
                    self.enqueue(Outgoing::dispatch(frame));
                    for _ in 1..DISPATCH_BATCH {
                        match self.dispatches.try_recv() {
                            Ok(frame) => self.enqueue(Outgoing::dispatch(frame)),
                            Err(_) => break,
                        }
                    }
                    Flow::Continue
                }
                _ = sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                    Flow::Continue
                }
            };
            match flow {
                Flow::Continue => {}
                Flow::Close(code) => {
                    // What was queued before the close (a READY, a replay) goes out first, as
                    // on a real server, where frames are written in the order they were made.
                    for queued in &mut self.outbound {
                        queued.due = Instant::now();
                    }
                    let _ = self.write_due(sink).await;
                    return End::Close(code);
                }
                Flow::Silence => return End::Silence,
            }
        }
    }

    async fn write_due(
        &mut self,
        sink: &mut SplitSink<Ws, Message>,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        let now = Instant::now();
        let mut wrote = false;
        while self.outbound.front().is_some_and(|q| q.due <= now) {
            let Some(queued) = self.outbound.pop_front() else {
                break;
            };
            sink.feed(Message::Text(queued.out.frame)).await?;
            match queued.out.kind {
                Kind::Dispatch => bump(&self.shared.counters.dispatches_sent),
                Kind::Ack => bump(&self.shared.counters.acks),
                Kind::Control => {}
            }
            wrote = true;
        }
        if wrote {
            sink.flush().await?;
        }
        Ok(())
    }

    fn release_due_acks(&mut self) {
        let now = Instant::now();
        while self.pending_acks.front().is_some_and(|due| *due <= now) {
            self.pending_acks.pop_front();
            self.enqueue(Outgoing::ack());
        }
    }

    fn enqueue(&mut self, out: Outgoing) {
        let delay = match self.shared.fault() {
            Fault::Slow(delay) => delay,
            _ => Duration::ZERO,
        };
        self.outbound.push_back(Queued {
            due: Instant::now() + delay,
            out,
        });
    }

    fn on_command(&mut self, command: Command) -> Flow {
        match command {
            Command::Send(out) => {
                self.enqueue(out);
                Flow::Continue
            }
            Command::Close(code) => Flow::Close(code),
            Command::Silence => {
                tracing::info!(conn_id = self.conn_id, "mock connection silenced");
                Flow::Silence
            }
            Command::StopReading => {
                tracing::info!(conn_id = self.conn_id, "mock connection stopped reading");
                self.reading = false;
                Flow::Continue
            }
        }
    }

    fn on_message(&mut self, message: Message) -> Flow {
        self.shared.client_frame(self.conn_id);
        match message {
            Message::Text(text) => self.on_payload(text.as_bytes()),
            Message::Binary(bytes) => self.on_payload(&bytes),
            // Pings are answered by tungstenite while reading; a client Close is answered the
            // same way and the next read then ends the stream.
            Message::Ping(_) => {
                bump(&self.shared.counters.ws_pings);
                Flow::Continue
            }
            // Discord's gateway docs: a client that closes with 1000 or 1001 ends its session
            // (the bot goes offline); any other code leaves it resumable.
            Message::Close(Some(frame)) if matches!(u16::from(frame.code), 1000 | 1001) => {
                if let Some(sid) = &self.session {
                    self.shared.end_session(sid);
                }
                Flow::Continue
            }
            Message::Pong(_) | Message::Close(_) | Message::Frame(_) => Flow::Continue,
        }
    }

    fn on_payload(&mut self, payload: &[u8]) -> Flow {
        let frame = match frames::parse(payload) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::warn!(conn_id = self.conn_id, %error, "mock got an undecodable client frame");
                return Flow::Close(CLOSE_DECODE_ERROR);
            }
        };
        match frame {
            ClientFrame::Heartbeat => {
                bump(&self.shared.counters.heartbeats);
                match self.shared.fault() {
                    Fault::NoAck => {}
                    Fault::SlowAck(delay) => self.pending_acks.push_back(Instant::now() + delay),
                    _ => self.enqueue(Outgoing::ack()),
                }
                Flow::Continue
            }
            ClientFrame::Identify { token, intents } => {
                bump(&self.shared.counters.identifies);
                self.shared.record_identify();
                if !self.token_accepted(&token) {
                    return Flow::Close(CLOSE_AUTHENTICATION_FAILED);
                }
                if let Some(granted) = self.shared.granted_intents {
                    if intents.unwrap_or(0) & !granted != 0 {
                        tracing::info!(
                            conn_id = self.conn_id,
                            ?intents,
                            granted,
                            "mock refused intents"
                        );
                        return Flow::Close(CLOSE_INTENT_NOT_PERMITTED);
                    }
                }
                if self.shared.fault() == Fault::RejectIdentify {
                    self.enqueue(Outgoing::control(frames::invalid_session(false)));
                    return Flow::Continue;
                }
                self.leave_session();
                let (session_id, ready) =
                    self.shared.identify(self.conn_id, self.dispatch_tx.clone());
                tracing::info!(conn_id = self.conn_id, %session_id, "mock session identified");
                self.session = Some(session_id);
                self.enqueue(Outgoing::control(ready));
                Flow::Continue
            }
            ClientFrame::Resume {
                token,
                session_id,
                seq,
            } => {
                bump(&self.shared.counters.resumes);
                if !self.token_accepted(&token) {
                    return Flow::Close(CLOSE_AUTHENTICATION_FAILED);
                }
                self.leave_session();
                match self
                    .shared
                    .resume(self.conn_id, self.dispatch_tx.clone(), &session_id, seq)
                {
                    Some((missed, resumed)) => {
                        tracing::info!(
                            conn_id = self.conn_id,
                            %session_id,
                            seq,
                            replayed = missed.len(),
                            "mock session resumed"
                        );
                        let pace = match self.shared.fault() {
                            Fault::SlowReplay(pace) => pace,
                            _ => Duration::ZERO,
                        };
                        let start = Instant::now();
                        for (i, frame) in missed.into_iter().enumerate() {
                            self.enqueue(Outgoing::dispatch(frame));
                            if let Some(last) = self.outbound.back_mut() {
                                last.due = last.due.max(start + pace * (i as u32 + 1));
                            }
                        }
                        self.enqueue(Outgoing::control(resumed));
                        self.session = Some(session_id);
                        if let Fault::CloseAfterResume(code) = self.shared.fault() {
                            return Flow::Close(code);
                        }
                    }
                    None => {
                        tracing::info!(conn_id = self.conn_id, %session_id, "mock resume of unknown session");
                        self.enqueue(Outgoing::control(frames::invalid_session(false)));
                    }
                }
                Flow::Continue
            }
            ClientFrame::Other(op) => {
                tracing::debug!(conn_id = self.conn_id, op, "mock ignored client opcode");
                Flow::Continue
            }
        }
    }

    fn token_accepted(&self, token: &str) -> bool {
        let accepted = self.shared.token_accepted(token);
        if !accepted {
            bump(&self.shared.counters.token_rejections);
            tracing::warn!(conn_id = self.conn_id, "mock rejected a client token");
        }
        accepted
    }

    /// Detaches first, then discards what the old attachment had queued: after the detach
    /// nothing new can arrive, so everything discarded is buffered in its session and a
    /// resume on this same connection replays it once instead of twice.
    fn leave_session(&mut self) {
        if let Some(previous) = self.session.take() {
            self.shared.detach(self.conn_id, &previous);
            while self.dispatches.try_recv().is_ok() {}
        }
    }
}
