//! The mock DingTalk's one app: the tickets it issued, its open Stream connections, every
//! robot message and the pushes still waiting for an ack, the access tokens it handed out.
//! Connections are told what to write through a channel each, so the state never holds a
//! socket.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use super::config::DingTalkConfig;
use super::files::Files;
use super::record::{
    DingTalkConnRecord, DingTalkEventRecord, DingTalkFault, DingTalkSide, DingTalkStats,
    OpenRefusal,
};

/// The robot message topic (the SDKs' `ChatbotMessage.TOPIC`).
pub(crate) const ROBOT_TOPIC: &str = "/v1.0/im/bot/messages/get";

pub(crate) enum ConnCommand {
    Push(String),
    Fault(DingTalkFault),
}

struct Pending {
    attempt: u32,
    due: Instant,
}

#[derive(Default)]
struct Inner {
    tickets: HashMap<String, Instant>,
    conns: BTreeMap<u64, mpsc::UnboundedSender<ConnCommand>>,
    /// Every connection ever upgraded, connection `n` at `n - 1`.
    spans: Vec<DingTalkConnRecord>,
    next_conn: u64,
    turn: u64,
    events: Vec<DingTalkEventRecord>,
    data: Vec<Value>,
    /// Every frame's `messageId`, to its event.
    frames: HashMap<String, usize>,
    pending: HashMap<usize, Pending>,
    waiting: VecDeque<usize>,
    serial: u64,
    refusal: Option<OpenRefusal>,
    revoked: bool,
    tokens: HashSet<String>,
    /// Each message's session webhook, to where a post to it goes: `(group?, id)`.
    sessions: HashMap<String, (bool, String)>,
    stats: DingTalkStats,
}

pub(crate) struct DingTalkState {
    pub(crate) config: DingTalkConfig,
    /// Where `connections/open` sends a client: this mock, or a proxy in front of it.
    ws_url: Mutex<String>,
    /// Where the session webhooks a message carries point: this mock.
    http_base: String,
    inner: Mutex<Inner>,
    pub(crate) wake: Notify,
    /// The files people sent, by download code.
    pub(crate) files: Files,
}

/// Why `connections/open` or the token endpoint refused.
pub(crate) enum Refused {
    /// The client id or secret is wrong, or was revoked: 401 `invalidClientIdOrSecret`.
    Credentials,
    Armed(u16, String),
}

