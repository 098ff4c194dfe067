//! Telegram's state in the mock: the update queue and its confirmations, the held long poll,
//! the webhook, the chats and their messages, and the armed poll fault, under one lock so that
//! "queue an update", "confirm an offset" and "take over from the held poll" are atomic with
//! respect to each other.
//!
//! Semantics from <https://core.telegram.org/bots/api#getupdates>: an update is confirmed (and
//! forgotten) once a poll carries an offset above its id; a negative offset keeps only that
//! many of the newest; `allowed_updates` persists until a call changes it, and the server
//! never queues an update of a type the bot declined.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};

use super::answers::{TERMINATED_BY_POLL, TERMINATED_BY_WEBHOOK};
use super::config::TelegramConfig;
use super::faults::{Armed, TelegramFault};
use super::objects;
use super::stats::TelegramStats;

pub(crate) struct TelegramState {
    pub(crate) config: TelegramConfig,
    inner: Mutex<Inner>,
    /// Bumped whenever an update is queued, so a held poll wakes.
    arrivals: watch::Sender<u64>,
    /// The files of the messages sent, for `getFile` and the file server.
    pub(crate) files: super::files::Files,
}

struct Update {
    id: i64,
    kind: &'static str,
    body: Value,
}

struct Chat {
    username: Option<String>,
    next_message_id: i64,
    /// Every message in the chat, by id, without its `reply_to_message`: what a reply may
    /// target and what the answer to a reply repeats.
    messages: HashMap<i64, Value>,
}

/// The poll being held, and how to end it early with a 409.
struct Held {
    poll: u64,
    end: oneshot::Sender<&'static str>,
}

/// A registered poll: its number and the channel that ends it early.
pub(crate) struct Registered {
    pub(crate) poll: u64,
    pub(crate) ended: oneshot::Receiver<&'static str>,
}

struct Inner {
    next_update_id: i64,
    pending: VecDeque<Update>,
    generated: Vec<i64>,
    chats: HashMap<i64, Chat>,
    webhook: Option<String>,
    /// The remembered `allowed_updates`; empty means the default set.
    allowed_updates: Vec<String>,
    held: Option<Held>,
    next_poll: u64,
    fault: Option<Armed>,
    /// The last non-empty batch answered, for `Duplicate`.
    last_batch: Option<Vec<Value>>,
    stats: TelegramStats,
}

/// Whether the bot receives updates of this type. The default (an empty list) is every type
/// except `chat_member`, `message_reaction` and `message_reaction_count`.
fn wanted(allowed: &[String], kind: &str) -> bool {
    if allowed.is_empty() {
        !matches!(
            kind,
            "chat_member" | "message_reaction" | "message_reaction_count"
        )
    } else {
        allowed.iter().any(|a| a == kind)
    }
}

impl Inner {
    fn chat(&mut self, id: i64, config: &TelegramConfig) -> &mut Chat {
        self.chats.entry(id).or_insert_with(|| Chat {
            username: config
                .usernames
                .iter()
                .find(|(_, chat)| *chat == id)
                .map(|(name, _)| name.clone()),
            next_message_id: 1,
            messages: HashMap::new(),
        })
    }

    fn end_held(&mut self, reason: &'static str) {
        if let Some(held) = self.held.take() {
            let _ = held.end.send(reason);
        }
    }

    /// Forgets what `offset` confirms.
    fn confirm(&mut self, offset: i64) {
        self.stats.last_offset = Some(offset);
        let before = self.pending.len();
        if offset > 0 {
            self.pending.retain(|u| u.id >= offset);
            self.stats.confirmed_below = self.stats.confirmed_below.max(offset);
        } else if offset < 0 {
            let keep = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
            while self.pending.len() > keep {
                self.pending.pop_front();
            }
        }
        if offset < 0 && self.pending.len() < before {
            let below = self.pending.front().map_or(self.next_update_id, |u| u.id);
            self.stats.confirmed_below = self.stats.confirmed_below.max(below);
        }
    }
}

