//! The op-code gateway's state, shared by the listener's upgrades, the connection tasks, the
//! generator and the handle.
//!
//! One mutex guards sessions, the connection registry and the event log together so that
//! "generate a dispatch, buffer it, hand it to the attached connection" and "attach a
//! connection, compute the replay" are atomic with respect to each other: a resume can then
//! never miss or duplicate an event generated concurrently.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Utf8Bytes;

use super::super::config::MockConfig;
use super::super::fault::{Fault, FaultSwitch};
use super::super::stats::{bump, ConnectionSpan, Counters, MockStats};
use super::command::{Command, Outgoing};
use super::frames;
use super::session::{Attachment, Session};

/// The gateway both platforms' clients connect to, and its side of the mock (`Side` is
/// implemented in `opcode_gateway.rs`): what the config fixed at start, and what changes.
pub(crate) struct Gateway {
    /// Advertised in Hello.
    pub(crate) heartbeat_interval: Duration,
    /// When set, an Identify asking for an intent outside these is closed with 4014.
    pub(crate) granted_intents: Option<u64>,
    /// When set, a token that is not a QQ access token must be this one.
    expected_token: Option<String>,
    /// Sent as READY's `resume_gateway_url`.
    resume_gateway_url: Option<String>,
    /// The generator's period, if it runs.
    pub(crate) dispatch_every: Option<Duration>,
    pub(crate) counters: Arc<Counters>,
    /// The armed fault, which the listener reads too.
    fault: Arc<FaultSwitch>,
    inner: Mutex<Inner>,
}

struct Inner {
    advertised_ws_url: String,
    sessions: HashMap<String, Session>,
    /// Every open WebSocket connection, so faults can reach connections that never identified.
    conns: HashMap<u64, mpsc::UnboundedSender<Command>>,
    event_ids: Vec<String>,
    last_resume_seq: Option<u64>,
    /// QQ access tokens the platform still honours.
    access_tokens: HashSet<String>,
    identify_times: Vec<std::time::Instant>,
    resume_times: Vec<std::time::Instant>,
    connection_times: Vec<std::time::Instant>,
    spans: Vec<ConnectionSpan>,
}

impl Gateway {
    pub(crate) fn new(
        config: &MockConfig,
        advertised_ws_url: String,
        counters: Arc<Counters>,
        fault: Arc<FaultSwitch>,
    ) -> Gateway {
        Gateway {
            heartbeat_interval: config.heartbeat_interval,
            granted_intents: config.granted_intents,
            expected_token: config.expected_token.clone(),
            resume_gateway_url: config.resume_gateway_url.clone(),
            dispatch_every: config.dispatch_every,
            counters,
            fault,
            inner: Mutex::new(Inner {
                advertised_ws_url,
                sessions: HashMap::new(),
                conns: HashMap::new(),
                event_ids: Vec::new(),
                last_resume_seq: None,
                access_tokens: HashSet::new(),
                identify_times: Vec::new(),
                resume_times: Vec::new(),
                connection_times: Vec::new(),
                spans: Vec::new(),
            }),
        }
    }

