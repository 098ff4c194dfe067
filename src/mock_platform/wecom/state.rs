//! The mock WeCom's state: the bot's connections (one subscribed at a time, the docs'
//! connection limit), the callbacks it made, the messages the bot posted, and the faults.
//!
//! Commands from a connection are answered here as the docs and the official SDK describe
//! them: `aibot_subscribe` with the bot's id and secret (any other pair, or a revoked secret,
//! is refused with an `errcode`; a second subscription of the bot kicks the first with
//! `disconnected_event`), `ping` with `errcode` 0, `aibot_respond_msg` under a callback's
//! `req_id` (a stream reply with a stream id already seen refreshes that message: one post),
//! and `aibot_send_msg` to a chat.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::config::WeComConfig;
use super::faults::WeComFault;
use super::files::Files;
use super::record::{WeComEventRecord, WeComPost, WeComStats};

/// `errcode` of a subscription with a bad bot id or secret (WeCom's general "invalid
/// credential" code).
const BAD_CREDENTIAL: i64 = 40001;
/// `errcode` of a reply under a `req_id` the platform never sent (**inferred**: the docs
/// require the callback's `req_id`, and name no code for a wrong one).
const BAD_REQ_ID: i64 = 40008;

/// What a connection is told to do by the state.
#[derive(Debug)]
pub(crate) enum ConnCommand {
    /// Write this text frame.
    Push(String),
    Fault(WeComFault),
}

#[derive(Default)]
struct Inner {
    conns: HashMap<u64, mpsc::UnboundedSender<ConnCommand>>,
    next_conn: u64,
    /// The connection that holds the bot's subscription.
    live: Option<u64>,
    events: Vec<WeComEventRecord>,
    bodies: HashMap<String, Value>,
    /// Callbacks made while no connection held the bot, delivered to the next that does.
    backlog: Vec<String>,
    /// Every callback `req_id` handed out: a reply must carry one of them.
    req_ids: HashSet<String>,
    posts: Vec<WeComPost>,
    /// Reply stream `(req_id, stream id)` → its post.
    streams: HashMap<(String, String), usize>,
    revoked: bool,
    no_pong: bool,
    /// Answers to respond/send commands still to swallow.
    lose_answers: u32,
    stats: WeComStats,
    seq: u64,
}

pub(crate) struct WeComState {
    pub(crate) config: WeComConfig,
    /// The files behind the links of callbacks.
    pub(crate) files: Files,
    inner: Mutex<Inner>,
}

