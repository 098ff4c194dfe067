//! Matrix, receiving: the `/sync` long poll (docs/research/matrix-client-server.md §2–§4, §6).
//!
//! Each poll sends `since` (the `next_batch` of the last batch stored), `timeout` (how long the
//! server may hold it), an inline filter and `set_presence=offline`. `next_batch` is written
//! to `inbox/cursors/ADAPTER` only after the batch's events are in the spool, so a crash in
//! between syncs from the old position and the spool drops what it already has, by event id.
//!
//! What the SDKs get wrong, and what this does instead:
//! - The poll's client deadline, its timeout plus `poll-grace`, covers the whole answer, for
//!   the first poll too: a server that sends half a body and stalls is a dead connection.
//! - A **limited** timeline (more new events than the filter's limit, after the gateway was
//!   away) is filled from `/rooms/{roomId}/messages`, forward from the position the sync
//!   started at to its `prev_batch`, before the cursor moves, so a gap loses nothing; each
//!   page is stored as it comes (a [`Polled::Part`]), so a batch holds one page at a time,
//!   within a bound of pages per room and per batch (`backfill.rs`).
//! - `M_UNKNOWN_TOKEN` is a login to renew (`needs-login`, in status and doctor), not a
//!   request loop; a 429 waits `Retry-After`, else `retry_after_ms`; a 5xx backs off.
//! - A server that no longer takes the kept `since` (400) gets a fresh sync, whose
//!   timelines are stored (the spool drops what it has); only a first sync ever, with no
//!   cursor, is a baseline: its timelines are history, not messages to answer.
//!
//! Encrypted rooms are not read (the gateway holds no keys): their events are counted and
//! said in status. The bot's own messages are stored marked as its own
//! ([`super::normalise::OWN`]).

mod backfill;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::watch;

use self::backfill::{Gap, Room, Taking, PAGES_PER_BATCH};
use super::api::{Api, Refusal};
use super::normalise::OWN;
use crate::config::PollTiming;
use crate::gateway::adapter::cursor_file::{Cursor, CursorFile};
use crate::gateway::adapter::long_poll::{exchange, Exchange, Poll, Polled};
use crate::gateway::health::Heartbeat;
use crate::gateway::spool::Event;
use crate::safe_text::clip;

/// The event types the bot is shown. Encryption and membership are state that changes inside
/// a sync's window and so shows only in `timeline` (note §3): they are asked for, and read
/// for what they say about the room, never stored.
const TIMELINE_TYPES: &[&str] = &[
    "m.room.message",
    "m.room.encrypted",
    "m.room.encryption",
];
/// Events per room per sync before the server says `limited`; the gap is then paged.
const TIMELINE_LIMIT: u32 = 50;

pub(crate) struct Matrix {
    adapter: String,
    api: Api,
    user_id: String,
    token_env: String,
    poll: PollTiming,
    /// The inline `/sync` filter.
    filter: String,
    cursor: CursorFile,
    /// Whether the last poll was answered. Until one is, polls ask the server not to wait
    /// (`timeout=0`): the adapter reports in at once, not after a quiet room's 30 s.
    answered: bool,
    /// The server refused the kept cursor: the next sync from none is a catch-up, not a
    /// baseline.
    catch_up: bool,
    heartbeat: Heartbeat,
    /// Encrypted rooms, and how many of their events could not be read.
    encrypted: BTreeMap<String, u64>,
    /// The sync answer being taken, part by part, while its gaps are paged.
    taking: Option<Taking>,
}

pub(crate) struct MatrixConfig<'a> {
    pub(crate) adapter: &'a str,
    pub(crate) api: Api,
    pub(crate) user_id: &'a str,
    pub(crate) token_env: &'a str,
    pub(crate) rooms: &'a [String],
    pub(crate) poll: PollTiming,
    pub(crate) cursor_file: PathBuf,
    pub(crate) heartbeat: Heartbeat,
}