impl TelegramState {
    pub(crate) fn new(config: TelegramConfig) -> Self {
        let first = config
            .first_update_id
            .unwrap_or_else(|| 100_000_000 + fastrand::i64(0..800_000_000));
        let mut inner = Inner {
            next_update_id: first,
            pending: VecDeque::new(),
            generated: Vec::new(),
            chats: HashMap::new(),
            webhook: None,
            allowed_updates: Vec::new(),
            held: None,
            next_poll: 0,
            fault: None,
            last_batch: None,
            stats: TelegramStats::default(),
        };
        let known = config.usernames.iter().map(|(_, id)| *id);
        for id in config.chats.iter().copied().chain(known) {
            inner.chat(id, &config);
        }
        TelegramState {
            config,
            inner: Mutex::new(inner),
            arrivals: watch::Sender::new(0),
            files: Default::default(),
        }
    }

    /// A panic elsewhere must not poison the state for every later request.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Take before looking at the queue: an update queued after the look still wakes it.
    pub(crate) fn arrivals(&self) -> watch::Receiver<u64> {
        self.arrivals.subscribe()
    }

    /// A text message from the mock's user in `chat_id`, queued as a `message` update (unless
    /// the bot declined messages); returns its `update_id`.
    pub(crate) fn emit_text(&self, chat_id: i64, text: &str) -> i64 {
        self.emit(chat_id, text, Vec::new(), None)
    }

    /// The same, with `entities` (Bot API `MessageEntity` objects) and, when `reply_to` names
    /// a message of the chat, as a reply to it (`reply_to_message`, without its own reply).
    pub(crate) fn emit(
        &self,
        chat_id: i64,
        text: &str,
        entities: Vec<Value>,
        reply_to: Option<i64>,
    ) -> i64 {
        self.emit_shaped(chat_id, reply_to, |message| {
            if !entities.is_empty() {
                message["entities"] = Value::Array(entities);
            }
            message["text"] = json!(text);
        })
    }

    /// A message from the mock's user in `chat_id` with a photo of `bytes` (its one size, a
    /// `PhotoSize` whose `file_id` `getFile` knows) and `caption`; returns its `update_id`.
    pub(crate) fn emit_photo(&self, chat_id: i64, caption: &str, bytes: Vec<u8>) -> i64 {
        let size = bytes.len();
        let (file_id, unique) = self.files.add("photos", "jpg", bytes);
        self.emit_shaped(chat_id, None, |message| {
            message["photo"] = json!([{
                "file_id": file_id, "file_unique_id": unique,
                "width": 1, "height": 1, "file_size": size,
            }]);
            if !caption.is_empty() {
                message["caption"] = json!(caption);
            }
        })
    }

    /// A message from the mock's user in `chat_id` with a document of `bytes` named
    /// `file_name`; returns its `update_id`.
    pub(crate) fn emit_document(&self, chat_id: i64, file_name: &str, bytes: Vec<u8>) -> i64 {
        let size = bytes.len();
        let (file_id, unique) = self.files.add("documents", "bin", bytes);
        self.emit_shaped(chat_id, None, |message| {
            message["document"] = json!({
                "file_id": file_id, "file_unique_id": unique,
                "file_name": file_name, "file_size": size,
            });
        })
    }

    /// A message from the mock's user in `chat_id` with a voice note of `bytes` (the Bot API's
    /// `Voice`: an Ogg/Opus recording, its `duration` in seconds); returns its `update_id`.
    pub(crate) fn emit_voice(&self, chat_id: i64, bytes: Vec<u8>) -> i64 {
        let size = bytes.len();
        let (file_id, unique) = self.files.add("voice", "oga", bytes);
        self.emit_shaped(chat_id, None, |message| {
            message["voice"] = json!({
                "file_id": file_id, "file_unique_id": unique,
                "duration": 1, "mime_type": "audio/ogg", "file_size": size,
            });
        })
    }

