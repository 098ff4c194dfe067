//! The mock homeserver's memory: one stream of events over every room, each room's state
//! history, the uploaded filters, the armed `/sync` fault and the counters, under one lock so
//! that "append an event" and "look at the stream from a position" are atomic with respect to
//! each other.
//!
//! The stream is what makes the tokens work (docs/research/matrix-client-server.md §2, §4):
//! an event's position is its index in the stream, a token is a position, and `/sync` and
//! `/messages` are both views of the stream from one. Room state is kept as a history, so
//! that "the state at the start of the timeline" (spec §Syncing) can be answered for any
//! timeline.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::config::MatrixConfig;
use super::events::{self, Origin, Stored};
use super::faults::{Armed, MatrixFault};
use super::filter::{EventFilter, SyncFilter};
use super::stats::MatrixStats;
use super::tokens::{self, Kind};

pub(crate) struct MatrixState {
    pub(crate) config: MatrixConfig,
    /// Tells this mock's tokens from another run's.
    pub(crate) epoch: u32,
    inner: Mutex<Inner>,
    /// Bumped whenever an event is appended, so a held `/sync` looks again.
    arrivals: watch::Sender<u64>,
    /// The content repository.
    pub(crate) media: super::media::Media,
}

struct Room {
    id: String,
    /// Whether the bot is in it; the handle can write into rooms the bot is not in.
    joined: bool,
    /// Every state event, with the stream position it took effect at (0: before the mock's
    /// history began).
    state: Vec<(u64, Value)>,
}

impl Room {
    /// The state as it was at `position`: for each `(type, state_key)`, the latest event at
    /// or before it.
    fn state_at(&self, position: u64) -> Vec<&Value> {
        self.latest(|at| at <= position, |_| true)
    }

    /// The state at `to` of every `(type, state_key)` that changed after `from`: the delta a
    /// client that saw the room at `from` needs to know the state at `to`.
    fn state_changed(&self, from: u64, to: u64) -> Vec<&Value> {
        let changed = |key: &(&str, &str)| {
            self.state
                .iter()
                .any(|(at, event)| *at > from && *at <= to && state_key_of(event) == *key)
        };
        self.latest(|at| at <= to, changed)
    }

    fn latest(
        &self,
        when: impl Fn(u64) -> bool,
        keep: impl Fn(&(&str, &str)) -> bool,
    ) -> Vec<&Value> {
        let mut latest: Vec<&Value> = Vec::new();
        for (_, event) in self.state.iter().filter(|(at, _)| when(*at)) {
            let key = state_key_of(event);
            latest.retain(|seen| state_key_of(seen) != key);
            latest.push(event);
        }
        latest.retain(|event| keep(&state_key_of(event)));
        latest
    }
}

fn state_key_of(event: &Value) -> (&str, &str) {
    let field = |name: &str| event[name].as_str().unwrap_or_default();
    (field("type"), field("state_key"))
}

struct Inner {
    /// Every event, in stream order: the event at index `i` has position `i + 1`.
    events: Vec<Stored>,
    rooms: Vec<Room>,
    next_event: u64,
    /// Uploaded filters; a filter's id is its index.
    filters: Vec<Value>,
    fault: Option<Armed>,
    revoked: bool,
    /// The last `/sync` answer that carried events, for `RepeatBatch`.
    last_batch: Option<Value>,
    stats: MatrixStats,
}

impl Inner {
    fn position(&self) -> u64 {
        u64::try_from(self.events.len()).unwrap_or(u64::MAX)
    }

    fn room(&self, id: &str) -> Option<&Room> {
        self.rooms.iter().find(|room| room.id == id)
    }

    /// The room, which exists from now on (without the bot) if it did not.
    fn room_mut(&mut self, id: &str) -> &mut Room {
        let at = match self.rooms.iter().position(|room| room.id == id) {
            Some(at) => at,
            None => {
                self.rooms.push(Room {
                    id: id.to_owned(),
                    joined: false,
                    state: Vec::new(),
                });
                self.rooms.len() - 1
            }
        };
        &mut self.rooms[at]
    }
}

