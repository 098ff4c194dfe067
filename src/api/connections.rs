//! The API's open connections and what each one is doing, so that a full house makes room for
//! a new connection instead of shutting it out, and says so in the state file.
//!
//! A bound on connections keeps a buggy or hostile local client from taking every file
//! descriptor, but a bound that only refuses is a way to shut the API out: 64 connections
//! trickling a body, or a thousand idle ones, held every place. So when all
//! [`MAX_CONNECTIONS`](super::MAX_CONNECTIONS) are taken and another connects, one already
//! open is shed, the one that costs its user least:
//!
//! 1. an idle connection (between requests, or not yet done sending its headers), the oldest
//!    first: a server may close one at any time, and an HTTP client opens another;
//! 2. one still sending its request body, the oldest first: it is the slowest;
//! 3. one whose answer is still being written: its reader is not reading;
//! 4. a long-poll waiting for an event, the oldest first: it is answered at once with what
//!    there is (usually nothing), as a stop answers it, and its client asks again;
//!
//! each only once it has been so for [`SLOW`], and never one whose request is being handled
//! (a message on its way into the outbox). The wait matters under a flood: without it the
//! newest connections, not yet done sending their request, would be shed by the ones behind
//! them, each in turn, and nobody would be served; and a crowd of long-pollers larger than
//! the bound would be answered and come back as fast as the CPU allows. When nothing can be
//! shed the new connection waits for a place.
//!
//! The table also keeps what `status` shows of the API ([`Connections::health`]): whether it
//! was full or could not accept within [`RECENT`], how many connections it holds and has shed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tracing::warn;

use crate::gateway::state_file::{ApiCondition, ApiHealth};

/// How long a connection is in its phase before it may be shed: far longer than a local
/// client takes to send a request or read an answer, so only an idle or slow one is.
pub(super) const SLOW: Duration = Duration::from_secs(1);
/// How long a full house or a failed accept counts as the API's state: longer than the
/// gateway's tick (at most 5 s), so that every such moment reaches the state file.
const RECENT: Duration = Duration::from_secs(10);
/// With nothing to shed, how often a waiting connection looks again (a connection becomes
/// slow without anything waking it).
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Between requests, or receiving a request's headers (hyper's header timer bounds both).
    Idle,
    /// Receiving a request's body (the body timer bounds it).
    Reading,
    /// In a handler.
    Handling,
    /// A long-poll waiting for an event.
    Waiting,
    /// Its answer being written.
    Writing,
}

impl Phase {
    /// Where a connection `age` in this phase stands in the line to be shed, first is
    /// lowest; `None` for not now.
    fn shed_rank(self, age: Duration) -> Option<u8> {
        if age < SLOW {
            return None;
        }
        match self {
            Phase::Idle => Some(0),
            Phase::Reading => Some(1),
            Phase::Writing => Some(2),
            Phase::Waiting => Some(3),
            Phase::Handling => None,
        }
    }
}

/// How a shed connection goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shed {
    /// Closed at once.
    Close,
    /// Its long-poll answered at once, then closed.
    AnswerNow,
}

/// The open connections, their phases, and the API's health.
#[derive(Debug)]
pub struct Connections {
    max: usize,
    table: Mutex<Table>,
    /// Told each time a connection closes, for one waiting to be admitted.
    freed: Notify,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    open: HashMap<u64, Entry>,
    /// Connections shed since the start.
    shed: u64,
    /// When a connection last found every place taken.
    full_at: Option<Instant>,
    /// When an accept last failed, and how.
    accept_error: Option<(Instant, String)>,
}

#[derive(Debug)]
struct Entry {
    phase: Phase,
    since: Instant,
    shed: watch::Sender<Option<Shed>>,
}

/// One open connection's place in the table, given back when it is dropped.
#[derive(Debug)]
pub(super) struct Conn {
    id: u64,
    connections: Arc<Connections>,
    shed: watch::Receiver<Option<Shed>>,
}

