//! The server's WebSocket connections as its hub keeps them, resume included: every event
//! written is numbered (`seq`) and kept in the connection's dead queue (its last
//! [`DEAD_QUEUE_SIZE`]); a connection whose socket is gone stays in the hub, inactive, and
//! holds what is broadcast meanwhile (its send queue, at most [`SEND_QUEUE_SIZE`]) until a
//! client asks for it back or the reaper forgets it.
//!
//! Written from the server's source (mattermost/mattermost, `server/channels/`):
//! - `api4/websocket.go` `connectWebSocket`: a `connection_id` is looked up only when the
//!   upgrade itself carries the session (a token in its header); without one, or without a
//!   `connection_id`, the connection is a new one. `PopulateWebConnConfig`
//!   (`app/platform/web_conn.go`): an id that is not a valid id, or a known connection asked
//!   for with no (or a negative) `sequence_number`, closes the socket at once; an unknown id
//!   gets a new connection id.
//! - `Hub.Start` (`web_hub.go`): `checkConn` takes the *inactive* connection with that id out
//!   of the hub (a connection whose old socket the server still thinks alive is not found);
//!   `register` sends `hello` only to a connection used for the first time (`reuseCount` 0);
//!   a broadcast that does not fit a connection's send queue (256, `sendQueueSize`) closes
//!   it and removes it from the hub; the reaper (every 5 minutes,
//!   `inactiveConnReaperInterval`) removes inactive connections whose last activity is more
//!   than 5 minutes old.
//! - `WebConn.writePump`: on a resume with `sequence_number` N (not 0): N still in the dead
//!   queue (128, `deadQueueSize`) replays the queue from N, each event with its original
//!   `seq`, and no `hello`; else, if the queue's last event is not N-1 (`hasMsgLoss`), the
//!   queue is cleared and a `hello` with a NEW `connection_id` (`seq` 0) starts over; else
//!   (nothing lost) nothing is sent. Then the send queue: what was broadcast while away,
//!   numbered on from there.
//! - `websocket.ts` (`@mattermost/client`, the web app's client): a client asks with
//!   `?connection_id=ID&sequence_number=N`, N the `seq` after the last event it read; a
//!   `hello` with another `connection_id` means it lost events (it syncs by REST and counts
//!   from 0); an event whose `seq` is not the one it expects makes it reconnect.
//!
//! What the mock does not model: a cluster (each node has its own hub) and the session's
//! expiry. A silenced (half-open) socket counts as alive until its client's FIN reaches the
//! mock; a real server whose peer vanished keeps it alive until its pong wait (100 s) ends.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::record::MattermostConnRecord;
use super::state::ConnCommand;

/// `deadQueueSize` in `web_conn.go`.
pub(crate) const DEAD_QUEUE_SIZE: usize = 128;
/// `sendQueueSize` in `web_conn.go`: what an inactive connection can hold before the hub
/// drops it.
pub(crate) const SEND_QUEUE_SIZE: usize = 256;

/// What an upgrade asked to resume (its query), and whether it carried a valid token.
pub(crate) struct Ask {
    pub(crate) connection_id: Option<String>,
    pub(crate) sequence_number: Option<String>,
    pub(crate) authenticated: bool,
}

/// How the hub takes a new socket.
pub(crate) enum Opening {
    /// `PopulateWebConnConfig` refused the query: the socket is closed without a frame.
    Refused(String),
    /// Served as connection `conn`: `first` is written before anything else.
    Opened { conn: u64, first: Vec<Value> },
}

struct WebConn {
    connection_id: String,
    /// The `seq` the next event written gets.
    sequence: u64,
    /// The last events written, oldest first, each with its `seq`.
    dead: VecDeque<Value>,
    /// The serving socket's task; `None` while no socket serves the connection.
    socket: Option<mpsc::UnboundedSender<ConnCommand>>,
    /// Authenticated, so in the hub (events go only to these).
    registered: bool,
    /// Broadcast while no socket served the connection, not yet numbered.
    held: Vec<Value>,
    /// Opened or last resumed: the server's `lastUserActivityAt`, which its session's
    /// requests also move on while the socket is up (not modelled).
    active_at: Instant,
    inactive_since: Option<Instant>,
    /// Its line in the stats.
    record: usize,
}

