//! The mock Feishu's long-connection state: connect tickets, live connections, the events and
//! their pushes, acks and faults, under one lock so that "push an event", "a connection comes
//! or goes" and "an ack arrives" are atomic with respect to each other.
//!
//! Delivery follows the docs ("使用长连接接收事件"): pushes are in cluster mode, one client of
//! the app gets each event (the mock picks the newest connection), and an event not acked in
//! time is pushed again. The platform cannot see a half-open connection, so it keeps choosing
//! one; what it pushes there is lost until the ack timeout brings it back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::{mpsc, Notify};

use crate::platform::feishu::pbbp2::{header, message_type, Frame, FrameKind};

use super::auth::Tokens;
use super::config::{ClientConfig, FeishuConfig};
use super::events::{self, hex, PushHeaders};
use super::faults::{FeishuFault, Refusal};
use super::record::{FeishuAck, FeishuEventRecord, FeishuStats};
use super::ticket::Ticket;

/// What the state asks of a live connection.
pub(crate) enum ConnCommand {
    /// Binary frames to write, in order.
    Push(Vec<Vec<u8>>),
    /// Go quiet both ways, keep the socket.
    Silence,
    Close,
}

mod connect;

struct Conn {
    tx: mpsc::UnboundedSender<ConnCommand>,
    service: i32,
}

struct Event {
    record: FeishuEventRecord,
    payload: Vec<u8>,
    /// Parts for this event whatever the split fault says (`emit_split`).
    parts: Option<u32>,
    /// When the outstanding push times out; `None` while waiting for a connection.
    due: Option<Instant>,
}

struct Delivery {
    event: usize,
    number: u32,
    headers: PushHeaders,
}

pub(crate) struct FeishuState {
    pub(crate) config: FeishuConfig,
    /// Wakes the redelivery task when a new deadline is set.
    pub(crate) wake: Notify,
    pub(crate) tokens: Tokens,
    /// The images and files uploaded, by key.
    pub(crate) uploads: super::uploads::Uploads,
    inner: Mutex<Inner>,
}

struct Inner {
    client_config: ClientConfig,
    /// Where the long connection is, before its query: the URL discovery hands out.
    ws_url: String,
    tickets: HashMap<String, Ticket>,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    events: Vec<Event>,
    unacked: BTreeSet<usize>,
    outstanding: HashMap<String, Delivery>,
    acks: Vec<FeishuAck>,
    no_pong: bool,
    split: Option<(u32, bool)>,
    duplicate_acked: u32,
    refuse: Option<(u32, Refusal)>,
    /// `om_…` ids the platform knows, with their chat: what a reply may target.
    messages: HashMap<String, String>,
    /// The files of the messages emitted with one, for the resources endpoint.
    resources: Vec<super::resources::Resource>,
    stats: FeishuStats,
}

impl FeishuState {
    pub(crate) fn new(config: FeishuConfig, ws_url: String) -> FeishuState {
        let inner = Inner {
            client_config: config.client_config,
            ws_url,
            tickets: HashMap::new(),
            conns: BTreeMap::new(),
            next_conn: 0,
            events: Vec::new(),
            unacked: BTreeSet::new(),
            outstanding: HashMap::new(),
            acks: Vec::new(),
            no_pong: false,
            split: None,
            duplicate_acked: 0,
            refuse: None,
            messages: HashMap::new(),
            resources: Vec::new(),
            stats: FeishuStats::default(),
        };
        FeishuState {
            tokens: Tokens::new(config.token_lifetime),
            config,
            wake: Notify::new(),
            uploads: super::uploads::Uploads::default(),
            inner: Mutex::new(inner),
        }
    }