impl Matrix {
    /// A kept position that cannot be used is said (in the log and in status) and the sync
    /// from none that follows is a catch-up, whose timelines are stored: the bot synced
    /// before, so they are messages, not history; what the gap held beyond them is lost, and
    /// the error says so.
    pub(crate) fn new(c: MatrixConfig) -> Self {
        let cursor = CursorFile::open(c.adapter, c.cursor_file);
        let catch_up = cursor.refused().is_some();
        if let Some(why) = cursor.refused() {
            c.heartbeat.error(format!(
                "the kept sync position cannot be used ({}); syncing afresh: the latest \
                 {TIMELINE_LIMIT} events of each room are stored, anything older since the \
                 gateway stopped is not fetched",
                clip(why, 200)
            ));
        }
        Matrix {
            adapter: c.adapter.to_owned(),
            api: c.api,
            user_id: c.user_id.to_owned(),
            token_env: c.token_env.to_owned(),
            poll: c.poll,
            filter: filter(c.rooms).to_string(),
            cursor,
            answered: false,
            catch_up,
            heartbeat: c.heartbeat,
            encrypted: BTreeMap::new(),
            taking: None,
        }
    }

    /// How long the server may hold the next poll.
    fn timeout(&self) -> Duration {
        if self.answered && !self.cursor.current().is_empty() {
            self.poll.timeout
        } else {
            Duration::ZERO
        }
    }

    async fn sync(&mut self) -> Polled {
        let since = self.cursor.current().to_owned();
        let timeout = self.timeout();
        let timeout_ms = timeout.as_millis().to_string();
        let mut query = vec![
            ("filter", self.filter.as_str()),
            ("timeout", timeout_ms.as_str()),
            ("set_presence", "offline"),
        ];
        if !since.is_empty() {
            query.push(("since", since.as_str()));
        }
        let Some(request) = self.api.request(Method::GET, &["sync"], &query) else {
            return Polled::Fatal(self.unusable_token());
        };
        match exchange(request, self.poll.deadline(timeout)).await {
            Exchange::Answer {
                status: 200, body, ..
            } => self.batch(&since, &body).await,
            Exchange::Answer {
                status,
                headers,
                body,
            } => self.refused(&since, Refusal::read(status, &headers, &body)),
            Exchange::Dead(e) => Polled::Dead(e),
            Exchange::Failed(e) => Polled::Failed(format!("/sync: {e}")),
        }
    }

