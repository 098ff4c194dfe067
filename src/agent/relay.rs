//! The connector side of Hermes's Relay: the gateway listens on a loopback port, the Hermes
//! gateway dials in (`GATEWAY_RELAY_URL`), and over that one WebSocket it is sent the chat
//! messages the adapters spooled and answers with the replies to post.
//!
//! One agent at a time: a new authenticated dial replaces the connection before it (a Hermes
//! that restarted, or re-dialled after a socket it thought dead). What the connector must do
//! because Hermes does not (docs/agent.md): deliver from a durable cursor, acknowledged by
//! Hermes (`feed.rs`); split replies to the platform's limit and keep them in order
//! (`outbound.rs`); refuse a dial without the profile's token (`auth.rs`), and bound what any
//! other dial may cost (`listen.rs`); and keep reading, and answering pings, while replies are
//! slow.

pub mod address;
pub mod auth;
pub mod frames;
mod listen;
pub mod outbound;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use self::address::{Routes, Wire};
use self::frames::{FromAgent, Lines};
pub use self::listen::bind;
use self::listen::Ws;
use self::outbound::ChatsSeen;
use self::wire::{split, write_frames, CLOSE_WAIT, WRITE_QUEUE};
use super::feed::Feed;
use super::link::Link;
use crate::gateway::outbox::Outbox;
use crate::gateway::until_shutdown;
use crate::media::fetch::Inbound;
use crate::platform::{Message, Normaliser};

/// Messages held in memory, in their chats' turns or waiting for them (a chat holds a few,
/// `chats.rs`, and parks the rest of its backlog): so also the most turns at once.
const WINDOW: usize = 32;

/// How long after its hello a Hermes is sent nothing, when chats are named by their platforms
/// (`platform-ids`): a starting Hermes 0.19.0 queues what arrives (about a second, observed),
/// then drops each queued message whose platform has no adapter of its own
/// (`_drain_startup_restore_queue`; `relay` is never dropped). Found by running it.
const STARTUP_HOLD: Duration = Duration::from_secs(4);

/// What the connector is configured with, apart from its socket.
pub struct Relay {
    pub id: String,
    pub secret: Vec<u8>,
    pub label: String,
    pub normaliser: Normaliser,
    pub outbox: Option<Arc<Outbox>>,
    pub appended: watch::Receiver<u64>,
    pub feed: Feed,
    pub link: Link,
    /// The longest the agent may take to answer a message before its chat goes on.
    pub turn_timeout: Duration,
    /// The media store, for a message's files, or why there is none.
    pub media: Result<Arc<Inbound>, String>,
    /// Name each chat to Hermes by its platform's own ids (`[agent] platform-ids`).
    pub platform_ids: bool,
}

impl Relay {
    /// Tell the link how long the oldest message has waited, while no agent is there; true
    /// once one is found (it stays the oldest until an agent takes it).
    fn note_oldest(&self) -> bool {
        match self
            .feed
            .oldest(|e| super::for_agent(&self.normaliser, e).is_some())
        {
            Ok(oldest) => {
                self.link
                    .waiting(oldest.as_ref().map(|e| e.received_at.as_str()));
                oldest.is_some()
            }
            Err(e) => {
                tracing::warn!(error = %crate::error_chain::one_line(&e), "cannot read the spool for the agent");
                false
            }
        }
    }
}