    /// A panic elsewhere must not turn every later call into a panic too; the state is plain
    /// data that stays consistent between statements.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn fault(&self) -> Fault {
        self.fault.get()
    }

    pub(crate) fn set_fault(&self, fault: Fault) {
        let mut inner = self.lock();
        let conns = inner.conns.len();
        let lasting = match fault {
            Fault::Close(code) => {
                inner.broadcast(|| Command::Close(code));
                Fault::None
            }
            Fault::Reconnect => {
                inner.broadcast(|| Command::Send(Outgoing::control(frames::reconnect())));
                Fault::None
            }
            Fault::InvalidSession(resumable) => {
                let frame = frames::invalid_session(resumable);
                inner.broadcast(|| Command::Send(Outgoing::control(frame.clone())));
                if !resumable {
                    inner.sessions.retain(|_, s| s.attached.is_none());
                }
                Fault::None
            }
            Fault::Silent => {
                // Detach under the lock so nothing generated after this call is handed to a
                // connection that is about to go quiet; it stays buffered for a resume.
                for session in inner.sessions.values_mut() {
                    session.attached = None;
                }
                inner.broadcast(|| Command::Silence);
                fault
            }
            Fault::DropClientFrames => {
                inner.broadcast(|| Command::StopReading);
                fault
            }
            other => other,
        };
        self.fault.set(lasting);
        tracing::info!(?fault, connections = conns, "mock fault set");
    }

    pub(crate) fn advertised_ws_url(&self) -> String {
        self.lock().advertised_ws_url.clone()
    }

    pub(crate) fn set_advertised_ws_url(&self, url: String) {
        self.lock().advertised_ws_url = url;
    }

    pub(crate) fn next_access_token(&self) -> String {
        let n = self.counters.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        let token = format!("mock-access-{n}");
        self.lock().access_tokens.insert(token.clone());
        token
    }

    pub(crate) fn expire_access_tokens(&self) {
        self.lock().access_tokens.clear();
    }

    /// Does the platform accept this Identify/Resume token? A QQ token (`QQBot <access
    /// token>`) must be one the token endpoint issued and has not expired; any other token
    /// must match `expected_token` when that is set.
    pub(crate) fn token_accepted(&self, token: &str) -> bool {
        match token.strip_prefix("QQBot ") {
            Some(access) => self.lock().access_tokens.contains(access),
            None => self
                .expected_token
                .as_deref()
                .is_none_or(|expected| expected == token),
        }
    }

    pub(super) fn record_identify(&self) {
        self.lock().identify_times.push(std::time::Instant::now());
    }

    pub(super) fn register(&self, tx: mpsc::UnboundedSender<Command>) -> u64 {
        let conn_id = self.counters.next_conn_id.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.lock();
        inner.conns.insert(conn_id, tx);
        let now = std::time::Instant::now();
        inner.connection_times.push(now);
        inner.spans.push(ConnectionSpan {
            conn: conn_id,
            opened: now,
            first_frame: None,
            last_frame: None,
            closed: None,
        });
        drop(inner);
        bump(&self.counters.connections);
        bump(&self.counters.live_connections);
        conn_id
    }

    /// The client of `conn_id` sent a frame.
    pub(super) fn client_frame(&self, conn_id: u64) {
        let now = std::time::Instant::now();
        if let Some(span) = self
            .lock()
            .spans
            .iter_mut()
            .rev()
            .find(|s| s.conn == conn_id)
        {
            span.first_frame.get_or_insert(now);
            span.last_frame = Some(now);
        }
    }

    pub(super) fn unregister(&self, conn_id: u64, session_id: Option<&str>) {
        let mut inner = self.lock();
        inner.conns.remove(&conn_id);
        if let Some(span) = inner.spans.iter_mut().rev().find(|s| s.conn == conn_id) {
            span.closed = Some(std::time::Instant::now());
        }
        if let Some(sid) = session_id {
            inner.detach(conn_id, sid);
        }
        drop(inner);
        self.counters
            .live_connections
            .fetch_sub(1, Ordering::Relaxed);
    }

    /// The client closed with 1000 or 1001: its session can no longer be resumed.
    pub(super) fn end_session(&self, session_id: &str) {
        self.lock().sessions.remove(session_id);
    }

    pub(super) fn detach(&self, conn_id: u64, session_id: &str) {
        self.lock().detach(conn_id, session_id);
    }

    /// Creates a session attached to `conn_id` and returns its id and READY frame.
    pub(super) fn identify(
        &self,
        conn_id: u64,
        tx: mpsc::UnboundedSender<Utf8Bytes>,
    ) -> (String, Utf8Bytes) {
        let session_id = Session::new_id();
        let mut session = Session::new();
        let resume_url = self.resume_gateway_url.as_deref();
        let ready = frames::ready(session.next_seq(), &session_id, resume_url);
        session.attached = Some(Attachment { conn_id, tx });
        self.lock().sessions.insert(session_id.clone(), session);
        (session_id, ready)
    }

    /// Attaches `conn_id` to an existing session and returns the dispatches to replay followed
    /// by the RESUMED frame, or `None` for an unknown session. Later dispatches go to the
    /// connection's queue, which it drains only after sending these, so order is preserved.
    pub(super) fn resume(
        &self,
        conn_id: u64,
        tx: mpsc::UnboundedSender<Utf8Bytes>,
        session_id: &str,
        seq: u64,
    ) -> Option<(Vec<Utf8Bytes>, Utf8Bytes)> {
        let mut inner = self.lock();
        let session = inner.sessions.get_mut(session_id)?;
        let missed = session.missed_since(seq);
        let resumed = frames::resumed(session.next_seq());
        if let Some(previous) = session.attached.replace(Attachment { conn_id, tx }) {
            tracing::debug!(
                session_id,
                previous_conn = previous.conn_id,
                conn_id,
                "session taken over by resume"
            );
        }
        inner.last_resume_seq = Some(seq);
        inner.resume_times.push(std::time::Instant::now());
        Some((missed, resumed))
    }

    /// Generates `n` dispatches in every session, buffered for resume and handed to the
    /// attached connection if there is one.
    ///
    /// Works in chunks, releasing the lock between them: connection tasks need the same lock
    /// to answer heartbeats, and a large `emit` must not make the platform itself go silent.
    pub(crate) fn generate(&self, n: usize) {
        const CHUNK: usize = 256;
        let mut left = n;
        while left > 0 {
            let now = left.min(CHUNK);
            left -= now;
            let mut guard = self.lock();
            let Inner {
                sessions,
                event_ids,
                ..
            } = &mut *guard;
            for _ in 0..now {
                for session in sessions.values_mut() {
                    let number = event_ids.len() as u64 + 1;
                    let seq = session.next_seq();
                    event_ids.push(frames::event_id(number));
                    deliver(session, seq, frames::message_create(seq, number));
                }
            }
        }
    }

    /// One dispatch with the caller's `t`, top-level `id` and `d`, exactly as given, in every
    /// session: the platform as an attacker would run it.
    pub(crate) fn generate_dispatch(&self, kind: &str, id: &str, d: &serde_json::Value) {
        let mut guard = self.lock();
        let Inner {
            sessions,
            event_ids,
            ..
        } = &mut *guard;
        for session in sessions.values_mut() {
            let seq = session.next_seq();
            event_ids.push(id.to_owned());
            deliver(session, seq, frames::dispatch(seq, kind, id, d));
        }
    }

    pub(crate) fn event_ids(&self) -> Vec<String> {
        self.lock().event_ids.clone()
    }

    pub(crate) fn stats(&self) -> MockStats {
        let c = &self.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let inner = self.lock();
        MockStats {
            connections: load(&c.connections),
            live_connections: load(&c.live_connections),
            identifies: load(&c.identifies),
            resumes: load(&c.resumes),
            heartbeats: load(&c.heartbeats),
            acks: load(&c.acks),
            dispatches_sent: load(&c.dispatches_sent),
            events_generated: inner.event_ids.len() as u64,
            http_requests: load(&c.http_requests),
            last_resume_seq: inner.last_resume_seq,
            identify_times: inner.identify_times.clone(),
            resume_times: inner.resume_times.clone(),
            token_rejections: load(&c.token_rejections),
            connection_times: inner.connection_times.clone(),
            ws_pings: load(&c.ws_pings),
            spans: inner.spans.clone(),
        }
    }
}

/// Buffer `frame` for resume and hand it to the attached connection, if any.
fn deliver(session: &mut Session, seq: u64, frame: Utf8Bytes) {
    session.record(seq, frame.clone());
    if let Some(attachment) = &session.attached {
        let delivered = attachment.tx.send(frame).is_ok();
        if !delivered {
            session.attached = None;
        }
    }
}

impl Inner {
    fn broadcast(&self, command: impl Fn() -> Command) {
        for tx in self.conns.values() {
            // A closed receiver means the connection is on its way out; nothing to tell it.
            let _ = tx.send(command());
        }
    }

    fn detach(&mut self, conn_id: u64, session_id: &str) {
        if let Some(session) = self.sessions.get_mut(session_id) {
            if session.is_attached_to(conn_id) {
                session.attached = None;
            }
        }
    }
}