/// One `/sync` answer's rooms, taken at one position of the stream.
pub(crate) struct SyncView {
    /// The position the view was taken at: the `next_batch` when it carries anything.
    pub(crate) position: u64,
    /// `rooms.join`.
    pub(crate) join: Map<String, Value>,
    /// Timeline events over every room.
    pub(crate) events: usize,
    /// Rooms whose timeline was limited.
    pub(crate) limited: u64,
}

/// One `/messages` page.
pub(crate) struct Page {
    pub(crate) chunk: Vec<Value>,
    /// Where the next page starts; `None` when nothing more is left in the range.
    pub(crate) end: Option<u64>,
}

/// Which way `/messages` pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Backwards,
    Forwards,
}

/// While alive, a `/sync` counts as held (`live_syncs`).
pub(crate) struct Live<'a>(&'a MatrixState);

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0
            .count(|s| s.live_syncs = s.live_syncs.saturating_sub(1));
    }
}

impl MatrixState {
    pub(crate) fn new(config: MatrixConfig) -> Self {
        let server = config.server_name().to_owned();
        let mut rooms: Vec<Room> = Vec::new();
        for id in &config.rooms {
            if !rooms.iter().any(|room| &room.id == id) {
                let state = Vec::new();
                rooms.push(Room {
                    id: id.clone(),
                    joined: true,
                    state,
                });
            }
        }
        let mut inner = Inner {
            events: Vec::new(),
            rooms,
            next_event: 0,
            filters: Vec::new(),
            fault: None,
            revoked: false,
            last_batch: None,
            stats: MatrixStats::default(),
        };
        for (n, id) in config.encrypted_rooms.iter().enumerate() {
            let event_id = format!("$mxstate{}:{server}", n + 1);
            let event = events::state(
                &event_id,
                "m.room.encryption",
                "",
                &config.human,
                events::encryption(),
            );
            inner.room_mut(id).state.push((0, event));
        }
        MatrixState {
            config,
            epoch: fastrand::u32(1..1_000_000),
            inner: Mutex::new(inner),
            arrivals: watch::Sender::new(0),
            media: Default::default(),
        }
    }

    /// A panic elsewhere must not poison the state for every later request.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Take before looking at the stream: an event appended after the look still wakes it.
    pub(crate) fn arrivals(&self) -> watch::Receiver<u64> {
        self.arrivals.subscribe()
    }

    /// The position of the newest event.
    pub(crate) fn position(&self) -> u64 {
        self.lock().position()
    }

    pub(crate) fn token(&self, kind: Kind, position: u64) -> String {
        tokens::mint(kind, position, self.epoch)
    }

    /// The position a token of one of `kinds` names, if this homeserver minted it.
    pub(crate) fn parse_token(&self, token: &str, kinds: &[Kind]) -> Option<u64> {
        tokens::parse(token, kinds, self.epoch, self.position())
    }

    /// A new event id under the bot's server name.
    pub(crate) fn mint_event_id(&self) -> String {
        let mut inner = self.lock();
        inner.next_event += 1;
        format!("$mx{}:{}", inner.next_event, self.config.server_name())
    }