/// Serve Hermes on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    mut relay: Relay,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), String> {
    let (dialled, mut incoming) = mpsc::channel(1);
    let acceptor = tokio::spawn(listen::accept(
        listener,
        relay.id.clone(),
        relay.secret.clone(),
        relay.link.clone(),
        dialled,
    ));
    let seen = Arc::new(ChatsSeen::default());
    let routes = Arc::new(Routes::default());
    let mut appended = relay.appended.clone();
    let mut next = None;
    // Whether the oldest message waiting for an absent agent is known: once it is, a new
    // event does not change it, and the spool is not read again on every append.
    let mut oldest_known = false;
    let ended = loop {
        let ws = match next.take() {
            Some(ws) => ws,
            None => {
                // Seen before reading, so that an append during the read wakes the wait.
                appended.borrow_and_update();
                if !oldest_known {
                    oldest_known = relay.note_oldest();
                }
                tokio::select! {
                    ws = incoming.recv() => match ws {
                        Some(ws) => ws,
                        None => break Err("the relay's listener stopped".to_owned()),
                    },
                    _ = appended.changed() => continue,
                    () = until_shutdown(&mut shutdown) => break Ok(()),
                }
            }
        };
        relay.link.connected(true);
        let shared = (&seen, &routes);
        let end = session(ws, &mut relay, shared, &mut incoming, &mut shutdown).await;
        relay.feed.rewind();
        relay.link.connected(false);
        oldest_known = false;
        match end {
            End::Closed(why) => tracing::info!(reason = %why, "the agent's connection ended"),
            End::Replaced(ws) => {
                tracing::info!("the agent dialled again; the new connection replaces the old");
                next = Some(*ws);
            }
            End::Shutdown => break Ok(()),
            End::Gone(why) => break Err(why),
            // The spool or the cursor could not be read or written (out of descriptors, a
            // full disk): the connection is dropped, the agent dials again, and what it was
            // sent and did not take is sent again. Not a reason to restart the gateway, which
            // would meet the same.
            End::Failed(why) => {
                tracing::error!(reason = %why, "the agent's connection was dropped: the spool or its cursor failed; trying again in a second");
                relay.link.error(why);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = until_shutdown(&mut shutdown) => break Ok(()),
                }
            }
        }
    };
    acceptor.abort();
    ended
}

enum End {
    Closed(String),
    Replaced(Box<Ws>),
    Shutdown,
    /// The spool or the agent's cursor failed: this connection ends, the next may do better.
    Failed(String),
    /// What the relay serves from is gone (its listener, the spool): the run ends.
    Gone(String),
}

/// A message in its chat's turn, or waiting for it.
struct Delivery {
    buffer: String,
    message: Message,
    /// How the message's chat is named to Hermes.
    wire: Wire,
    /// When the turn is given up, once it started.
    deadline: Option<Instant>,
}

/// One connection's state: its frames, its chats' turns, and its writer.
struct Session<'a> {
    relay: &'a mut Relay,
    seen: &'a Arc<ChatsSeen>,
    routes: &'a Arc<Routes>,
    turns: crate::agent::chats::Chats<Delivery>,
    /// Frames for the agent, written by [`write_frames`]: a full queue is an agent that stopped
    /// reading.
    to_agent: mpsc::Sender<WsMessage>,
    /// Hermes's platform name, once it said hello; nothing is delivered before.
    platform: Option<String>,
    /// Hermes said it is going: nothing more is delivered on this connection.
    idle: bool,
    /// Nothing is delivered before this ([`STARTUP_HOLD`]).
    hold_until: Option<Instant>,
    /// The spool may hold more for the agent than was read: it grew, or a turn ended and made
    /// room. Frames that change neither (acks, replies to other chats) read nothing.
    unread: bool,
    /// Messages in their turn whose files are being fetched: each is sent when they are.
    fetching: tokio::task::JoinSet<(String, String, Message)>,
}