    /// A message from the mock's user in `chat_id`, its content given by `shape`, queued as a
    /// `message` update; as a reply to `reply_to` when that names a message of the chat.
    fn emit_shaped(
        &self,
        chat_id: i64,
        reply_to: Option<i64>,
        shape: impl FnOnce(&mut Value),
    ) -> i64 {
        let mut inner = self.lock();
        let chat = inner.chat(chat_id, &self.config);
        let message_id = chat.next_message_id;
        chat.next_message_id += 1;
        let chat_object = objects::chat(chat_id, chat.username.as_deref());
        let from = objects::user_author(chat_id);
        let mut message = objects::message(message_id, from, chat_object, objects::unix_now());
        shape(&mut message);
        chat.messages.insert(message_id, message.clone());
        if let Some(replied) = reply_to.and_then(|id| chat.messages.get(&id)) {
            message["reply_to_message"] = replied.clone();
        }
        let id = inner.next_update_id;
        inner.next_update_id += 1;
        inner.generated.push(id);
        inner.stats.updates += 1;
        if wanted(&inner.allowed_updates, "message") {
            let body = json!({"update_id": id, "message": message});
            inner.pending.push_back(Update {
                id,
                kind: "message",
                body,
            });
        }
        drop(inner);
        self.arrivals.send_modify(|n| *n = n.wrapping_add(1));
        id
    }

    pub(crate) fn updates_generated(&self) -> usize {
        self.lock().generated.len()
    }

    pub(crate) fn update_ids(&self) -> Vec<i64> {
        self.lock().generated.clone()
    }

    /// One poll arrived: counted, and the armed fault struck (used up if counted).
    pub(crate) fn strike(&self) -> Option<TelegramFault> {
        let mut inner = self.lock();
        inner.stats.polls += 1;
        inner.stats.poll_times.push(Instant::now());
        let (fault, stays) = inner.fault.as_mut()?.strike();
        if !stays {
            inner.fault = None;
        }
        fault
    }

    pub(crate) fn set_fault(&self, armed: Option<Armed>) {
        tracing::info!(fault = ?armed.map(|a| a.fault), polls = ?armed.and_then(|a| a.polls), "mock telegram fault set");
        self.lock().fault = armed;
    }

    /// Registers a poll as the one held: ends the poll held before (409), applies `offset`
    /// and `allowed_updates`. `None` while a webhook is set.
    pub(crate) fn begin_poll(
        &self,
        offset: Option<i64>,
        asked_timeout: u64,
        allowed: Option<Vec<String>>,
    ) -> Option<Registered> {
        let mut inner = self.lock();
        let stats = &mut inner.stats;
        stats.max_timeout_asked = stats.max_timeout_asked.max(asked_timeout);
        if let Some(allowed) = allowed {
            inner.stats.last_allowed_updates = Some(allowed.clone());
            inner.allowed_updates = allowed;
        }
        if inner.webhook.is_some() {
            return None;
        }
        inner.end_held(TERMINATED_BY_POLL);
        if let Some(offset) = offset {
            inner.confirm(offset);
        }
        inner.next_poll += 1;
        let poll = inner.next_poll;
        let (end, ended) = oneshot::channel();
        inner.held = Some(Held { poll, end });
        Some(Registered { poll, ended })
    }

    /// Up to `limit` pending updates, oldest first; pending updates of a type the bot declined
    /// are dropped.
    pub(crate) fn batch(&self, limit: usize) -> Vec<Value> {
        let mut inner = self.lock();
        let allowed = std::mem::take(&mut inner.allowed_updates);
        inner.pending.retain(|u| wanted(&allowed, u.kind));
        inner.allowed_updates = allowed;
        let batch = inner.pending.iter().take(limit);
        batch.map(|u| u.body.clone()).collect()
    }

    /// The poll is no longer held (if it still was).
    pub(crate) fn release(&self, poll: u64) {
        let mut inner = self.lock();
        if inner.held.as_ref().is_some_and(|held| held.poll == poll) {
            inner.held = None;
        }
    }

    /// A poll was answered `ok: true` with `batch`.
    pub(crate) fn answered(&self, batch: &[Value]) {
        let mut inner = self.lock();
        inner.stats.answered += 1;
        if !batch.is_empty() {
            inner.last_batch = Some(batch.to_vec());
        }
    }

    pub(crate) fn last_batch(&self) -> Option<Vec<Value>> {
        self.lock().last_batch.clone()
    }

    pub(crate) fn count(&self, bump: impl FnOnce(&mut TelegramStats)) {
        bump(&mut self.lock().stats);
    }

