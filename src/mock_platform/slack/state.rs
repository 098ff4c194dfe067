//! The mock Slack's one app: the URLs it issued, its open connections, every event and the
//! envelopes still waiting for an ack. Connections are told what to write through a channel
//! each, so the state never holds a socket.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use super::config::SlackConfig;
use super::faults::{OpenRefusal, SlackFault};
use super::record::{SlackEventRecord, SlackStats};

/// What a connection's task is told to do.
pub(crate) enum ConnCommand {
    /// Write this text frame.
    Push(String),
    Fault(SlackFault),
}

/// How an upgrade with a good ticket was admitted.
pub(crate) enum Admitted {
    /// Registered: `hello` says `num_connections`.
    Open {
        conn_id: u64,
        num_connections: usize,
    },
    /// Over the app's limit, or Socket Mode is off: told so with a `disconnect` and closed.
    Refused(&'static str),
}

/// Why `apps.connections.open` gave no URL.
pub(crate) enum OpenError {
    /// `{"ok": false, "error": CODE}` with HTTP 200.
    Code(String),
    RateLimited(u64),
}

struct Conn {
    tx: mpsc::UnboundedSender<ConnCommand>,
}

/// An event's delivery waiting for its ack.
struct Pending {
    envelope_id: String,
    attempt: u32,
    due: Instant,
}

#[derive(Default)]
struct Inner {
    /// Issued and not yet used.
    tickets: HashSet<String>,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    /// Round robin over the open connections: "each payload may be sent to any of the
    /// connections".
    turn: u64,
    events: Vec<SlackEventRecord>,
    payloads: Vec<Value>,
    /// Every envelope ever sent, to its event: an ack of any of them settles the event.
    envelopes: HashMap<String, usize>,
    /// By event.
    pending: HashMap<usize, Pending>,
    /// Events emitted while no connection was open, delivered to the next one.
    waiting: VecDeque<usize>,
    serial: u64,
    refusal: Option<OpenRefusal>,
    revoked: bool,
    socket_mode_off: bool,
    stats: SlackStats,
}

pub(crate) struct SlackState {
    pub(crate) config: SlackConfig,
    /// The Socket Mode URL before its query, as `apps.connections.open` hands it out.
    ws_url: Mutex<String>,
    inner: Mutex<Inner>,
    /// Woken when an envelope gets a deadline, for the redelivery timer.
    pub(crate) wake: Notify,
}

/// The Web API token checks, in Slack's words.
pub(crate) enum Token {
    App,
    Bot,
}

impl SlackState {
    pub(crate) fn new(config: SlackConfig, ws_url: String) -> SlackState {
        SlackState {
            config,
            ws_url: Mutex::new(ws_url),
            inner: Mutex::new(Inner::default()),
            wake: Notify::new(),
        }
    }

    /// A panic elsewhere must not poison the state for every later assertion.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_ws_url(&self, url: String) {
        *self.ws_url.lock().unwrap_or_else(PoisonError::into_inner) = url;
    }

    /// The error code for a request whose `Authorization` is `bearer`, when it is not the
    /// token `wanted`.
    pub(crate) fn refuse_token(&self, bearer: Option<&str>, wanted: Token) -> Option<String> {
        let config = &self.config;
        let (right, other) = match wanted {
            Token::App => (&config.app_token, &config.bot_token),
            Token::Bot => (&config.bot_token, &config.app_token),
        };
        let code = match bearer {
            None | Some("") => "not_authed",
            Some(t) if t == right && self.lock().revoked => "token_revoked",
            Some(t) if t == right => return None,
            Some(t) if t == other => "not_allowed_token_type",
            Some(_) => "invalid_auth",
        };
        Some(code.to_owned())
    }

    /// `apps.connections.open` for a request that passed the token check: a URL good for one
    /// connection.
    pub(crate) fn open(&self) -> Result<String, OpenError> {
        let mut inner = self.lock();
        let refused = match &inner.refusal {
            Some(OpenRefusal::Error(code)) => Some(OpenError::Code(code.clone())),
            Some(OpenRefusal::RateLimited(secs)) => Some(OpenError::RateLimited(*secs)),
            None => None,
        };
        if let Some(refused) = refused {
            inner.stats.opens_refused += 1;
            return Err(refused);
        }
        inner.serial += 1;
        let ticket = format!("mock-ticket-{:08x}", inner.serial);
        inner.tickets.insert(ticket.clone());
        inner.stats.urls_issued += 1;
        let base = self.ws_url.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(format!(
            "{base}?ticket={ticket}&app_id={}",
            self.config.app_id
        ))
    }

    pub(crate) fn refused_open(&self) {
        self.lock().stats.opens_refused += 1;
    }

    /// Takes the ticket: each URL opens one connection.
    pub(crate) fn take_ticket(&self, ticket: &str) -> bool {
        let mut inner = self.lock();
        let taken = inner.tickets.remove(ticket);
        if !taken {
            inner.stats.tickets_refused += 1;
        }
        taken
    }