impl Connections {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            table: Mutex::new(Table::default()),
            freed: Notify::new(),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics while holding it; a poisoned table is still a consistent one.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection: at once while there is one; otherwise after shedding
    /// one already open (or, with nothing to shed, when one closes).
    pub(super) async fn admit(self: &Arc<Self>) -> Arc<Conn> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(conn) = self.try_admit() {
                return conn;
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, freed).await;
        }
    }

    fn try_admit(self: &Arc<Self>) -> Option<Arc<Conn>> {
        let mut table = self.table();
        let now = Instant::now();
        if table.open.len() < self.max {
            let id = table.next_id;
            table.next_id += 1;
            let (tx, rx) = watch::channel(None);
            table.open.insert(
                id,
                Entry {
                    phase: Phase::Idle,
                    since: now,
                    shed: tx,
                },
            );
            return Some(Arc::new(Conn {
                id,
                connections: self.clone(),
                shed: rx,
            }));
        }
        if table.full_at.is_none_or(|at| now - at >= RECENT) {
            warn!(
                max = self.max,
                "API connections at their limit; shedding idle and slow ones to admit new ones"
            );
        }
        table.full_at = Some(now);
        shed_one(&mut table, now);
        None
    }

    /// Shed one connection to free its file descriptor, when an accept failed for want of
    /// one.
    pub(super) fn shed_for_descriptor(&self) {
        shed_one(&mut self.table(), Instant::now());
    }

    /// An accept failed: the API cannot take new connections until one succeeds.
    pub(super) fn accept_failed(&self, error: &std::io::Error) {
        self.table().accept_error = Some((Instant::now(), error.to_string()));
    }

    /// The API's state for the state file: `accept_failing` or `saturated` when that was so
    /// within the last [`RECENT`], else `serving`.
    pub fn health(&self) -> ApiHealth {
        let table = self.table();
        let now = Instant::now();
        let recent = |at: Option<Instant>| at.is_some_and(|at| now - at < RECENT);
        let state = if recent(table.accept_error.as_ref().map(|(at, _)| *at)) {
            ApiCondition::AcceptFailing
        } else if recent(table.full_at) {
            ApiCondition::Saturated
        } else {
            ApiCondition::Serving
        };
        ApiHealth {
            state,
            connections: table.open.len() as u64,
            max_connections: self.max as u64,
            long_polls: table
                .open
                .values()
                .filter(|e| e.phase == Phase::Waiting)
                .count() as u64,
            shed: table.shed,
            last_error: table.accept_error.as_ref().map(|(_, e)| e.clone()),
        }
    }
}

/// Shed the first connection in line (see the module doc), unless one shed before is still
/// going: it frees its place in a moment, and a second would be shed for nothing.
fn shed_one(table: &mut Table, now: Instant) {
    if table.open.values().any(|e| e.shed.borrow().is_some()) {
        return;
    }
    let victim = table
        .open
        .values()
        .filter_map(|e| Some(((e.phase.shed_rank(now - e.since)?, e.since), e)))
        .min_by_key(|(key, _)| *key)
        .map(|(_, e)| e);
    if let Some(entry) = victim {
        let how = match entry.phase {
            Phase::Waiting => Shed::AnswerNow,
            _ => Shed::Close,
        };
        entry.shed.send_replace(Some(how));
        table.shed += 1;
    }
}

impl Conn {
    /// The connection is now doing `phase`.
    pub(super) fn set(&self, phase: Phase) {
        let mut table = self.connections.table();
        if let Some(entry) = table.open.get_mut(&self.id) {
            entry.phase = phase;
            entry.since = Instant::now();
        }
    }