    /// A sync's answer, read into what is left to take of it: each joined room's timeline,
    /// and its gap when the timeline is limited. Only the timelines are kept of the answer.
    async fn batch(&mut self, since: &str, body: &[u8]) -> Polled {
        let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
            return Polled::Failed("/sync answered 200 with a body that is not JSON".into());
        };
        // Taken, or refused, before anything of the batch is: a batch whose position cannot
        // be kept is not stored, and the next sync goes from the last one kept.
        let next = match Cursor::take(v["next_batch"].as_str().unwrap_or_default()) {
            Ok(next) => next,
            Err(e) => {
                return Polled::Failed(format!(
                    "/sync answered a next_batch that cannot be kept ({e}); the batch is not \
                     taken and syncing goes on from the last position kept"
                ))
            }
        };
        let baseline = since.is_empty() && !std::mem::take(&mut self.catch_up);
        let joined = v.get_mut("rooms").and_then(|r| r.get_mut("join")).map(Value::take);
        let mut rooms = VecDeque::new();
        for (id, mut joined) in joined.and_then(object).into_iter().flatten() {
            self.note_encryption(&id, list(&joined["state"]["events"]));
            let timeline = &joined["timeline"];
            let gap = match timeline["prev_batch"].as_str() {
                Some(prev) if timeline["limited"] == true && !since.is_empty() => {
                    Some(Gap::new(since, prev))
                }
                _ => None,
            };
            let events = joined
                .get_mut("timeline")
                .and_then(|t| t.get_mut("events"))
                .map(Value::take);
            let timeline = match events {
                Some(Value::Array(events)) => events,
                _ => Vec::new(),
            };
            rooms.push_back(Room { id, gap, timeline });
        }
        drop(v);
        if baseline {
            tracing::info!(adapter = %self.adapter, "first sync: the rooms' history so far is not stored; messages from now on are");
        }
        let taking = Taking {
            next,
            baseline,
            rooms,
            pages_left: PAGES_PER_BATCH,
        };
        self.take_on(taking).await
    }

    /// Take what is left of a sync's answer, room by room: the next page of a room's gap,
    /// stored (a [`Polled::Part`]) before the page after it is asked for; a room whose gap is
    /// done, its timeline; once every room is, the batch, with `next_batch` staged.
    async fn take_on(&mut self, mut t: Taking) -> Polled {
        let mut ready = Vec::new();
        while let Some(mut room) = t.rooms.pop_front() {
            if let Some(gap) = room.gap.take() {
                if t.pages_left == 0 {
                    tracing::warn!(adapter = %self.adapter, room = %clip(&room.id, 80), pages = PAGES_PER_BATCH, "the sync's pages for gaps are spent; this room's gap was not fetched");
                } else if !ready.is_empty() {
                    room.gap = Some(gap);
                    t.rooms.push_front(room);
                    self.taking = Some(t);
                    return Polled::Part(ready);
                } else {
                    let filter = self.timeline_filter();
                    let page = match backfill::page(&self.api, &room.id, gap, &filter).await {
                        Ok(page) => page,
                        Err(polled) => return polled,
                    };
                    t.pages_left -= 1;
                    room.gap = page.rest;
                    let events = self.events(&room.id, page.events, t.baseline);
                    t.rooms.push_front(room);
                    self.taking = Some(t);
                    return Polled::Part(events);
                }
            }
            let events = self.events(&room.id, room.timeline, t.baseline);
            ready.extend(events);
        }
        self.cursor.stage(t.next);
        self.say_encrypted();
        Polled::Batch(ready)
    }

    /// A room's timeline events as spool events (none for a baseline), noting encryption.
    fn events(&mut self, room: &str, events: Vec<Value>, baseline: bool) -> Vec<Event> {
        self.note_encryption(room, &events);
        if baseline {
            return Vec::new();
        }
        events
            .into_iter()
            .filter_map(|e| self.event(room, e))
            .collect()
    }

    /// One timeline event as a spool event, or none: only messages are stored, and one with
    /// no usable id cannot be deduplicated, so it is skipped (and said).
    fn event(&mut self, room: &str, mut e: Value) -> Option<Event> {
        let kind = e["type"].as_str()?.to_owned();
        if kind == "m.room.encrypted" {
            *self.encrypted.entry(room.to_owned()).or_default() += 1;
            return None;
        }
        if kind != "m.room.message" {
            return None;
        }
        let Some(id) = e["event_id"].as_str().filter(|id| !id.is_empty() && id.len() <= 255)
        else {
            tracing::warn!(adapter = %self.adapter, room = %clip(room, 80), "a message with no usable event_id; skipped");
            return None;
        };
        let id = id.to_owned();
        let own = e["sender"] == self.user_id.as_str();
        if let Some(o) = e.as_object_mut() {
            o.insert("room_id".into(), json!(room));
            if own {
                o.insert(OWN.into(), json!(true));
            }
        }
        Some(Event::new(id, &self.adapter, kind, None, e))
    }

    /// A room is encrypted from its `m.room.encryption` state, in the sync's state or inside
    /// the timeline (switched on mid-session).
    fn note_encryption(&mut self, room: &str, events: &[Value]) {
        let on = events.iter().any(|e| e["type"] == "m.room.encryption");
        if on {
            self.encrypted.entry(room.to_owned()).or_default();
        }
    }

    /// Encrypted rooms in status: the gateway cannot read them, and a person should know.
    fn say_encrypted(&self) {
        let unread: u64 = self.encrypted.values().sum();
        if self.encrypted.is_empty() {
            return;
        }
        let rooms: Vec<String> = self.encrypted.keys().map(|r| clip(r, 80)).collect();
        self.heartbeat.error(format!(
            "{} encrypted room(s) not read ({}): {unread} event(s) skipped; end-to-end \
             encryption is not supported",
            rooms.len(),
            rooms.join(", ")
        ));
    }

    fn refused(&mut self, since: &str, r: Refusal) -> Polled {
        let said = format!("/sync: {r}");
        if r.token_refused() {
            return Polled::NeedsLogin(format!("{said}: {}", r.token_fix(&self.token_env)));
        }
        if r.rate_limited() {
            return Polled::Wait(r.wait(), said);
        }
        if r.status == 400 && !since.is_empty() && !r.is("M_NOT_JSON") && !r.is("M_BAD_JSON") {
            // Synapse's answer to a since it cannot read ("Invalid stream token", M_UNKNOWN).
            tracing::warn!(adapter = %self.adapter, reason = %said, "the homeserver no longer takes the kept sync position; syncing afresh and storing what it sends");
            self.cursor.forget();
            self.catch_up = true;
            return Polled::Failed(format!("{said}; syncing afresh"));
        }
        match r.status {
            400..=499 if r.status != 408 => Polled::Fatal(format!(
                "{said}: the homeserver refuses the sync request; check that homeserver in \
                 gateway.toml is the client-server API's base URL (what \
                 /.well-known/matrix/client names)"
            )),
            _ => Polled::Failed(said),
        }
    }

    fn unusable_token(&self) -> String {
        format!(
            "the access token in {} holds a character an HTTP header cannot carry; put the \
             token alone in the profile's .env",
            self.token_env
        )
    }

    /// The RoomEventFilter for paging a gap: the timeline's own.
    fn timeline_filter(&self) -> String {
        json!({"types": TIMELINE_TYPES}).to_string()
    }
}