    pub(crate) fn register(&self, tx: mpsc::UnboundedSender<ConnCommand>) -> Admitted {
        let mut inner = self.lock();
        if inner.socket_mode_off {
            return Admitted::Refused("link_disabled");
        }
        if inner.conns.len() >= self.config.max_connections {
            return Admitted::Refused("too_many_websockets");
        }
        inner.next_conn += 1;
        let conn_id = inner.next_conn;
        inner.conns.insert(conn_id, Conn { tx });
        inner.stats.connections += 1;
        inner.stats.connection_times.push(Instant::now());
        let num_connections = inner.conns.len();
        inner.stats.peak_connections = inner.stats.peak_connections.max(num_connections as u64);
        // Pushed after `hello`: the connection writes `hello` before it reads its commands.
        while let Some(event) = inner.waiting.pop_front() {
            self.deliver(&mut inner, event, 0, None);
        }
        Admitted::Open {
            conn_id,
            num_connections,
        }
    }

    pub(crate) fn unregister(&self, conn_id: u64) {
        self.lock().conns.remove(&conn_id);
    }

    /// A new event: a message in `channel`, from the mock's user or (`own`) the bot itself.
    pub(crate) fn emit(
        &self,
        channel: &str,
        text: &str,
        thread_ts: Option<&str>,
        own: bool,
    ) -> String {
        self.emit_event(channel, text, thread_ts, own, None)
    }

    /// A `file_share` message from the mock's user in `channel` carrying `files` (file
    /// objects, as `user_files.rs` makes them); its event id.
    pub(crate) fn emit_files(&self, channel: &str, text: &str, files: Vec<Value>) -> String {
        self.emit_event(channel, text, None, false, Some(files))
    }

    fn emit_event(
        &self,
        channel: &str,
        text: &str,
        thread_ts: Option<&str>,
        own: bool,
        files: Option<Vec<Value>>,
    ) -> String {
        let mut inner = self.lock();
        inner.serial += 1;
        let serial = inner.serial;
        let event_id = format!("Ev0MOCK{serial:08}");
        let now_unix = unix_secs();
        let ts = format!("{now_unix}.{:06}", serial % 1_000_000);
        let config = &self.config;
        let mut event = json!({
            "type": "message", "channel": channel, "channel_type": "channel",
            "text": text, "ts": ts, "event_ts": ts,
        });
        if own {
            event["user"] = json!(config.bot_user_id);
            event["bot_id"] = json!(config.bot_id);
        } else {
            event["user"] = json!(config.user_id);
            event["client_msg_id"] = json!(format!("mock-client-msg-{serial}"));
        }
        if let Some(thread) = thread_ts {
            event["thread_ts"] = json!(thread);
        }
        if let Some(files) = files {
            // The docs' `file_share` message: its subtype, the files, `upload` and
            // `display_as_bot` (node-slack-sdk `FileShareMessageEvent`).
            event["subtype"] = json!("file_share");
            event["files"] = json!(files);
            event["upload"] = json!(true);
            event["display_as_bot"] = json!(false);
        }
        let payload = json!({
            "token": "mock-verification-token", "team_id": config.team_id,
            "api_app_id": config.app_id, "type": "event_callback",
            "event_id": event_id, "event_time": now_unix,
            "authorizations": [{"enterprise_id": null, "team_id": config.team_id,
                "user_id": config.bot_user_id, "is_bot": true, "is_enterprise_install": false}],
            "is_ext_shared_channel": false, "event": event,
        });
        inner.events.push(SlackEventRecord {
            event_id: event_id.clone(),
            channel: channel.to_owned(),
            text: text.to_owned(),
            ts,
            own,
            emitted_at: Instant::now(),
            deliveries: Vec::new(),
            acked_at: None,
            dropped: false,
        });
        inner.payloads.push(payload);
        let index = inner.events.len() - 1;
        if inner.conns.is_empty() {
            inner.waiting.push_back(index);
        } else {
            self.deliver(&mut inner, index, 0, None);
        }
        event_id
    }