/// The answer frame to command `req_id`.
pub(crate) fn answer(req_id: &str, errcode: i64, errmsg: &str) -> String {
    json!({"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg}).to_string()
}

impl WeComState {
    pub(crate) fn new(config: WeComConfig) -> Self {
        WeComState {
            config,
            files: Files::default(),
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn register(&self, tx: mpsc::UnboundedSender<ConnCommand>) -> u64 {
        let mut inner = self.lock();
        inner.next_conn += 1;
        let id = inner.next_conn;
        inner.conns.insert(id, tx);
        id
    }

    pub(crate) fn unregister(&self, conn: u64) {
        let mut inner = self.lock();
        inner.conns.remove(&conn);
        if inner.live == Some(conn) {
            inner.live = None;
        }
    }

    /// `aibot_subscribe` on connection `conn`: the answer frame, and on success the backlog
    /// to write after it; the connection that held the bot before is kicked.
    pub(crate) fn subscribe(
        &self,
        conn: u64,
        req_id: &str,
        body: &Value,
    ) -> (String, Option<Vec<String>>) {
        let mut inner = self.lock();
        let good = body["bot_id"] == self.config.bot_id.as_str()
            && body["secret"] == self.config.secret.as_str()
            && !inner.revoked;
        if !good {
            inner.stats.refused += 1;
            return (answer(req_id, BAD_CREDENTIAL, "invalid credential"), None);
        }
        if let Some(old) = inner.live.replace(conn).filter(|old| *old != conn) {
            if let Some(tx) = inner.conns.get(&old) {
                let _ = tx.send(ConnCommand::Fault(WeComFault::Kick));
            }
        }
        inner.stats.subscribed += 1;
        let backlog = std::mem::take(&mut inner.backlog);
        (answer(req_id, 0, "ok"), Some(backlog))
    }

    /// The frame that tells a kicked connection why it is closed.
    pub(crate) fn kick_frame(&self) -> String {
        let mut inner = self.lock();
        inner.stats.kicked += 1;
        inner.seq += 1;
        json!({
            "cmd": "aibot_event_callback",
            "headers": {"req_id": format!("aibot_event_callback_kick_{}", inner.seq)},
            "body": {
                "msgid": format!("kick{}", inner.seq),
                "create_time": 0,
                "aibotid": self.config.bot_id,
                "msgtype": "event",
                "event": {"eventtype": "disconnected_event"},
            },
        })
        .to_string()
    }

    /// `ping`: its answer, or nothing under the no-pong fault.
    pub(crate) fn ping(&self, req_id: &str) -> Option<String> {
        let mut inner = self.lock();
        if inner.no_pong {
            return None;
        }
        inner.stats.pongs += 1;
        Some(answer(req_id, 0, "ok"))
    }

    /// `aibot_respond_msg` or `aibot_send_msg`: recorded when well formed; the answer, unless
    /// the lost-answer fault swallows it.
    pub(crate) fn post(&self, cmd: &str, req_id: &str, body: &Value) -> Option<String> {
        let mut inner = self.lock();
        let (code, msg) = match cmd {
            "aibot_respond_msg" => inner.respond(req_id, body),
            _ => inner.send(req_id, body),
        };
        if code == 0 && inner.lose_answers > 0 {
            inner.lose_answers -= 1;
            inner.stats.answers_lost += 1;
            return None;
        }
        Some(answer(req_id, code, msg))
    }

    /// A text message callback from `from` (in `chat`, a group, when given); its msgid.
    pub(crate) fn emit(&self, from: &str, chat: Option<&str>, text: &str) -> String {
        let content = json!({"msgtype": "text", "text": {"content": text}});
        self.emit_content(from, chat, text, content)
    }

    /// A message callback whose `content` is its `msgtype` and that type's block (recorded
    /// as `text`); its msgid.
    pub(crate) fn emit_content(
        &self,
        from: &str,
        chat: Option<&str>,
        text: &str,
        content: Value,
    ) -> String {
        let mut inner = self.lock();
        inner.seq += 1;
        let msgid = format!("mockmsg{:06}", inner.seq);
        let mut body = json!({
            "msgid": msgid,
            "aibotid": self.config.bot_id,
            "chattype": if chat.is_some() { "group" } else { "single" },
            "from": {"userid": from},
            "create_time": 0,
        });
        if let (Some(body), Some(content)) = (body.as_object_mut(), content.as_object()) {
            body.extend(content.clone());
        }
        if let Some(chat) = chat {
            body["chatid"] = json!(chat);
        }
        inner.events.push(WeComEventRecord {
            msgid: msgid.clone(),
            req_ids: vec![],
            text: text.to_owned(),
        });
        inner.bodies.insert(msgid.clone(), body);
        inner.deliver(&msgid);
        msgid
    }

    /// Delivers callback `msgid` again, under a new `req_id`; false when there is none.
    pub(crate) fn redeliver(&self, msgid: &str) -> bool {
        let mut inner = self.lock();
        inner.bodies.contains_key(msgid) && {
            inner.deliver(msgid);
            true
        }
    }

    pub(crate) fn set_fault(&self, fault: WeComFault) {
        let mut inner = self.lock();
        if fault == WeComFault::NoPong {
            inner.no_pong = true;
            return;
        }
        if let Some(tx) = inner.live.and_then(|live| inner.conns.get(&live)) {
            let _ = tx.send(ConnCommand::Fault(fault));
        }
    }

    pub(crate) fn clear_faults(&self) {
        let mut inner = self.lock();
        inner.no_pong = false;
        inner.revoked = false;
        inner.lose_answers = 0;
    }

    pub(crate) fn revoke(&self) {
        self.lock().revoked = true;
    }

    pub(crate) fn lose_answers(&self, n: u32) {
        self.lock().lose_answers = n;
    }

    pub(crate) fn events(&self) -> Vec<WeComEventRecord> {
        self.lock().events.clone()
    }

    pub(crate) fn posts(&self) -> Vec<WeComPost> {
        self.lock().posts.clone()
    }

    pub(crate) fn stats(&self) -> WeComStats {
        let mut stats = self.lock().stats.clone();
        stats.file_downloads = self.files.downloads();
        stats
    }

    /// Whether a connection holds the bot now.
    pub(crate) fn subscribed(&self) -> bool {
        self.lock().live.is_some()
    }
}

impl Inner {
    fn deliver(&mut self, msgid: &str) {
        self.seq += 1;
        let req_id = format!("aibot_msg_callback_{}_{:04x}", self.seq, fastrand::u16(..));
        self.req_ids.insert(req_id.clone());
        if let Some(e) = self.events.iter_mut().find(|e| e.msgid == msgid) {
            e.req_ids.push(req_id.clone());
        }
        let body = self.bodies.get(msgid).cloned().unwrap_or(Value::Null);
        let frame =
            json!({"cmd": "aibot_msg_callback", "headers": {"req_id": req_id}, "body": body})
                .to_string();
        match self.live.and_then(|live| self.conns.get(&live)) {
            Some(tx) => {
                let _ = tx.send(ConnCommand::Push(frame));
            }
            None => self.backlog.push(frame),
        }
    }

    fn respond(&mut self, req_id: &str, body: &Value) -> (i64, &'static str) {
        if !self.req_ids.contains(req_id) {
            return (BAD_REQ_ID, "invalid req_id");
        }
        let content = match body["msgtype"].as_str() {
            Some("stream") => body["stream"]["content"].as_str(),
            Some("markdown") => body["markdown"]["content"].as_str(),
            Some("text") => body["text"]["content"].as_str(),
            _ => None,
        };
        let Some(content) = content.map(str::to_owned) else {
            return (40008, "invalid message type");
        };
        let stream_id = body["stream"]["id"].as_str().map(str::to_owned);
        if let Some(id) = &stream_id {
            let key = (req_id.to_owned(), id.clone());
            if let Some(&at) = self.streams.get(&key) {
                let post = &mut self.posts[at];
                post.content = content;
                post.refreshes += 1;
                return (0, "ok");
            }
            self.streams.insert(key, self.posts.len());
        }
        self.posts.push(WeComPost {
            cmd: "aibot_respond_msg".into(),
            req_id: req_id.to_owned(),
            stream_id,
            chat_id: None,
            content,
            refreshes: 0,
        });
        (0, "ok")
    }

    fn send(&mut self, req_id: &str, body: &Value) -> (i64, &'static str) {
        let (Some(chat), Some(content)) = (
            body["chatid"].as_str().filter(|c| !c.is_empty()),
            body["markdown"]["content"].as_str(),
        ) else {
            return (40008, "invalid message");
        };
        self.posts.push(WeComPost {
            cmd: "aibot_send_msg".into(),
            req_id: req_id.to_owned(),
            stream_id: None,
            chat_id: Some(chat.to_owned()),
            content: content.to_owned(),
            refreshes: 0,
        });
        (0, "ok")
    }
}
