//! Weixin through Tencent's iLink bot API, receiving: `ilink/bot/getupdates` long polling.
//!
//! A poll sends the cursor (`get_updates_buf`, opaque) and gets `msgs`, the next cursor and
//! `longpolling_timeout_ms`, how long the server means to hold the next poll (which, with
//! the grace, sets that poll's deadline). The cursor is written to `inbox/cursors/ADAPTER`
//! only after the batch is in the spool, so a crash in between polls from the old cursor
//! and the spool drops what it already has (by message id). A message carries the peer's
//! newest `context_token`, which a reply to that peer echoes; it is kept in the shared
//! account for the sender.
//!
//! Session expiry (`ret`/`errcode` -14) ends the login: the adapter enters `needs-login` and
//! reads the login file every few seconds until `hermes-svc login weixin` has stored a new
//! token, then polls on, with no restart.
//!
//! Source: the public client this replaces, NousResearch/hermes-agent
//! `gateway/platforms/weixin.py` (endpoints, body and answer fields, codes -14 and -2).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::account::{rate_limited, said, session_expired, WeixinAccount};
use crate::config::PollTiming;
use crate::gateway::adapter::batch::{self, Batch, Item};
use crate::gateway::adapter::cursor_file::{Cursor, CursorFile, CursorRefused};
use crate::gateway::adapter::long_poll::{exchange, Exchange, Poll, Polled};
use crate::gateway::health::Heartbeat;
use crate::gateway::spool::Event;

/// After iLink's frequency limit, the public client waits 30 s; so does this.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(30);
/// The server's `longpolling_timeout_ms` is obeyed within these bounds: a hostile or broken
/// value must not turn off dead-connection detection, nor turn polling into a busy loop.
const MIN_SERVER_TIMEOUT: Duration = Duration::from_secs(1);
const MAX_SERVER_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a `needs-login` adapter reads the login file.
const LOGIN_CHECK: Duration = Duration::from_secs(2);
/// `message_type` of a message the bot itself sent.
const FROM_BOT: i64 = 2;

pub(crate) struct Weixin {
    adapter: String,
    http: reqwest::Client,
    account: Arc<WeixinAccount>,
    poll: PollTiming,
    /// How long the server will hold the next poll.
    server_timeout: Duration,
    /// The cursor polls send, kept on disk.
    cursor: CursorFile,
    /// Whether the adapter has reported in since it started ([`Weixin::report_in`]).
    reported_in: bool,
}

impl Weixin {
    pub(crate) fn new(
        adapter: &str,
        http: reqwest::Client,
        account: Arc<WeixinAccount>,
        poll: PollTiming,
        cursor_file: PathBuf,
    ) -> Self {
        let cursor = CursorFile::open(adapter, cursor_file);
        Self {
            adapter: adapter.to_owned(),
            http,
            account,
            poll,
            server_timeout: poll.timeout,
            cursor,
            reported_in: false,
        }
    }

    /// At start only: `getconfig`, which the server answers at once, proves the login and the
    /// path (or finds an ended session) without waiting out a quiet bot's long poll, which
    /// would hold `READY=1`, and `start`, for 35 s. Never after a failure: only an answered
    /// long poll ends an outage, so a server that answers this and hangs every poll still
    /// reaches `max-outage`.
    async fn report_in(&mut self) -> Polled {
        match self.call("getconfig", json!({}), self.poll.grace).await {
            Ok(_) => Polled::Batch(vec![]),
            Err(polled) => polled,
        }
    }

    /// One iLink call, read as the public client reads every answer: an ended session, the
    /// frequency limit, any other non-zero code, or the answer, with its `msgs` read one by
    /// one ([`batch`]).
    async fn call(&self, endpoint: &str, body: Value, deadline: Duration) -> Result<Batch, Polled> {
        let request = self
            .account
            .request(&self.http, &format!("ilink/bot/{endpoint}"), body)
            .map_err(|e| Polled::NeedsLogin(crate::error_chain::one_line(&e)))?;
        let answer = match exchange(request, deadline).await {
            Exchange::Answer {
                status: 200, body, ..
            } => body,
            Exchange::Answer { status, .. } => {
                return Err(Polled::Failed(format!("{endpoint}: HTTP {status}")))
            }
            Exchange::Dead(e) => return Err(Polled::Dead(e)),
            Exchange::Failed(e) => return Err(Polled::Failed(format!("{endpoint}: {e}"))),
        };
        let Some(batch) = batch::read(&answer, "msgs") else {
            return Err(Polled::Failed(format!(
                "{endpoint} answered something that is not a JSON object"
            )));
        };
        let v = &batch.envelope;
        if session_expired(v) {
            return Err(Polled::NeedsLogin(format!(
                "{endpoint}: {}: the Weixin login has expired; run `hermes-svc login weixin` \
                 for this profile and scan the QR code (the adapter picks the new login up by \
                 itself)",
                said(v)
            )));
        }
        if rate_limited(v) {
            return Err(Polled::Wait(
                RATE_LIMIT_WAIT,
                format!("{endpoint}: {}: the platform's frequency limit", said(v)),
            ));
        }
        let code = |k: &str| v[k].as_i64().unwrap_or(0);
        if code("ret") != 0 || code("errcode") != 0 {
            return Err(Polled::Failed(format!("{endpoint}: {}", said(v))));
        }
        Ok(batch)
    }