impl WebConn {
    /// `event` numbered and kept, as the write pump writes it.
    fn number(&mut self, mut event: Value) -> Value {
        event["seq"] = json!(self.sequence);
        self.sequence += 1;
        if self.dead.len() == DEAD_QUEUE_SIZE {
            self.dead.pop_front();
        }
        self.dead.push_back(event.clone());
        event
    }
}

pub(crate) struct Hub {
    conns: BTreeMap<u64, WebConn>,
    next: u64,
    started: Instant,
    reap_interval: Duration,
    pub(crate) records: Vec<MattermostConnRecord>,
}

impl Hub {
    pub(crate) fn new(reap_interval: Duration) -> Hub {
        Hub {
            conns: BTreeMap::new(),
            next: 0,
            started: Instant::now(),
            reap_interval,
            records: Vec::new(),
        }
    }

    pub(crate) fn live(&self) -> u64 {
        self.conns.values().filter(|c| c.socket.is_some()).count() as u64
    }

    /// Takes a new socket, `tx` its task; `new_id` mints a connection id.
    pub(crate) fn open(
        &mut self,
        ask: &Ask,
        tx: mpsc::UnboundedSender<ConnCommand>,
        hello: &dyn Fn(&str) -> Value,
        new_id: &mut dyn FnMut() -> String,
    ) -> Opening {
        self.reap(Instant::now());
        let wanted = ask.connection_id.as_deref().filter(|c| !c.is_empty());
        let (found, asked) = match wanted {
            Some(id) if ask.authenticated => {
                if !valid_id(id) {
                    return Opening::Refused(format!("invalid connection id: {id}"));
                }
                (self.take_inactive(id), true)
            }
            _ => (None, wanted.is_some()),
        };
        let Some(mut conn) = found else {
            return self.fresh(ask, asked, tx, hello, new_id());
        };
        let sequence = match ask.sequence_number.as_deref().map(str::parse::<u64>) {
            Some(Ok(n)) => n,
            _ => return Opening::Refused("sequence number missing or invalid".into()),
        };
        conn.sequence = sequence;
        let mut first = Vec::new();
        let mut replayed = 0u64;
        let mut resumed = true;
        if sequence != 0 {
            if let Some(at) = conn.dead.iter().position(|e| e["seq"] == sequence) {
                first.extend(conn.dead.iter().skip(at).cloned());
                replayed = first.len() as u64;
                conn.sequence = sequence + replayed;
            } else if conn.dead.back().is_some_and(|e| e["seq"] != sequence - 1) {
                conn.dead.clear();
                conn.connection_id = new_id();
                conn.sequence = 0;
                first.push(conn.number(hello(&conn.connection_id)));
                resumed = false;
            }
        }
        let held = std::mem::take(&mut conn.held);
        let held_n = held.len() as u64;
        first.extend(held.into_iter().map(|e| conn.number(e)));
        conn.socket = Some(tx);
        conn.active_at = Instant::now();
        conn.inactive_since = None;
        conn.record = self.records.len();
        self.records.push(MattermostConnRecord {
            connection_id: conn.connection_id.clone(),
            asked_resume: true,
            resumed,
            replayed,
            held: held_n,
        });
        self.next += 1;
        self.conns.insert(self.next, conn);
        Opening::Opened {
            conn: self.next,
            first,
        }
    }

    fn fresh(
        &mut self,
        ask: &Ask,
        asked: bool,
        tx: mpsc::UnboundedSender<ConnCommand>,
        hello: &dyn Fn(&str) -> Value,
        connection_id: String,
    ) -> Opening {
        self.records.push(MattermostConnRecord {
            connection_id: connection_id.clone(),
            asked_resume: asked,
            resumed: false,
            replayed: 0,
            held: 0,
        });
        let mut conn = WebConn {
            connection_id,
            sequence: 0,
            dead: VecDeque::new(),
            socket: Some(tx),
            registered: false,
            held: Vec::new(),
            active_at: Instant::now(),
            inactive_since: None,
            record: self.records.len() - 1,
        };
        let first = if ask.authenticated {
            conn.registered = true;
            vec![conn.number(hello(&conn.connection_id))]
        } else {
            Vec::new()
        };
        self.next += 1;
        self.conns.insert(self.next, conn);
        Opening::Opened {
            conn: self.next,
            first,
        }
    }