    /// A panic elsewhere must not turn every later call into one.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_ws_url(&self, url: String) {
        self.lock().ws_url = url;
    }

    /// A connection is up: it becomes the newest, and gets every event waiting for one.
    pub(crate) fn register(&self, tx: mpsc::UnboundedSender<ConnCommand>, service: i32) -> u64 {
        let mut inner = self.lock();
        inner.next_conn += 1;
        let conn_id = inner.next_conn;
        inner.conns.insert(conn_id, Conn { tx, service });
        inner.stats.connections += 1;
        inner.stats.live_connections = inner.conns.len() as u64;
        inner.stats.connection_times.push(Instant::now());
        let waiting: Vec<usize> = inner
            .unacked
            .iter()
            .copied()
            .filter(|&i| inner.events[i].due.is_none())
            .collect();
        for index in waiting {
            self.deliver(&mut inner, index);
        }
        conn_id
    }

    pub(crate) fn unregister(&self, conn_id: u64) {
        let mut inner = self.lock();
        inner.conns.remove(&conn_id);
        inner.stats.live_connections = inner.conns.len() as u64;
    }

    /// Generates one event and pushes it. `parts` forces a split for this event alone.
    pub(crate) fn emit(&self, mut record: FeishuEventRecord, payload: Vec<u8>, parts: Option<u32>) {
        let mut inner = self.lock();
        if let (Some(id), Some(chat)) = (&record.message_id, &record.chat_id) {
            inner.messages.insert(id.clone(), chat.clone());
        }
        record.emitted_at = Instant::now();
        inner.events.push(Event {
            record,
            payload,
            parts,
            due: None,
        });
        let index = inner.events.len() - 1;
        inner.unacked.insert(index);
        self.deliver(&mut inner, index);
    }

    /// Pushes event `index` to the newest connection, or leaves it waiting for one.
    fn deliver(&self, inner: &mut Inner, index: usize) {
        let Some((&conn_id, conn)) = inner.conns.iter().next_back() else {
            inner.events[index].due = None;
            return;
        };
        let sum = inner.events[index]
            .parts
            .or(inner.split.map(|(parts, _)| parts))
            .unwrap_or(1)
            .max(1);
        let reversed = inner.split.is_some_and(|(_, reversed)| reversed);
        let headers = PushHeaders {
            message_id: hex(20),
            trace_id: hex(16),
            sum,
        };
        let frames = events::push_frames(
            &inner.events[index].payload,
            &headers,
            conn.service,
            reversed,
        );
        // A send into a connection that went quiet fails or is swallowed; either way the
        // platform believes it delivered, as the real one would.
        let _ = conn.tx.send(ConnCommand::Push(frames));
        inner.stats.frames_pushed += u64::from(sum);
        let now = Instant::now();
        let event = &mut inner.events[index];
        event.record.deliveries += 1;
        event.record.first_delivered_at.get_or_insert(now);
        if event.record.acked_at.is_none() {
            event.due = Some(now + self.config.ack_timeout);
            self.wake.notify_one();
        }
        let number = event.record.deliveries;
        tracing::debug!(conn_id, event_id = %event.record.event_id, number, sum, "mock feishu push");
        inner.outstanding.insert(
            headers.message_id.clone(),
            Delivery {
                event: index,
                number,
                headers,
            },
        );
    }

    /// Pushes again every event whose ack is overdue; returns the next deadline.
    pub(crate) fn redeliver_due(&self, now: Instant) -> Option<Instant> {
        let mut inner = self.lock();
        let due: Vec<usize> = inner
            .unacked
            .iter()
            .copied()
            .filter(|&i| inner.events[i].due.is_some_and(|at| at <= now))
            .collect();
        for index in due {
            tracing::debug!(event_id = %inner.events[index].record.event_id, "mock feishu ack timed out");
            self.deliver(&mut inner, index);
        }
        inner
            .unacked
            .iter()
            .filter_map(|&i| inner.events[i].due)
            .min()
    }

    /// A data frame from a client: the ack of a push, matched by its `message_id` header.
    pub(crate) fn on_ack(&self, conn_id: u64, frame: &Frame) {
        let mut inner = self.lock();
        let frame_message_id = frame
            .header(header::MESSAGE_ID)
            .unwrap_or_default()
            .to_owned();
        let code = serde_json::from_slice::<Value>(frame.payload_bytes())
            .ok()
            .and_then(|v| v.get("code").and_then(Value::as_i64));
        let now = Instant::now();
        let mut ack = FeishuAck {
            event_id: None,
            frame_message_id,
            conn_id,
            at: now,
            code,
            biz_rt: frame.header(header::BIZ_RT).map(str::to_owned),
            echoed: false,
            delivery: 0,
        };
        let matched = inner
            .outstanding
            .get(&ack.frame_message_id)
            .map(|d| (d.event, d.number, echoes(frame, &d.headers)));
        if let Some((index, number, echoed)) = matched {
            ack.delivery = number;
            ack.echoed = echoed;
            let event = &mut inner.events[index];
            ack.event_id = Some(event.record.event_id.clone());
            if code == Some(200) && event.record.acked_at.is_none() {
                event.record.acked_at = Some(now);
                event.due = None;
                inner.unacked.remove(&index);
                if inner.duplicate_acked > 0 {
                    inner.duplicate_acked -= 1;
                    self.deliver(&mut inner, index);
                }
            }
        }
        tracing::debug!(conn_id, ?ack.event_id, ?code, "mock feishu ack");
        inner.acks.push(ack);
    }

    /// A ping on a connection whose URL named `service`: the pong to send, if any.
    pub(crate) fn on_ping(&self, conn_service: i32, frame: &Frame) -> Option<Vec<u8>> {
        let mut inner = self.lock();
        inner.stats.pings += 1;
        if frame.service != conn_service {
            inner.stats.pings_wrong_service += 1;
        }
        if inner.no_pong {
            return None;
        }
        inner.stats.pongs += 1;
        Some(events::pong(frame.service, &inner.client_config))
    }

    pub(crate) fn bad_frame(&self) {
        self.lock().stats.bad_frames += 1;
    }

    pub(crate) fn set_fault(&self, fault: FeishuFault) {
        let mut inner = self.lock();
        tracing::info!(
            ?fault,
            connections = inner.conns.len(),
            "mock feishu fault set"
        );
        match fault {
            FeishuFault::HalfOpen => inner.broadcast(|| ConnCommand::Silence),
            FeishuFault::CloseAll => inner.broadcast(|| ConnCommand::Close),
            FeishuFault::NoPong => inner.no_pong = true,
            FeishuFault::Split { parts, reversed } => inner.split = Some((parts.max(1), reversed)),
            FeishuFault::DuplicateAcked(n) => inner.duplicate_acked = n,
            FeishuFault::RefuseConnects { n, refusal } => {
                inner.refuse = (n > 0).then_some((n, refusal));
            }
            FeishuFault::ClientConfig(config) => inner.client_config = config,
        }
    }

    /// Ends the lasting faults (no-pong, split, pending duplicates and refusals).
    pub(crate) fn clear_faults(&self) {
        let mut inner = self.lock();
        inner.no_pong = false;
        inner.split = None;
        inner.duplicate_acked = 0;
        inner.refuse = None;
    }

    pub(crate) fn remember_message(&self, message_id: &str, chat_id: &str) {
        self.lock()
            .messages
            .insert(message_id.to_owned(), chat_id.to_owned());
    }

    pub(crate) fn chat_of(&self, message_id: &str) -> Option<String> {
        self.lock().messages.get(message_id).cloned()
    }

    /// Keep a message's file for the resources endpoint.
    pub(crate) fn add_resource(&self, resource: super::resources::Resource) {
        self.lock().resources.push(resource);
    }

    /// The file `key` of message `message_id`, when the two match.
    pub(crate) fn resource(
        &self,
        message_id: &str,
        key: &str,
    ) -> Option<super::resources::Resource> {
        self.lock()
            .resources
            .iter()
            .find(|r| r.message_id == message_id && r.key == key)
            .cloned()
    }

    pub(crate) fn acks(&self) -> Vec<FeishuAck> {
        self.lock().acks.clone()
    }

    pub(crate) fn events(&self) -> Vec<FeishuEventRecord> {
        self.lock()
            .events
            .iter()
            .map(|e| e.record.clone())
            .collect()
    }

    pub(crate) fn event_count(&self) -> usize {
        self.lock().events.len()
    }

    pub(crate) fn stats(&self) -> FeishuStats {
        FeishuStats {
            uploads: self.uploads.count(),
            ..self.lock().stats.clone()
        }
    }
}

impl Inner {
    fn broadcast(&self, command: impl Fn() -> ConnCommand) {
        for conn in self.conns.values() {
            let _ = conn.tx.send(command());
        }
    }
}

/// Does the client's frame carry back the push's headers (method data, same type, message id,
/// sum and trace id, and a seq inside sum)?
fn echoes(frame: &Frame, pushed: &PushHeaders) -> bool {
    frame.kind() == Some(FrameKind::Data)
        && frame.message_type() == Some(message_type::EVENT)
        && frame.header(header::MESSAGE_ID) == Some(pushed.message_id.as_str())
        && frame.header(header::TRACE_ID) == Some(pushed.trace_id.as_str())
        && frame.header_u32(header::SUM) == Some(pushed.sum)
        && frame
            .header_u32(header::SEQ)
            .is_some_and(|seq| seq < pushed.sum)
}