    /// Writes event `index` as an envelope to the next connection in turn; it waits for its
    /// ack from now. `envelope_id` is reused when given (a retry that keeps its id).
    fn deliver(&self, inner: &mut Inner, index: usize, attempt: u32, envelope_id: Option<String>) {
        let envelope_id = envelope_id.unwrap_or_else(|| {
            inner.serial += 1;
            format!("mock-envelope-{:08x}", inner.serial)
        });
        let frame = json!({
            "envelope_id": envelope_id, "type": "events_api",
            "accepts_response_payload": false, "retry_attempt": attempt,
            "retry_reason": if attempt == 0 { "" } else { "timeout" },
            "payload": inner.payloads[index],
        })
        .to_string();
        let ids: Vec<u64> = inner.conns.keys().copied().collect();
        inner.turn += 1;
        // A write to a connection that went away is lost, as a write to a dead socket is: the
        // ack timer finds it.
        if let Some(id) = ids.get((inner.turn as usize) % ids.len().max(1)) {
            let _ = inner.conns[id].tx.send(ConnCommand::Push(frame));
        }
        let now = Instant::now();
        inner.events[index]
            .deliveries
            .push((envelope_id.clone(), attempt, now));
        inner.stats.envelopes_sent += 1;
        if attempt > 0 {
            inner.stats.redeliveries += 1;
        }
        inner.envelopes.insert(envelope_id.clone(), index);
        inner.pending.insert(
            index,
            Pending {
                envelope_id,
                attempt,
                due: now + self.config.ack_wait(attempt),
            },
        );
        self.wake.notify_one();
    }

    /// An ack frame's `envelope_id`: the event is done with, whichever of its envelopes it
    /// names. An ack for an event no longer waiting (acked, or given up) is stray.
    pub(crate) fn on_ack(&self, envelope_id: &str) {
        let mut inner = self.lock();
        inner.stats.acks += 1;
        let event = inner.envelopes.get(envelope_id).copied();
        match event.filter(|event| inner.pending.remove(event).is_some()) {
            Some(event) => inner.events[event].acked_at = Some(Instant::now()),
            None => inner.stats.stray_acks += 1,
        }
    }

    /// Delivers again what was not acked by its deadline (a new envelope id unless configured
    /// otherwise), or gives it up after the last retry; the next deadline, if any.
    pub(crate) fn redeliver_due(&self, now: Instant) -> Option<Instant> {
        let mut inner = self.lock();
        let due: Vec<usize> = inner
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(event, _)| *event)
            .collect();
        for event in due {
            let Some(p) = inner.pending.remove(&event) else {
                continue;
            };
            if p.attempt >= self.config.max_retries {
                inner.events[event].dropped = true;
                continue;
            }
            if inner.conns.is_empty() {
                // Nobody to retry to: the next connection gets it.
                inner.waiting.push_back(event);
                continue;
            }
            let keep = (!self.config.new_envelope_id_on_retry).then_some(p.envelope_id);
            self.deliver(&mut inner, event, p.attempt + 1, keep);
        }
        inner.pending.values().map(|p| p.due).min()
    }

    pub(crate) fn set_fault(&self, fault: SlackFault) {
        let mut inner = self.lock();
        if fault == SlackFault::Disconnect("link_disabled".to_owned()) {
            inner.socket_mode_off = true;
        }
        for conn in inner.conns.values() {
            let _ = conn.tx.send(ConnCommand::Fault(fault.clone()));
        }
        tracing::info!(?fault, "mock slack fault set");
    }

    /// Socket Mode back on, tokens valid, `apps.connections.open` answering again.
    pub(crate) fn clear_faults(&self) {
        let mut inner = self.lock();
        inner.socket_mode_off = false;
        inner.refusal = None;
        inner.revoked = false;
    }

    pub(crate) fn refuse_open(&self, refusal: Option<OpenRefusal>) {
        self.lock().refusal = refusal;
    }

    pub(crate) fn revoke(&self) {
        self.lock().revoked = true;
    }

    pub(crate) fn on_ping(&self) {
        self.lock().stats.ws_pings += 1;
    }

    pub(crate) fn disconnect_sent(&self) {
        self.lock().stats.disconnects += 1;
    }

    pub(crate) fn events(&self) -> Vec<SlackEventRecord> {
        self.lock().events.clone()
    }

    pub(crate) fn count(&self, bump: impl FnOnce(&mut SlackStats)) {
        bump(&mut self.lock().stats);
    }

    pub(crate) fn stats(&self) -> SlackStats {
        let inner = self.lock();
        SlackStats {
            live_connections: inner.conns.len() as u64,
            ..inner.stats.clone()
        }
    }

    /// `ts` for a post the platform accepted: unique within the mock.
    pub(crate) fn mint_ts(&self) -> String {
        let mut inner = self.lock();
        inner.serial += 1;
        format!("{}.{:06}", unix_secs(), inner.serial % 1_000_000)
    }

    pub(crate) fn hello(&self, num_connections: usize, debug_reconnects: bool) -> String {
        let time = if debug_reconnects {
            360
        } else {
            self.config.approximate_connection_time
        };
        json!({
            "type": "hello", "num_connections": num_connections,
            "debug_info": {"host": "mock-applink-1", "build_number": 1,
                "approximate_connection_time": time},
            "connection_info": {"app_id": self.config.app_id},
        })
        .to_string()
    }
}

/// A `disconnect` message with `reason`.
pub(crate) fn disconnect(reason: &str) -> String {
    json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "mock-applink-1"}})
        .to_string()
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