/// A JSON object's fields, if it is one.
fn object(v: Value) -> Option<serde_json::Map<String, Value>> {
    match v {
        Value::Object(o) => Some(o),
        _ => None,
    }
}

/// A JSON array's items, or none.
fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// The inline filter (note §3): no presence, account data or ephemeral events; the rooms'
/// state only for what says a room is encrypted; the timeline's types, `rooms` when given.
fn filter(rooms: &[String]) -> Value {
    let none = json!({"not_types": ["*"]});
    let mut room = json!({
        "include_leave": false,
        "ephemeral": none,
        "account_data": none,
        "state": {"types": ["m.room.encryption"], "lazy_load_members": true},
        "timeline": {"types": TIMELINE_TYPES, "limit": TIMELINE_LIMIT},
    });
    if !rooms.is_empty() {
        room["rooms"] = json!(rooms);
    }
    json!({"presence": none, "account_data": none, "room": room})
}

impl Poll for Matrix {
    async fn poll(&mut self) -> Polled {
        let polled = match self.taking.take() {
            Some(taking) => self.take_on(taking).await,
            None => self.sync().await,
        };
        self.answered = matches!(polled, Polled::Batch(_) | Polled::Part(_));
        polled
    }

    /// A part of the batch did not reach the spool: the next poll syncs again from the kept
    /// position, rather than go on past what was lost.
    fn abandon(&mut self) {
        self.taking = None;
    }

    /// Every event of the last batch is stored: sync on from its `next_batch`.
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
        if self.taking.is_some() {
            return backfill::PAGE_DEADLINE;
        }
        self.poll.deadline(self.timeout())
    }

    fn longest_poll(&self) -> Duration {
        self.poll.deadline(self.poll.timeout)
    }

    /// Ask `whoami` once a long poll's time, beating, until the token works again (a soft
    /// logout the server lifted) or shutdown: no more requests than syncing makes, and none
    /// that loops. A new token in `.env` comes with a restart.
    async fn await_login(&mut self, hb: &Heartbeat, shutdown: &mut watch::Receiver<bool>) -> bool {
        loop {
            hb.beat();
            tokio::select! {
                _ = tokio::time::sleep(self.longest_poll()) => {}
                _ = crate::gateway::until_shutdown(shutdown) => return true,
            }
            let Some(request) = self.api.request(Method::GET, &["account", "whoami"], &[]) else {
                continue;
            };
            if let Exchange::Answer { status: 200, .. } = exchange(request, self.poll.grace).await
            {
                tracing::info!(adapter = %self.adapter, "the homeserver takes the access token again");
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_asks_only_for_the_timeline_and_the_named_rooms() {
        let all = filter(&[]);
        assert_eq!(all["room"]["timeline"]["limit"], TIMELINE_LIMIT);
        assert!(all["room"].get("rooms").is_none());
        assert_eq!(all["presence"]["not_types"][0], "*");
        let some = filter(&["!a:hs".into()]);
        assert_eq!(some["room"]["rooms"], json!(["!a:hs"]));
    }
}