    pub(crate) fn stats(&self) -> TelegramStats {
        let inner = self.lock();
        TelegramStats {
            pending: inner.pending.len(),
            ..inner.stats.clone()
        }
    }

    /// Sets (or with `None` removes) the webhook; a poll held now ends with 409. Returns
    /// whether a webhook was set before.
    pub(crate) fn set_webhook(&self, url: Option<String>, drop_pending: bool) -> bool {
        let mut inner = self.lock();
        if url.is_some() {
            inner.end_held(TERMINATED_BY_WEBHOOK);
        }
        if drop_pending {
            inner.pending.clear();
        }
        let was = inner.webhook.is_some();
        inner.webhook = url;
        was
    }

    pub(crate) fn set_allowed_updates(&self, allowed: Vec<String>) {
        self.lock().allowed_updates = allowed;
    }

    pub(crate) fn webhook(&self) -> Option<String> {
        self.lock().webhook.clone()
    }

    /// `getWebhookInfo`'s result.
    pub(crate) fn webhook_info(&self) -> Value {
        let inner = self.lock();
        let mut info = json!({
            "url": inner.webhook.clone().unwrap_or_default(),
            "has_custom_certificate": false,
            "pending_update_count": inner.pending.len(),
        });
        if inner.webhook.is_some() {
            info["max_connections"] = json!(40);
            if !inner.allowed_updates.is_empty() {
                info["allowed_updates"] = json!(inner.allowed_updates);
            }
        }
        info
    }

    /// The chat a `chat_id` names, if the bot knows it: an integer (as a number or string) or
    /// a public chat's `@username`.
    pub(crate) fn resolve_chat(&self, chat_id: &str) -> Option<i64> {
        let chat_id = chat_id.trim();
        if let Some(name) = chat_id.strip_prefix('@') {
            let usernames = &self.config.usernames;
            let found = usernames.iter().find(|(u, _)| u.eq_ignore_ascii_case(name));
            return found.map(|(_, id)| *id);
        }
        let id = chat_id.parse().ok()?;
        self.lock().chats.contains_key(&id).then_some(id)
    }

    pub(crate) fn has_message(&self, chat_id: i64, message_id: i64) -> bool {
        let inner = self.lock();
        let chat = inner.chats.get(&chat_id);
        chat.is_some_and(|chat| chat.messages.contains_key(&message_id))
    }

    /// The bot's latest message in `chat_id`, if it has posted there.
    pub(crate) fn last_bot_message(&self, chat_id: i64) -> Option<i64> {
        let bot = self.config.bot_id();
        let inner = self.lock();
        let messages = &inner.chats.get(&chat_id)?.messages;
        let by_bot = messages.iter().filter(|(_, m)| m["from"]["id"] == bot);
        by_bot.map(|(id, _)| *id).max()
    }

    /// Stores the bot's text message in the chat; returns its id and the `Message` to answer.
    pub(crate) fn bot_message(
        &self,
        chat_id: i64,
        text: &str,
        reply_to: Option<i64>,
    ) -> (i64, Value) {
        self.bot_message_with(chat_id, reply_to, |message| message["text"] = json!(text))
    }

    /// Stores the bot's message in the chat, its content given by `shape` (a text, or a file
    /// and its caption); returns its id and the `Message` to answer.
    pub(crate) fn bot_message_with(
        &self,
        chat_id: i64,
        reply_to: Option<i64>,
        shape: impl FnOnce(&mut Value),
    ) -> (i64, Value) {
        let mut inner = self.lock();
        let chat = inner.chat(chat_id, &self.config);
        let message_id = chat.next_message_id;
        chat.next_message_id += 1;
        let chat_object = objects::chat(chat_id, chat.username.as_deref());
        let from = objects::bot_user(&self.config);
        let mut message = objects::message(message_id, from, chat_object, objects::unix_now());
        shape(&mut message);
        chat.messages.insert(message_id, message.clone());
        if let Some(replied) = reply_to.and_then(|id| chat.messages.get(&id)) {
            message["reply_to_message"] = replied.clone();
        }
        (message_id, message)
    }
}