    /// Connection `conn` passed its authentication challenge: it joins the hub, and its
    /// `hello` (numbered) is what to write.
    pub(crate) fn authenticate(
        &mut self,
        conn: u64,
        hello: &dyn Fn(&str) -> Value,
    ) -> Option<Value> {
        let c = self.conns.get_mut(&conn)?;
        if c.registered {
            return None;
        }
        c.registered = true;
        let h = hello(&c.connection_id);
        Some(c.number(h))
    }

    /// Connection `conn`'s socket is gone: it stays, inactive, if it was ever in the hub.
    pub(crate) fn close(&mut self, conn: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.registered {
            self.conns.remove(&conn);
            return;
        }
        c.socket = None;
        c.inactive_since = Some(Instant::now());
    }

    /// `event` to every connection in the hub: numbered and sent where a socket serves it,
    /// held where none does (a connection whose send queue overflows is dropped). How many
    /// sockets it was sent to.
    pub(crate) fn broadcast(&mut self, event: &Value) -> u64 {
        let mut sent = 0;
        let mut overflowed = Vec::new();
        for (id, conn) in self.conns.iter_mut().filter(|(_, c)| c.registered) {
            match conn.socket.clone() {
                Some(tx) => {
                    let numbered = conn.number(event.clone());
                    if tx.send(ConnCommand::Event(numbered)).is_ok() {
                        sent += 1;
                    }
                }
                None if conn.held.len() < SEND_QUEUE_SIZE => conn.held.push(event.clone()),
                None => overflowed.push(*id),
            }
        }
        for id in overflowed {
            self.conns.remove(&id);
        }
        sent
    }

    /// `command` to every socket.
    pub(crate) fn each_socket(&self, command: impl Fn() -> ConnCommand) {
        for tx in self.conns.values().filter_map(|c| c.socket.as_ref()) {
            let _ = tx.send(command());
        }
    }

    /// Every inactive connection forgotten, as a server restart (or its reaper) does.
    pub(crate) fn forget_inactive(&mut self) {
        self.conns.retain(|_, c| c.socket.is_some());
    }

    fn take_inactive(&mut self, connection_id: &str) -> Option<WebConn> {
        let id = self
            .conns
            .iter()
            .find(|(_, c)| c.socket.is_none() && c.connection_id == connection_id)
            .map(|(id, _)| *id)?;
        self.conns.remove(&id)
    }

    /// The reaper's work up to `now`: it runs every `reap_interval` from the start and
    /// removes an inactive connection last active more than `reap_interval` before.
    fn reap(&mut self, now: Instant) {
        let every = self.reap_interval.max(Duration::from_millis(1));
        let runs = (now - self.started).as_nanos() / every.as_nanos();
        let Ok(runs) = u32::try_from(runs) else {
            return self.forget_inactive();
        };
        let last = self.started + every * runs;
        self.conns.retain(|_, c| match c.inactive_since {
            Some(since) => !(last > since && last.saturating_duration_since(c.active_at) > every),
            None => true,
        });
    }
}