impl DingTalkState {
    pub(crate) fn new(config: DingTalkConfig, ws_url: String, http_base: String) -> Self {
        DingTalkState {
            config,
            ws_url: Mutex::new(ws_url),
            http_base,
            inner: Mutex::new(Inner::default()),
            wake: Notify::new(),
            files: Files::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check(&self, inner: &Inner, id: &str, secret: &str) -> Result<(), Refused> {
        if inner.revoked || id != self.config.client_id || secret != self.config.client_secret {
            return Err(Refused::Credentials);
        }
        Ok(())
    }

    /// `connections/open`: an endpoint and a ticket for one connection.
    pub(crate) fn open(&self, id: &str, secret: &str) -> Result<(String, String), Refused> {
        let mut inner = self.lock();
        let checked = self
            .check(&inner, id, secret)
            .and_then(|()| match &inner.refusal {
                Some(OpenRefusal::Status(status, code)) => {
                    Err(Refused::Armed(*status, code.clone()))
                }
                None => Ok(()),
            });
        if let Err(refused) = checked {
            inner.stats.opens_refused += 1;
            return Err(refused);
        }
        inner.serial += 1;
        let ticket = format!("mock-ticket-{:08x}-{:08x}", inner.serial, fastrand::u32(..));
        inner.tickets.insert(ticket.clone(), Instant::now());
        inner.stats.tickets_issued += 1;
        let ws_url = self.ws_url.lock().unwrap_or_else(PoisonError::into_inner);
        Ok((ws_url.clone(), ticket))
    }

    /// This mock's own `http://HOST:PORT`, where session webhooks and file links point.
    pub(crate) fn http_base(&self) -> &str {
        &self.http_base
    }

    pub(crate) fn set_ws_url(&self, url: String) {
        *self.ws_url.lock().unwrap_or_else(PoisonError::into_inner) = url;
    }

    /// `oauth2/accessToken`: a new token.
    pub(crate) fn token(&self, id: &str, secret: &str) -> Result<String, Refused> {
        let mut inner = self.lock();
        self.check(&inner, id, secret)?;
        inner.serial += 1;
        let token = format!("mock-dt-token-{:08x}", inner.serial);
        inner.tokens.insert(token.clone());
        inner.stats.tokens_issued += 1;
        Ok(token)
    }

    /// Whether a robot API request's token is one handed out and not revoked.
    pub(crate) fn token_ok(&self, token: Option<&str>) -> bool {
        let inner = self.lock();
        !inner.revoked && token.is_some_and(|t| inner.tokens.contains(t))
    }

    /// Takes the ticket: one connection, within its lifetime.
    pub(crate) fn take_ticket(&self, ticket: &str) -> bool {
        let mut inner = self.lock();
        let fresh = inner
            .tickets
            .remove(ticket)
            .is_some_and(|at| at.elapsed() <= self.config.ticket_ttl);
        if !fresh {
            inner.stats.tickets_refused += 1;
        }
        fresh
    }

    pub(crate) fn register(&self, tx: mpsc::UnboundedSender<ConnCommand>) -> u64 {
        let mut inner = self.lock();
        inner.next_conn += 1;
        let id = inner.next_conn;
        inner.conns.insert(id, tx);
        inner.spans.push(DingTalkConnRecord {
            opened_at: Instant::now(),
            first_ping_at: None,
            disconnect_at: None,
            closed_at: None,
            closed_by: None,
        });
        inner.stats.connections += 1;
        let live = inner.conns.len() as u64;
        inner.stats.peak_connections = inner.stats.peak_connections.max(live);
        while let Some(event) = inner.waiting.pop_front() {
            self.deliver(&mut inner, event, 0);
        }
        id
    }

    pub(crate) fn unregister(&self, conn: u64) {
        self.lock().conns.remove(&conn);
    }

    fn span(inner: &mut Inner, conn: u64) -> Option<&mut DingTalkConnRecord> {
        inner.spans.get_mut((conn as usize).wrapping_sub(1))
    }

    /// Connection `conn` ended, `by` that side (the first end told counts).
    pub(crate) fn closed(&self, conn: u64, by: DingTalkSide) {
        let mut inner = self.lock();
        if let Some(span) = Self::span(&mut inner, conn).filter(|s| s.closed_at.is_none()) {
            span.closed_at = Some(Instant::now());
            span.closed_by = Some(by);
        }
    }

    /// A robot message from `sender` (a staff id) in `conversation` (a group's id, or 1:1
    /// when it is none of the configured groups); its `msgId`.
    pub(crate) fn emit(&self, conversation: &str, sender: &str, text: &str) -> String {
        let body = json!({"msgtype": "text", "text": {"content": text}});
        self.emit_body(conversation, sender, text, body)
    }

    /// A picture message of `bytes` (a PNG) from `sender` in `conversation`; its `msgId`.
    pub(crate) fn emit_picture(&self, conversation: &str, sender: &str, bytes: Vec<u8>) -> String {
        let code = self.files.add("image/png", bytes);
        let body = json!({"msgtype": "picture",
            "content": {"downloadCode": code, "pictureDownloadCode": format!("@picture{code}")}});
        self.emit_body(conversation, sender, "", body)
    }

    /// A robot message of `body` (its `msgtype` and that type's fields), recorded as `text`.
    fn emit_body(&self, conversation: &str, sender: &str, text: &str, body: Value) -> String {
        let mut inner = self.lock();
        let (index, msg_id) = self.record(&mut inner, conversation, sender, text, body);
        if inner.conns.is_empty() {
            inner.waiting.push_back(index);
        } else {
            self.deliver(&mut inner, index, 0);
        }
        msg_id
    }

    /// A new robot message, not yet pushed: its index and `msgId`.
    fn record(
        &self,
        inner: &mut Inner,
        conversation: &str,
        sender: &str,
        text: &str,
        body: Value,
    ) -> (usize, String) {
        inner.serial += 1;
        let serial = inner.serial;
        let msg_id = format!("msgMock{serial:010}");
        let group = self.config.groups.iter().any(|g| g == conversation);
        let now_ms = unix_ms();
        let c = &self.config;
        let session = format!("mocksession{serial:010}");
        let to = if group { conversation } else { sender };
        inner
            .sessions
            .insert(session.clone(), (group, to.to_owned()));
        let mut data = json!({
            "conversationId": conversation,
            "conversationType": if group { "2" } else { "1" },
            "conversationTitle": if group { "mock group" } else { "" },
            "chatbotCorpId": "dingmockcorp", "chatbotUserId": "$:LWCP_v1:$mockbot",
            "msgId": msg_id, "senderNick": "Mock User", "isAdmin": false,
            "senderStaffId": sender, "senderId": format!("$:LWCP_v1:${sender}"),
            "senderCorpId": "dingmockcorp",
            "sessionWebhook": format!("{}/robot/sendBySession?session={session}", self.http_base),
            "sessionWebhookExpiredTime": now_ms + 5_400_000,
            "createAt": now_ms, "isInAtList": true, "robotCode": c.robot_code,
        });
        if let (Some(data), Value::Object(body)) = (data.as_object_mut(), body) {
            data.extend(body);
        }
        inner.events.push(DingTalkEventRecord {
            msg_id: msg_id.clone(),
            conversation_id: conversation.to_owned(),
            text: text.to_owned(),
            emitted_at: Instant::now(),
            deliveries: vec![],
            acked_at: None,
            dropped: false,
        });
        inner.data.push(data);
        (inner.events.len() - 1, msg_id)
    }

    /// Pushes event `index` as a CALLBACK frame with a new `messageId` to the next connection.
    fn deliver(&self, inner: &mut Inner, index: usize, attempt: u32) {
        let ids: Vec<u64> = inner.conns.keys().copied().collect();
        inner.turn += 1;
        let to = ids.get((inner.turn as usize) % ids.len().max(1)).copied();
        self.deliver_to(inner, index, attempt, to);
    }

    /// Pushes event `index` to connection `to` (none: it is lost, and pushed again when due).
    fn deliver_to(&self, inner: &mut Inner, index: usize, attempt: u32, to: Option<u64>) {
        inner.serial += 1;
        let message_id = format!("mock-frame-{:08x}", inner.serial);
        let frame = frame(
            "CALLBACK",
            ROBOT_TOPIC,
            &message_id,
            inner.data[index].to_string(),
        );
        if let Some(conn) = to.and_then(|id| inner.conns.get(&id)) {
            let _ = conn.send(ConnCommand::Push(frame));
        }
        let now = Instant::now();
        inner.events[index]
            .deliveries
            .push((message_id.clone(), now));
        inner.stats.callbacks_sent += 1;
        if attempt > 0 {
            inner.stats.redeliveries += 1;
        }
        inner.frames.insert(message_id, index);
        let due = now + self.config.ack_timeout;
        inner.pending.insert(index, Pending { attempt, due });
        self.wake.notify_one();
    }

    /// A client's answer frame: an ack of a CALLBACK, or the answer to a SYSTEM ping.
    pub(crate) fn on_answer(&self, v: &Value) {
        let mut inner = self.lock();
        let id = v["headers"]["messageId"].as_str().unwrap_or("");
        if id.starts_with("mock-ping-") {
            inner.stats.system_pongs += 1;
            return;
        }
        inner.stats.acks += 1;
        let event = inner.frames.get(id).copied();
        match event.filter(|e| v["code"] == 200 && inner.pending.remove(e).is_some()) {
            Some(e) => inner.events[e].acked_at = Some(Instant::now()),
            None => inner.stats.stray_acks += 1,
        }
    }

    /// Pushes again what was not acked in time, or gives it up; the next deadline.
    pub(crate) fn redeliver_due(&self, now: Instant) -> Option<Instant> {
        let mut inner = self.lock();
        let due: Vec<usize> = inner
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(e, _)| *e)
            .collect();
        for event in due {
            let Some(p) = inner.pending.remove(&event) else {
                continue;
            };
            if p.attempt >= self.config.max_retries {
                inner.events[event].dropped = true;
            } else if inner.conns.is_empty() {
                inner.waiting.push_back(event);
            } else {
                self.deliver(&mut inner, event, p.attempt + 1);
            }
        }
        inner.pending.values().map(|p| p.due).min()
    }

    /// A SYSTEM ping frame, counted.
    pub(crate) fn system_ping(&self) -> String {
        let mut inner = self.lock();
        inner.serial += 1;
        inner.stats.system_pings += 1;
        let id = format!("mock-ping-{:08x}", inner.serial);
        frame("SYSTEM", "ping", &id, json!({"opaque": id}).to_string())
    }

    /// SYSTEM `disconnect` on every open connection, each followed on the same socket by `n`
    /// new robot messages (pushes under way when the server decided to move it); their
    /// `msgId`s.
    pub(crate) fn disconnect_delivering(&self, n: usize) -> Vec<String> {
        let mut inner = self.lock();
        let (group, staff) = (&self.config.groups[0], &self.config.staff[0]);
        let mut sent = vec![];
        for conn in inner.conns.keys().copied().collect::<Vec<_>>() {
            let _ = inner.conns[&conn].send(ConnCommand::Fault(DingTalkFault::Disconnect));
            for _ in 0..n {
                let text = format!("dingtalk message {}", inner.events.len() + 1);
                let body = json!({"msgtype": "text", "text": {"content": text}});
                let (index, msg_id) = self.record(&mut inner, group, staff, &text, body);
                self.deliver_to(&mut inner, index, 0, Some(conn));
                sent.push(msg_id);
            }
        }
        sent
    }

    /// The SYSTEM `disconnect` frame for connection `conn`, counted.
    pub(crate) fn disconnect(&self, conn: u64) -> String {
        let mut inner = self.lock();
        if let Some(span) = Self::span(&mut inner, conn) {
            span.disconnect_at = Some(Instant::now());
        }
        inner.serial += 1;
        inner.stats.disconnects += 1;
        let id = format!("mock-disconnect-{:08x}", inner.serial);
        frame(
            "SYSTEM",
            "disconnect",
            &id,
            json!({"reason": "server maintenance"}).to_string(),
        )
    }

    pub(crate) fn set_fault(&self, fault: DingTalkFault) {
        for conn in self.lock().conns.values() {
            let _ = conn.send(ConnCommand::Fault(fault));
        }
    }

    pub(crate) fn refuse_open(&self, refusal: Option<OpenRefusal>) {
        self.lock().refusal = refusal;
    }

    pub(crate) fn revoke(&self, revoked: bool) {
        self.lock().revoked = revoked;
    }

    pub(crate) fn on_ws_ping(&self, conn: u64) {
        let mut inner = self.lock();
        inner.stats.ws_pings += 1;
        if let Some(span) = Self::span(&mut inner, conn) {
            span.first_ping_at.get_or_insert_with(Instant::now);
        }
    }

    pub(crate) fn connections(&self) -> Vec<DingTalkConnRecord> {
        self.lock().spans.clone()
    }

    pub(crate) fn events(&self) -> Vec<DingTalkEventRecord> {
        self.lock().events.clone()
    }

    pub(crate) fn stats(&self) -> DingTalkStats {
        let inner = self.lock();
        let (file_links, file_downloads) = self.files.counts();
        DingTalkStats {
            live_connections: inner.conns.len() as u64,
            file_links,
            file_downloads,
            ..inner.stats.clone()
        }
    }

    /// Where a post to session webhook `session` goes: `(group?, id)`.
    pub(crate) fn session(&self, session: &str) -> Option<(bool, String)> {
        self.lock().sessions.get(session).cloned()
    }

    pub(crate) fn mint(&self) -> String {
        let mut inner = self.lock();
        inner.serial += 1;
        format!("mockProcessQueryKey{:010}", inner.serial)
    }
}

/// A downstream frame: `data` is JSON as a string, as on the wire.
fn frame(kind: &str, topic: &str, message_id: &str, data: String) -> String {
    json!({
        "specVersion": "1.0", "type": kind,
        "headers": {"appId": "mock-app", "connectionId": "mock-conn", "contentType": "application/json",
            "messageId": message_id, "time": unix_ms().to_string(), "topic": topic},
        "data": data,
    })
    .to_string()
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64
}

impl super::super::ack_timer::Redelivers for DingTalkState {
    fn redeliver_due(&self, now: Instant) -> Option<Instant> {
        DingTalkState::redeliver_due(self, now)
    }

    fn deadline_set(&self) -> &Notify {
        &self.wake
    }
}
