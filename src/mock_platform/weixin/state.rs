//! Weixin's state in the mock: the inbound message log the cursors point into, the newest
//! `context_token` per peer, the bot tokens honoured, the armed poll fault, the QR logins and
//! the counters, under one lock of their own (nothing here has to be atomic with the other
//! platforms). A `Notify` wakes the long polls waiting for the log to grow.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Value};
use tokio::sync::Notify;

use super::cdn::Cdn;
use super::codec;
use super::config::WeixinConfig;
use super::faults::{Armed, WeixinFault};
use super::qr_logins::QrLogins;
use super::stats::{WeixinStats, VIOLATIONS_KEPT};
use crate::mock_platform::post::unix_ms_now;

/// One message a WeChat user sent the bot.
pub(crate) struct Inbound {
    pub(crate) message_id: u64,
    pub(crate) from: String,
    /// Its `item_list`: a text item, or a media item pointing at the mock's CDN.
    pub(crate) items: Value,
    pub(crate) create_time_ms: u64,
    pub(crate) context_token: String,
}

impl Inbound {
    /// The message as `getupdates` carries it (`WeixinMessage` in Tencent's protocol doc).
    pub(crate) fn to_json(&self, bot_id: &str) -> Value {
        json!({
            "message_id": self.message_id,
            "from_user_id": self.from,
            "to_user_id": bot_id,
            "create_time_ms": self.create_time_ms,
            "message_type": 1,
            "message_state": 2,
            "item_list": self.items,
            "context_token": self.context_token,
        })
    }
}

/// Message ids are numbers in the protocol; the mock counts up from here so that an id is
/// never mistaken for a position in the log.
const FIRST_MESSAGE_ID: u64 = 7_000_000_001;

pub(crate) struct WeixinState {
    pub(crate) config: WeixinConfig,
    /// Woken whenever the log grows.
    pub(super) arrivals: Notify,
    inner: Mutex<Inner>,
}

pub(super) struct Inner {
    pub(super) log: Vec<Inbound>,
    /// The newest `context_token` issued per peer: the only one a send may echo.
    pub(super) context_tokens: HashMap<String, String>,
    /// Bot tokens honoured.
    pub(super) tokens: HashSet<String>,
    pub(super) fault: Option<Armed>,
    /// The last batch of messages answered, with its cursor, for the `Duplicate` fault.
    pub(super) last_batch: Option<(Vec<Value>, String)>,
    /// The previous POST's `X-WECHAT-UIN`.
    pub(super) last_uin: Option<String>,
    pub(super) qr: QrLogins,
    pub(super) stats: WeixinStats,
    /// The CDN's files and the uploads `getuploadurl` announced.
    pub(super) cdn: Cdn,
}

impl WeixinState {
    pub(crate) fn new(config: WeixinConfig) -> Self {
        let inner = Inner {
            log: Vec::new(),
            context_tokens: HashMap::new(),
            tokens: HashSet::from([config.token.clone()]),
            fault: None,
            last_batch: None,
            last_uin: None,
            qr: QrLogins::default(),
            stats: WeixinStats::default(),
            cdn: Cdn::default(),
        };
        WeixinState {
            config,
            arrivals: Notify::new(),
            inner: Mutex::new(inner),
        }
    }

    /// A panic elsewhere must not turn every later call into a panic too.
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a message from `from` with a fresh `context_token`, which becomes the peer's
    /// newest, and wakes the waiting polls. Returns its message id.
    pub(crate) fn emit(&self, from: &str, text: &str) -> u64 {
        self.emit_items(from, json!([{"type": 1, "text_item": {"text": text}}]))
    }

    /// Appends a message from `from` whose `item_list` is `items`, as [`WeixinState::emit`].
    pub(crate) fn emit_items(&self, from: &str, items: Value) -> u64 {
        let mut inner = self.lock();
        let message_id = FIRST_MESSAGE_ID + inner.log.len() as u64;
        let context_token = format!("AARz{}", codec::hex(40));
        inner
            .context_tokens
            .insert(from.to_owned(), context_token.clone());
        inner.log.push(Inbound {
            message_id,
            from: from.to_owned(),
            items,
            create_time_ms: unix_ms_now(),
            context_token,
        });
        drop(inner);
        self.arrivals.notify_waiters();
        message_id
    }

    pub(crate) fn message_ids(&self) -> Vec<String> {
        let inner = self.lock();
        inner.log.iter().map(|m| m.message_id.to_string()).collect()
    }

    pub(crate) fn context_token(&self, peer: &str) -> Option<String> {
        self.lock().context_tokens.get(peer).cloned()
    }

    pub(crate) fn set_fault(&self, armed: Option<Armed>) {
        self.lock().fault = armed;
        tracing::info!(?armed, "mock weixin fault set");
    }

    /// Stops honouring every bot token issued so far, the configured one included.
    pub(crate) fn expire_session(&self) {
        self.lock().tokens.clear();
    }

    pub(crate) fn issue_token(&self) -> String {
        self.lock().issue_token(&self.config.bot_id)
    }

    pub(crate) fn stats(&self) -> WeixinStats {
        self.lock().stats.clone()
    }
}

impl Inner {
    /// A new bot token, honoured from now on, shaped like the real ones (`<bot id>:<hex>`).
    pub(super) fn issue_token(&mut self, bot_id: &str) -> String {
        let token = format!("{bot_id}:{}", codec::hex(48));
        self.tokens.insert(token.clone());
        self.stats.tokens_issued += 1;
        token
    }

    /// One strike of the armed poll fault.
    pub(super) fn strike_fault(&mut self) -> Option<WeixinFault> {
        let armed = self.fault.as_mut()?;
        let (fault, stays) = armed.strike();
        if !stays {
            self.fault = None;
        }
        fault
    }

    pub(super) fn violation(&mut self, path: &str, check: &str) {
        if self.stats.violations.len() < VIOLATIONS_KEPT {
            self.stats.violations.push(format!("{path}: {check}"));
        }
    }
}