/// `model.IsValidId`: 26 letters or digits.
fn valid_id(id: &str) -> bool {
    id.chars().count() == 26 && id.chars().all(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(id: &str) -> Value {
        json!({"event": "hello", "data": {"connection_id": id}})
    }

    fn posted(n: u64) -> Value {
        json!({"event": "posted", "data": {"n": n}})
    }

    struct Rig {
        hub: Hub,
        minted: u64,
    }

    impl Rig {
        fn new() -> Rig {
            Rig {
                hub: Hub::new(Duration::from_secs(300)),
                minted: 0,
            }
        }

        fn open(
            &mut self,
            id: Option<&str>,
            seq: Option<&str>,
        ) -> (u64, Vec<Value>, mpsc::UnboundedReceiver<ConnCommand>) {
            let (tx, rx) = mpsc::unbounded_channel();
            let ask = Ask {
                connection_id: id.map(str::to_owned),
                sequence_number: seq.map(str::to_owned),
                authenticated: true,
            };
            let minted = &mut self.minted;
            let mut mint = || {
                *minted += 1;
                format!("conn{:022}", *minted)
            };
            match self.hub.open(&ask, tx, &hello, &mut mint) {
                Opening::Opened { conn, first } => (conn, first, rx),
                Opening::Refused(why) => panic!("refused: {why}"),
            }
        }
    }

    fn seqs(frames: &[Value]) -> Vec<u64> {
        frames.iter().map(|f| f["seq"].as_u64().unwrap()).collect()
    }

    #[test]
    fn a_resume_in_the_dead_queue_replays_from_there_then_what_was_held() {
        let mut rig = Rig::new();
        let (conn, first, _rx) = rig.open(None, None);
        let id = first[0]["data"]["connection_id"]
            .as_str()
            .unwrap()
            .to_owned();
        for n in 0..5 {
            rig.hub.broadcast(&posted(n));
        }
        rig.hub.close(conn);
        rig.hub.broadcast(&posted(5));
        let (_, first, _rx) = rig.open(Some(&id), Some("4"));
        assert_eq!(seqs(&first), vec![4, 5, 6]);
        assert_eq!(first[2]["data"]["n"], 5);
        let r = rig.hub.records.last().unwrap();
        assert_eq!(
            (r.resumed, r.replayed, r.held, r.connection_id.as_str()),
            (true, 2, 1, id.as_str())
        );
    }

    #[test]
    fn a_gap_past_the_dead_queue_starts_over_with_a_new_id() {
        let mut rig = Rig::new();
        let (conn, first, _rx) = rig.open(None, None);
        let id = first[0]["data"]["connection_id"]
            .as_str()
            .unwrap()
            .to_owned();
        for n in 0..(DEAD_QUEUE_SIZE as u64 + 10) {
            rig.hub.broadcast(&posted(n));
        }
        rig.hub.close(conn);
        let (_, first, _rx) = rig.open(Some(&id), Some("1"));
        assert_eq!(first[0]["event"], "hello");
        assert_eq!(first[0]["seq"], 0);
        assert_ne!(first[0]["data"]["connection_id"], id.as_str());
        assert!(!rig.hub.records.last().unwrap().resumed);
    }

    #[test]
    fn nothing_missed_sends_nothing_and_an_unknown_id_is_a_new_connection() {
        let mut rig = Rig::new();
        let (conn, first, _rx) = rig.open(None, None);
        let id = first[0]["data"]["connection_id"]
            .as_str()
            .unwrap()
            .to_owned();
        rig.hub.broadcast(&posted(0));
        rig.hub.close(conn);
        let (conn, first, _rx) = rig.open(Some(&id), Some("2"));
        assert!(first.is_empty());
        assert!(rig.hub.records.last().unwrap().resumed);
        rig.hub.close(conn);
        rig.hub.forget_inactive();
        let (_, first, _rx) = rig.open(Some(&id), Some("2"));
        assert_eq!(first[0]["event"], "hello");
        assert!(!rig.hub.records.last().unwrap().resumed);
    }

    #[test]
    fn a_held_queue_that_overflows_drops_the_connection() {
        let mut rig = Rig::new();
        let (conn, first, _rx) = rig.open(None, None);
        let id = first[0]["data"]["connection_id"]
            .as_str()
            .unwrap()
            .to_owned();
        rig.hub.close(conn);
        for n in 0..=(SEND_QUEUE_SIZE as u64) {
            rig.hub.broadcast(&posted(n));
        }
        let (_, first, _rx) = rig.open(Some(&id), Some("1"));
        assert_eq!(first.len(), 1, "a hello only");
        assert_ne!(first[0]["data"]["connection_id"], id.as_str());
    }

    #[test]
    fn a_known_id_without_a_sequence_number_is_refused() {
        let mut rig = Rig::new();
        let (conn, first, _rx) = rig.open(None, None);
        let id = first[0]["data"]["connection_id"]
            .as_str()
            .unwrap()
            .to_owned();
        rig.hub.close(conn);
        let (tx, _rx) = mpsc::unbounded_channel();
        let ask = Ask {
            connection_id: Some(id),
            sequence_number: None,
            authenticated: true,
        };
        let mut mint = || "x".repeat(26);
        assert!(matches!(
            rig.hub.open(&ask, tx, &hello, &mut mint),
            Opening::Refused(_)
        ));
        let (tx, _rx) = mpsc::unbounded_channel();
        let ask = Ask {
            connection_id: Some("bad".into()),
            sequence_number: Some("1".into()),
            authenticated: true,
        };
        assert!(matches!(
            rig.hub.open(&ask, tx, &hello, &mut mint),
            Opening::Refused(_)
        ));
    }
}