/// One connection, until it ends, another replaces it, or shutdown.
async fn session(
    ws: Ws,
    relay: &mut Relay,
    (seen, routes): (&Arc<ChatsSeen>, &Arc<Routes>),
    incoming: &mut mpsc::Receiver<Ws>,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    let (sink, mut stream) = ws.split();
    let (to_agent, frames_out) = mpsc::channel(WRITE_QUEUE);
    let mut writer = tokio::spawn(write_frames(sink, frames_out));
    let (actions, queued) = mpsc::channel(256);
    let (results_tx, mut results) = mpsc::channel(256);
    let worker = tokio::spawn(outbound::run(
        relay.outbox.clone(),
        (seen.clone(), routes.clone()),
        queued,
        results_tx,
    ));
    let mut appended = relay.appended.clone();
    let mut s = Session {
        relay,
        seen,
        routes,
        turns: Default::default(),
        to_agent,
        platform: None,
        idle: false,
        hold_until: None,
        unread: true,
        fetching: tokio::task::JoinSet::new(),
    };
    let mut lines = Lines::default();
    let mut typing = super::typing_ticks();
    let end = loop {
        if s.hold_until.is_some_and(|at| at <= Instant::now()) {
            s.hold_until = None;
            s.unread = true;
        }
        let open = s.platform.is_some() && !s.idle && s.hold_until.is_none();
        if open {
            // Seen before reading, so that an append during the read wakes the wait; one not
            // yet seen is something to read.
            if appended.has_changed().unwrap_or(true) {
                s.unread = true;
            }
            appended.borrow_and_update();
            if let Err(end) = s.deliver().await {
                break end;
            }
        }
        let deadline = s.turns.turns().filter_map(|(_, d)| d.deadline).min();
        let hold = s.hold_until;
        let held = async {
            match hold {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let turn_over = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            frame = stream.next() => {
                if let Err(end) = s.read(frame, &mut lines, &actions).await {
                    break end;
                }
            }
            result = results.recv() => {
                if let Some(frame) = result {
                    if let Err(end) = s.send(frame) {
                        break end;
                    }
                }
            }
            () = turn_over => s.give_up(Instant::now()),
            () = held => {}
            _ = typing.tick(), if deadline.is_some() => s.typing(),
            changed = appended.changed(), if open => {
                s.unread = true;
                if changed.is_err() {
                    break End::Gone("the spool closed".into());
                }
            }
            ws = incoming.recv() => match ws {
                Some(ws) => break End::Replaced(Box::new(ws)),
                None => break End::Gone("the relay's listener stopped".into()),
            },
            Some(fetched) = s.fetching.join_next(), if !s.fetching.is_empty() => {
                if let Ok((chat, buffer, message)) = fetched {
                    if let Err(end) = s.send_inbound(&chat, &buffer, &message) {
                        break end;
                    }
                }
            }
            ended = &mut writer => {
                break End::Closed(ended.unwrap_or_else(|e| format!("the relay's writer failed: {e}")));
            }
            () = until_shutdown(shutdown) => {
                // Said if the agent reads it soon; a writer stuck on an agent that does not
                // read is not waited for.
                let close = CloseFrame { code: CloseCode::Away, reason: "the gateway is stopping".into() };
                if s.to_agent.try_send(WsMessage::Close(Some(close))).is_ok() {
                    let _ = tokio::time::timeout(CLOSE_WAIT, &mut writer).await;
                }
                break End::Shutdown;
            }
        }
    };
    // A new connection, or shutdown, never waits on this one's writer.
    writer.abort();
    // Actions already queued finish (their messages are durable once submitted); their
    // results have nowhere to go.
    drop(worker);
    end
}

impl Session<'_> {
    /// One WebSocket message from the agent, its frames handled in order.
    async fn read(
        &mut self,
        message: Option<Result<WsMessage, tokio_tungstenite::tungstenite::Error>>,
        lines: &mut Lines,
        actions: &mpsc::Sender<outbound::Action>,
    ) -> Result<(), End> {
        let text = match message {
            Some(Ok(WsMessage::Text(t))) => t.to_string(),
            Some(Ok(WsMessage::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
            Some(Ok(WsMessage::Close(_))) | None => {
                return Err(End::Closed("the agent closed it".into()))
            }
            // Pings are answered by the socket itself.
            Some(Ok(_)) => return Ok(()),
            Some(Err(e)) => return Err(End::Closed(e.to_string())),
        };
        let frames = split(lines, text).await.map_err(End::Closed)?;
        self.handle(frames, actions).await
    }

    /// The typing indicator of every turn that has run a while.
    fn typing(&self) {
        let timeout = self.relay.turn_timeout;
        for (_, d) in self.turns.turns() {
            if let Some(started) = d.deadline.and_then(|at| at.checked_sub(timeout)) {
                super::typing(self.relay.outbox.as_deref(), &d.message, started);
            }
        }
    }

    async fn handle(
        &mut self,
        frames: Vec<Result<FromAgent, String>>,
        actions: &mpsc::Sender<outbound::Action>,
    ) -> Result<(), End> {
        for frame in frames {
            match frame {
                Ok(FromAgent::Hello { platform }) => {
                    let routes: Vec<_> = (self.relay.outbox.iter())
                        .flat_map(|o| o.routes().map(|(_, r)| r.clone()))
                        .collect();
                    let descriptor = frames::descriptor(&routes, &self.relay.label, &platform);
                    self.send(descriptor)?;
                    if self.platform.is_none() && self.relay.platform_ids {
                        self.hold_until = Some(Instant::now() + STARTUP_HOLD);
                    }
                    self.platform.get_or_insert(platform);
                }
                Ok(FromAgent::InboundAck { buffer_id }) => {
                    tracing::debug!(%buffer_id, "the agent took a message");
                }
                Ok(FromAgent::Outbound {
                    request_id,
                    platform,
                    action,
                }) => {
                    self.answered(platform.as_deref(), &action)?;
                    let action = outbound::Action {
                        request_id,
                        platform,
                        action,
                    };
                    if actions.try_send(action).is_err() {
                        tracing::warn!("the agent sends replies faster than they can be queued; closing its connection");
                        return Err(End::Closed("outbound overflow".into()));
                    }
                }
                Ok(FromAgent::GoingIdle) => {
                    self.idle = true;
                    self.send(frames::going_idle_ack())?;
                }
                Ok(FromAgent::Other { kind }) => {
                    tracing::debug!(%kind, "a relay frame with nothing to do here")
                }
                Err(why) => tracing::warn!(%why, "a relay frame that does not read"),
            }
        }
        Ok(())
    }

    /// Queue `frame` for the agent. An agent with [`WRITE_QUEUE`] frames it has not read ends
    /// its connection: the session must go on reading, taking a new dial over and stopping,
    /// whatever one client does.
    fn send(&mut self, frame: String) -> Result<(), End> {
        self.to_agent
            .try_send(WsMessage::text(frame))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => End::Closed(format!(
                    "the agent has not read the last {WRITE_QUEUE} frames sent to it"
                )),
                mpsc::error::TrySendError::Closed(_) => {
                    End::Closed("the connection's writer has stopped".into())
                }
            })
    }

    /// A turn ends with the one `send` that replies to its message with `notify` set (Hermes's
    /// final answer; notices carry neither); the message is then taken, and the chat's next
    /// one goes to the agent.
    fn answered(&mut self, platform: Option<&str>, action: &serde_json::Value) -> Result<(), End> {
        let reply_to = action["reply_to"].as_str();
        let Some(chat) = self.turn_of(platform, action) else {
            return Ok(());
        };
        let Some(d) = self.turns.in_turn(&chat) else {
            return Ok(());
        };
        let final_answer = action["metadata"]["notify"] == true;
        let matches = match (&d.message.said.message_id, reply_to) {
            (Some(id), Some(r)) => id == r,
            // A message without an id: its chat's final answer ends it.
            (None, _) => final_answer,
            (Some(_), None) => false,
        };
        if action["op"] == "send" && matches {
            if let Some(d) = self.turns.end(&chat) {
                self.take(&d.buffer)?;
            }
        }
        Ok(())
    }

    /// The chat whose turn `action` (tagged `platform`, or not) answers: of the turns of its
    /// `chat_id`, the one whose message its `reply_to` is, else the first.
    fn turn_of(&self, platform: Option<&str>, action: &serde_json::Value) -> Option<String> {
        let (chat, reply_to) = (action["chat_id"].as_str()?, action["reply_to"].as_str());
        let of_chat = |d: &Delivery| {
            d.wire.chat_id == chat
                && platform.is_none_or(|p| p == d.wire.platform || p == address::RELAY)
        };
        let mut turns = self.turns.turns().filter(|(_, d)| of_chat(d));
        let first = turns.next()?;
        let replied = std::iter::once(first)
            .chain(turns)
            .find(|(_, d)| reply_to.is_some() && d.message.said.message_id.as_deref() == reply_to);
        Some(replied.unwrap_or(first).0.to_owned())
    }

    fn take(&mut self, buffer: &str) -> Result<(), End> {
        // A taken message makes room in the window for more.
        self.unread = true;
        match self.relay.feed.ack(buffer) {
            Ok(Some(event)) => {
                self.relay.link.taken(&event);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(End::Failed(crate::error_chain::one_line(&e))),
        }
    }

    /// Send the message read as `buffer`, its files fetched, if it is still `chat`'s turn.
    fn send_inbound(&mut self, chat: &str, buffer: &str, message: &Message) -> Result<(), End> {
        let Some(d) = self.turns.in_turn(chat).filter(|d| d.buffer == buffer) else {
            return Ok(());
        };
        let frame = frames::inbound(message, &d.wire, buffer);
        self.send(frame)
    }

    /// Turns past their deadline are given up: the agent did not answer in time, and the
    /// chat's next message goes to it.
    fn give_up(&mut self, now: Instant) {
        let late: Vec<String> = self
            .turns
            .turns()
            .filter(|(_, d)| d.deadline.is_some_and(|at| at <= now))
            .map(|(chat, _)| chat.to_owned())
            .collect();
        for chat in late {
            if let Some(d) = self.turns.end(&chat) {
                tracing::warn!(%chat, "the agent did not answer within turn-timeout; the chat's next message goes on");
                self.relay
                    .link
                    .error(format!("no answer within turn-timeout in {chat}"));
                if let Err(End::Failed(why)) = self.take(&d.buffer) {
                    tracing::warn!(%why, "cannot record a given-up turn");
                }
            }
        }
    }

    /// Read what the window has room for into the chats, and send each chat that has no turn
    /// its next message.
    async fn deliver(&mut self) -> Result<(), End> {
        let room = self.relay.feed.room(WINDOW, self.turns.held());
        let normaliser = &self.relay.normaliser;
        let hello = self
            .platform
            .clone()
            .unwrap_or_else(|| address::RELAY.into());
        let ids = self.relay.platform_ids;
        let read = |e: &crate::gateway::spool::Event| {
            let message = super::for_agent(normaliser, e)?;
            let wire = address::wire(&message, e, &hello, ids);
            Some((message, wire))
        };
        let batch = if std::mem::take(&mut self.unread) {
            self.relay
                .feed
                .read(room, read)
                .map_err(|e| End::Failed(crate::error_chain::one_line(&e)))?
        } else {
            vec![]
        };
        // A read that found something may have left more behind it: read again next time.
        self.unread |= !batch.is_empty();
        for (buffer, (message, wire)) in batch {
            self.turns.push(
                address::adapter_target(&message),
                buffer.clone(),
                Delivery {
                    buffer,
                    message,
                    wire,
                    deadline: None,
                },
            );
        }
        let deadline = Instant::now() + self.relay.turn_timeout;
        let feed = &mut self.relay.feed;
        let started = self.turns.start(
            false,
            |buffer| {
                Ok::<_, super::feed::FeedError>(feed.fetch(buffer)?.and_then(|e| {
                    let (message, wire) = read(&e)?;
                    Some(Delivery {
                        buffer: buffer.to_owned(),
                        message,
                        wire,
                        deadline: None,
                    })
                }))
            },
            |d| &d.buffer,
        );
        for passed in &started.passed {
            self.take(passed)?;
        }
        if let Some(e) = started.error {
            return Err(End::Failed(crate::error_chain::one_line(&e)));
        }
        for chat in started.chats {
            let Some(d) = self.turns.in_turn_mut(&chat) else {
                continue;
            };
            d.deadline = Some(deadline);
            self.seen.saw(&d.wire, &d.message);
            self.routes.learn(&d.wire, &d.message);
            if d.message.said.media.is_empty() {
                let frame = frames::inbound(&d.message, &d.wire, &d.buffer);
                self.send(frame)?;
            } else {
                // Its files first, off the session: the connection goes on meanwhile.
                let (media, buffer, message) = (
                    self.relay.media.clone(),
                    d.buffer.clone(),
                    d.message.clone(),
                );
                self.fetching.spawn(async move {
                    let inbound = media.as_deref().map_err(String::as_str);
                    let message = super::media::localise(inbound, message).await;
                    (chat, buffer, message)
                });
            }
        }
        self.relay.link.waiting(self.relay.feed.oldest_waiting());
        Ok(())
    }
}