    /// Resolves when the connection is shed, with how it goes.
    pub(super) async fn shed(&self) -> Shed {
        let mut rx = self.shed.clone();
        let shed = rx
            .wait_for(Option::is_some)
            .await
            .map(|how| how.unwrap_or(Shed::Close));
        match shed {
            Ok(how) => how,
            // The entry, and its sender, go only when this is dropped.
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.connections.table().open.remove(&self.id);
        self.connections.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shed_now(conn: &Conn) -> Option<Shed> {
        *conn.shed.borrow()
    }

    fn admit_later(c: &Arc<Connections>) -> tokio::task::JoinHandle<Arc<Conn>> {
        let c = c.clone();
        tokio::spawn(async move { c.admit().await })
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_house_sheds_idle_then_slow_then_waiting_never_busy() {
        let c = Connections::new(4);
        let idle = c.admit().await;
        tokio::time::advance(SLOW / 2).await;
        let waiting = c.admit().await;
        waiting.set(Phase::Waiting);
        let handling = c.admit().await;
        handling.set(Phase::Handling);
        let reading = c.admit().await;
        reading.set(Phase::Reading);
        assert_eq!(c.health().state, ApiCondition::Serving);

        // Full: the idle one goes first, once it has been idle for SLOW.
        let fifth = admit_later(&c);
        tokio::time::sleep(SLOW / 2 - Duration::from_millis(100)).await;
        assert_eq!(c.health().state, ApiCondition::Saturated);
        assert_eq!(shed_now(&idle), None, "not idle long enough yet");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(shed_now(&idle), Some(Shed::Close));
        // Nothing more is shed while the first is still going.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!fifth.is_finished());
        assert_eq!(shed_now(&reading), None);
        drop(idle);
        let fifth = fifth.await.unwrap();
        fifth.set(Phase::Handling);

        // Then the body still being read; then the long-poll, answered rather than cut.
        let sixth = admit_later(&c);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(shed_now(&reading), Some(Shed::Close));
        drop(reading);
        let sixth = sixth.await.unwrap();
        sixth.set(Phase::Writing); // an answer just begun: not slow yet
        let seventh = admit_later(&c);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(shed_now(&waiting), Some(Shed::AnswerNow));
        assert_eq!(waiting.shed().await, Shed::AnswerNow);
        drop(waiting);
        let seventh = seventh.await.unwrap();
        seventh.set(Phase::Handling);
        assert_eq!(shed_now(&handling), None, "a handled request is never shed");
        assert_eq!(shed_now(&sixth), None);
        assert_eq!(c.health().shed, 3);
        assert_eq!(c.health().connections, 4);

        // With only handlers and a fresh write left, a newcomer waits, and a write that stays
        // unread becomes slow and is shed.
        let eighth = admit_later(&c);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!eighth.is_finished());
        tokio::time::sleep(SLOW).await;
        assert_eq!(shed_now(&sixth), Some(Shed::Close));
        drop(sixth);
        eighth.await.unwrap();
        assert_eq!(shed_now(&handling), None);

        tokio::time::advance(RECENT).await;
        assert_eq!(c.health().state, ApiCondition::Serving);
    }

    /// Under a flood, a connection that has just been admitted is not shed by the next one
    /// before it could send its request.
    #[tokio::test(start_paused = true)]
    async fn a_newcomer_is_not_shed_before_it_could_ask() {
        let c = Connections::new(2);
        let old = c.admit().await;
        tokio::time::advance(SLOW).await;
        let new = c.admit().await;
        let third = admit_later(&c);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(shed_now(&old), Some(Shed::Close));
        assert_eq!(shed_now(&new), None);
        drop(old);
        let third = third.await.unwrap();
        // Both open ones are new: the next waits until one of them has been idle for SLOW.
        let fourth = admit_later(&c);
        tokio::time::sleep(SLOW / 2).await;
        assert_eq!((shed_now(&new), shed_now(&third)), (None, None));
        new.set(Phase::Handling);
        tokio::time::sleep(SLOW).await;
        assert_eq!(shed_now(&third), Some(Shed::Close));
        assert_eq!(shed_now(&new), None);
        drop(third);
        fourth.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_accept_is_the_apis_state_for_a_while() {
        let c = Connections::new(2);
        c.accept_failed(&std::io::Error::from_raw_os_error(24));
        let h = c.health();
        assert_eq!(h.state, ApiCondition::AcceptFailing);
        assert!(h.last_error.unwrap().contains("Too many open files"));
        tokio::time::advance(RECENT).await;
        assert_eq!(c.health().state, ApiCondition::Serving);
    }
}