    async fn long_poll(&mut self) -> Polled {
        let body = json!({ "get_updates_buf": self.cursor.current() });
        let Batch { envelope: v, items } =
            match self.call("getupdates", body, self.deadline()).await {
                Ok(batch) => batch,
                Err(polled) => return polled,
            };
        if let Some(ms) = v["longpolling_timeout_ms"].as_u64().filter(|ms| *ms > 0) {
            self.server_timeout =
                Duration::from_millis(ms).clamp(MIN_SERVER_TIMEOUT, MAX_SERVER_TIMEOUT);
        }
        // No cursor (or an empty one) keeps the last; one the limit refuses is an error
        // said, and the batch is not taken.
        match v["get_updates_buf"].as_str().map(Cursor::take) {
            Some(Ok(buf)) => self.cursor.stage(buf),
            Some(Err(e @ CursorRefused::TooLong { .. })) => {
                return Polled::Failed(format!(
                    "getupdates answered a get_updates_buf that cannot be kept ({e}); the \
                     batch is not taken and polling goes on from the last cursor kept"
                ))
            }
            Some(Err(CursorRefused::Empty)) | None => {}
        }
        let events = items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|item| match item {
                Item::Readable(m) => self.event(m),
                Item::Unreadable { raw, error } => Some(self.unreadable(&raw, &error)),
            })
            .collect();
        Polled::Batch(events)
    }

    /// A message that does not read as JSON, as a quarantined `unreadable` event under its
    /// `message_id` (or a hash of it, when even that does not read). The cursor moves past it
    /// with the rest of the batch; its `context_token` is not trusted.
    fn unreadable(&self, raw: &str, error: &str) -> Event {
        let id = match batch::field(raw, "message_id") {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) if !s.is_empty() => s,
            _ => batch::raw_id(raw),
        };
        tracing::warn!(adapter = %self.adapter, message_id = %id, %error, "a message that is not valid JSON; stored as an unreadable event");
        batch::quarantined(id, &self.adapter, None, raw, error)
    }

    /// A message as a spool event, named by its `message_id`; the peer's `context_token` is
    /// kept for replies. The bot's own messages are not events.
    fn event(&self, m: Value) -> Option<Event> {
        if m["message_type"].as_i64() == Some(FROM_BOT) {
            return None;
        }
        let from = m["from_user_id"].as_str().unwrap_or("");
        if let Some(token) = m["context_token"].as_str().filter(|t| !t.is_empty()) {
            if !from.is_empty() {
                self.account.remember_context(from, token);
            }
        }
        let id = match &m["message_id"] {
            Value::Number(n) => n.to_string(),
            Value::String(s) if !s.is_empty() => s.clone(),
            // No id of its own: its sender and time name it, which a redelivery repeats.
            _ => format!("{from}:{}", m["create_time_ms"]),
        };
        Some(Event::new(id, &self.adapter, "message", None, m))
    }
}

impl Poll for Weixin {
    async fn poll(&mut self) -> Polled {
        if self.reported_in {
            return self.long_poll().await;
        }
        let polled = self.report_in().await;
        self.reported_in = matches!(polled, Polled::Batch(_));
        polled
    }

    /// The batch is stored: the cursor that acknowledges it is written (whole, by rename).
    fn commit(&mut self) -> Result<(), String> {
        self.cursor.commit()
    }

    fn next_cursor(&self) -> Option<&str> {
        self.cursor.next()
    }

    fn inherit_cursor(&mut self, cursor: String) {
        self.cursor.inherit(cursor);
    }

    fn deadline(&self) -> Duration {
        self.poll.deadline(self.server_timeout)
    }

    /// Wait, beating, until the login file holds a new token; true on shutdown.
    async fn await_login(&mut self, hb: &Heartbeat, shutdown: &mut watch::Receiver<bool>) -> bool {
        loop {
            if self.account.renewed() {
                return false;
            }
            hb.beat();
            tokio::select! {
                _ = tokio::time::sleep(LOGIN_CHECK) => {}
                _ = crate::gateway::until_shutdown(shutdown) => return true,
            }
        }
    }
}