    /// Appends an event to a room's timeline (and to its state, if it has a `state_key`),
    /// and wakes the held syncs.
    pub(crate) fn append(
        &self,
        room: &str,
        event: Value,
        origin: Origin,
        transaction_id: Option<String>,
    ) {
        let mut inner = self.lock();
        let position = inner.position() + 1;
        if event.get("state_key").is_some() {
            inner.room_mut(room).state.push((position, event.clone()));
        } else {
            inner.room_mut(room);
        }
        inner.events.push(Stored {
            position,
            room: room.to_owned(),
            event,
            origin,
            transaction_id,
        });
        drop(inner);
        self.arrivals.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// An event from the mock's human; its id.
    pub(crate) fn emit(
        &self,
        room: &str,
        kind: &str,
        state_key: Option<&str>,
        content: Value,
        origin: Origin,
    ) -> String {
        let event_id = self.mint_event_id();
        let sender = &self.config.human;
        let event = match state_key {
            Some(key) => events::state(&event_id, kind, key, sender, content),
            None => events::message(&event_id, kind, sender, content),
        };
        self.append(room, event, origin, None);
        event_id
    }

    pub(crate) fn human_messages(&self) -> usize {
        let inner = self.lock();
        let human = |e: &&Stored| e.origin == Origin::HumanMessage;
        inner.events.iter().filter(human).count()
    }

    pub(crate) fn event_ids(&self, only: Option<Origin>) -> Vec<String> {
        let inner = self.lock();
        let wanted = |e: &&Stored| only.is_none_or(|origin| e.origin == origin);
        let ids = inner.events.iter().filter(wanted);
        ids.map(|e| e.event_id().to_owned()).collect()
    }

    pub(crate) fn joined_rooms(&self) -> Vec<String> {
        let inner = self.lock();
        let joined = inner.rooms.iter().filter(|room| room.joined);
        joined.map(|room| room.id.clone()).collect()
    }

    pub(crate) fn is_joined(&self, room: &str) -> bool {
        self.lock().room(room).is_some_and(|room| room.joined)
    }

    /// The content of the room's current state event of this type and key.
    pub(crate) fn current_state(&self, room: &str, kind: &str, state_key: &str) -> Option<Value> {
        let inner = self.lock();
        let room = inner.room(room)?;
        let state = room.state_at(u64::MAX);
        let found = state
            .into_iter()
            .find(|e| state_key_of(e) == (kind, state_key));
        found.map(|event| event["content"].clone())
    }

    /// The rooms part of a `/sync` from `since` (`None`: an initial sync), as the spec's
    /// §Syncing and Synapse (docs/research/matrix-client-server.md §2) shape it: per joined
    /// room the filter wants, the newest `limit` new events that pass the timeline filter
    /// (`limited` when there were more), a `prev_batch` just before the first of them, and
    /// the state at the start of the timeline: all of it on an initial or `full_state`
    /// sync, otherwise only what changed between `since` and that start. An incremental sync
    /// leaves out rooms with nothing new.
    pub(crate) fn sync_view(
        &self,
        since: Option<u64>,
        filter: &SyncFilter,
        full_state: bool,
    ) -> SyncView {
        let inner = self.lock();
        let position = inner.position();
        let after = since.unwrap_or(0);
        let whole = since.is_none() || full_state;
        let limit = filter.timeline().limit();
        let mut view = SyncView {
            position,
            join: Map::new(),
            events: 0,
            limited: 0,
        };
        let rooms = inner.rooms.iter();
        for room in rooms.filter(|room| room.joined && filter.wants_room(&room.id)) {
            let new = inner.events.iter().filter(|e| {
                e.room == room.id && e.position > after && filter.timeline().matches(&e.event)
            });
            let new: Vec<&Stored> = new.collect();
            let limited = new.len() > limit;
            let timeline = &new[new.len().saturating_sub(limit)..];
            if timeline.is_empty() && !whole {
                continue;
            }
            // The position just before the timeline's first event.
            let before = timeline.first().map_or(position, |e| e.position - 1);
            let state = if whole {
                room.state_at(before)
            } else {
                room.state_changed(after, before)
            };
            let state: Vec<Value> = state
                .into_iter()
                .filter(|event| filter.state().matches(event))
                .map(|event| events::served(event, &room.id, false, None))
                .collect();
            let timeline: Vec<Value> = timeline.iter().map(|e| e.client_event(false)).collect();
            view.events += timeline.len();
            view.limited += u64::from(limited);
            let entry = json!({
                "timeline": {
                    "events": timeline,
                    "limited": limited,
                    "prev_batch": self.token(Kind::Room, before),
                },
                "state": {"events": state},
                "ephemeral": {"events": []},
                "account_data": {"events": []},
            });
            view.join.insert(room.id.clone(), entry);
        }
        view
    }

    /// One `/messages` page of `room` (spec `GET /rooms/{roomId}/messages`, research note
    /// §4): backwards, the events at or before `from` and after `to`, newest first; forwards,
    /// the events after `from` up to `to`, oldest first. `end` is where the next page starts,
    /// present only while events that pass the filter are left in the range.
    pub(crate) fn page(
        &self,
        room: &str,
        direction: Direction,
        from: Option<u64>,
        to: Option<u64>,
        limit: usize,
        filter: &EventFilter,
    ) -> Page {
        let inner = self.lock();
        let position = inner.position();
        let (low, high) = match direction {
            Direction::Backwards => (to.unwrap_or(0), from.unwrap_or(position)),
            Direction::Forwards => (from.unwrap_or(0), to.unwrap_or(position)),
        };
        let in_range = inner.events.iter().filter(|e| {
            e.room == room && e.position > low && e.position <= high && filter.matches(&e.event)
        });
        let mut matching: Vec<&Stored> = in_range.collect();
        if direction == Direction::Backwards {
            matching.reverse();
        }
        let chunk = &matching[..limit.min(matching.len())];
        let end = (matching.len() > chunk.len()).then(|| match (direction, chunk.last()) {
            (Direction::Backwards, Some(last)) => last.position - 1,
            (Direction::Forwards, Some(last)) => last.position,
            (Direction::Backwards, None) => high,
            (Direction::Forwards, None) => low,
        });
        Page {
            chunk: chunk.iter().map(|e| e.client_event(true)).collect(),
            end,
        }
    }

    /// Keeps a filter; its id.
    pub(crate) fn upload_filter(&self, filter: Value) -> String {
        let mut inner = self.lock();
        inner.filters.push(filter);
        (inner.filters.len() - 1).to_string()
    }

    pub(crate) fn filter(&self, id: &str) -> Option<Value> {
        let index: usize = id.parse().ok()?;
        self.lock().filters.get(index).cloned()
    }

    /// One `/sync` arrived.
    pub(crate) fn sync_arrived(&self) {
        let mut inner = self.lock();
        inner.stats.syncs += 1;
        inner.stats.sync_times.push(Instant::now());
    }

    /// The armed fault's strike on an authorised `/sync`, used up if counted; `None` when
    /// no fault acts on this one.
    pub(crate) fn strike(&self, has_since: bool) -> Option<MatrixFault> {
        let mut inner = self.lock();
        let has_batch = inner.last_batch.is_some();
        let armed = inner.fault.as_mut()?;
        if !armed.fault.applies(has_since, has_batch) {
            return None;
        }
        let (fault, stays) = armed.strike();
        if !stays {
            inner.fault = None;
        }
        fault
    }

    pub(crate) fn set_fault(&self, armed: Option<Armed>) {
        tracing::info!(fault = ?armed.map(|a| a.fault), syncs = ?armed.and_then(|a| a.syncs), "mock matrix fault set");
        self.lock().fault = armed;
    }

    pub(crate) fn set_revoked(&self, revoked: bool) {
        tracing::info!(revoked, "mock matrix token revocation set");
        self.lock().revoked = revoked;
    }

    pub(crate) fn revoked(&self) -> bool {
        self.lock().revoked
    }

    /// A `/sync` was answered 200 with `body`; a body with events is kept for `RepeatBatch`.
    pub(crate) fn answered(&self, body: &Value, events: usize, limited: u64) {
        let mut inner = self.lock();
        inner.stats.syncs_answered += 1;
        inner.stats.limited += limited;
        if events > 0 {
            inner.last_batch = Some(body.clone());
        }
    }

    pub(crate) fn last_batch(&self) -> Option<Value> {
        self.lock().last_batch.clone()
    }

    /// Counts a sync as held until the guard is dropped.
    pub(crate) fn live(&self) -> Live<'_> {
        self.count(|s| s.live_syncs += 1);
        Live(self)
    }

    pub(crate) fn count(&self, bump: impl FnOnce(&mut MatrixStats)) {
        bump(&mut self.lock().stats);
    }

    pub(crate) fn stats(&self) -> MatrixStats {
        self.lock().stats.clone()
    }
}
