//! What the agent has taken, kept across restarts of both: a cursor into the spool, moved only
//! when the agent has a message (Hermes's `inbound_ack` on the Relay; its reply queued, on the
//! OpenAI bridge).
//!
//! Hermes never replays and never deduplicates: a message it was sent twice is answered twice,
//! and one it never took is never answered. So delivery to it is the bridge's job. Messages
//! are read from the spool after the durable cursor, each named by its spool cursor (the
//! Relay's `bufferId`); an ack marks one taken, and the cursor file moves over every taken
//! message at the front (an event that is not for the agent is passed as it is read), and the
//! ones taken behind a message still in its turn are kept by name in the same file. When a
//! connection ends, what was sent and not taken is sent again on the next, from the cursor:
//! what arrived while the agent was down or restarting is delivered when it is back, and
//! nothing it took is delivered twice, across restarts of the gateway too.
//!
//! The file is the cursor on its first line, then one line per message taken beyond it.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use crate::atomic_file;
use crate::gateway::spool::cursor::{read_after, read_at, Cursor, CursorError, Limits, Position};
use crate::gateway::spool::Event;

/// One read's most bytes: a page of messages, not of megabytes.
const PAGE_BYTES: usize = 1024 * 1024;

/// The most events read and not yet passed by the durable cursor: how far reading goes on past
/// a hung chat's backlog (a parked message is only its place in the spool, `chats.rs`). Each
/// message taken beyond the cursor is a line of the cursor file, written on every take, so
/// this also bounds that file (about 120 KiB). The access budget lets one sender queue 200
/// messages in a default turn-timeout; a backlog of 4,096 is many senders' flood.
pub const MAX_READ_AHEAD: usize = 4096;

pub struct Feed {
    spool_dir: PathBuf,
    cursor_file: PathBuf,
    /// What the cursor file says: everything up to it was taken (or was not for the agent).
    durable: Position,
    /// Where the next read starts.
    next: Position,
    /// Read and not yet passed by the durable cursor, oldest first.
    in_flight: VecDeque<Entry>,
    /// Taken, and not yet passed by the durable cursor: by buffer id.
    taken: BTreeSet<String>,
}

struct Entry {
    cursor: Cursor,
    /// The event's id, for the link's "last taken".
    event: String,
    /// When the event arrived, for the link's "oldest waiting".
    received_at: String,
    /// Sent and waiting for an ack; false for an event that was not for the agent, or acked.
    waiting: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("cannot {op} the agent's cursor {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the spool for the agent")]
    Spool(#[source] CursorError),
}

impl Feed {
    /// The feed whose cursor is kept in `cursor_file`. The first time, the cursor starts at
    /// the end of the spool: the agent is sent what arrives from now on, not the history.
    pub fn open(spool_dir: &Path, cursor_file: &Path) -> Result<Feed, FeedError> {
        let io = |op| {
            move |source| FeedError::Io {
                op,
                path: cursor_file.to_owned(),
                source,
            }
        };
        let (durable, taken) = match std::fs::read_to_string(cursor_file) {
            Ok(text) => {
                let mut lines = text.lines();
                match Position::parse(lines.next().map(str::trim)) {
                    Ok(p) => (
                        p,
                        lines
                            .map(|l| l.trim().to_owned())
                            .filter(|l| !l.is_empty())
                            .collect(),
                    ),
                    Err(e) => {
                        tracing::warn!(file = %cursor_file.display(), error = %e, "the agent's cursor does not read; starting from the end of the spool");
                        (Position::End, BTreeSet::new())
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Position::End, BTreeSet::new()),
            Err(e) => return Err(io("read")(e)),
        };
        let mut feed = Feed {
            spool_dir: spool_dir.to_owned(),
            cursor_file: cursor_file.to_owned(),
            durable,
            next: durable,
            in_flight: VecDeque::new(),
            taken,
        };
        if durable == Position::End {
            // Resolve "the end" to the event it means now, and keep that.
            let page = feed.page(Position::End, 1)?;
            feed.durable = page;
            feed.next = page;
            feed.store()?;
        }
        Ok(feed)
    }

    /// Up to `room` more events after what was read, each with its buffer id; `pick` says which
    /// are for the agent (and what to send), and the rest are passed.
    pub fn read<T>(
        &mut self,
        room: usize,
        pick: impl Fn(&Event) -> Option<T>,
    ) -> Result<Vec<(String, T)>, FeedError> {
        if room == 0 {
            return Ok(vec![]);
        }
        let limits = Limits {
            events: room,
            bytes: PAGE_BYTES,
        };
        let page = match read_after(&self.spool_dir, self.next, limits) {
            Ok(page) => page,
            Err(CursorError::Gone { .. }) => {
                tracing::warn!("the spool rotated past what the agent had taken; going on from the oldest event it keeps");
                self.in_flight.clear();
                self.taken.clear();
                self.durable = Position::Start;
                read_after(&self.spool_dir, Position::Start, limits).map_err(FeedError::Spool)?
            }
            Err(e) => return Err(FeedError::Spool(e)),
        };
        self.next = page.next;
        let mut out = vec![];
        for found in page.events {
            let buffer = found.cursor.to_string();
            let picked = if self.taken.contains(&buffer) {
                None
            } else {
                pick(found.event())
            };
            self.in_flight.push_back(Entry {
                cursor: found.cursor,
                event: found.event().id.clone(),
                received_at: found.event().received_at.clone(),
                waiting: picked.is_some(),
            });
            if let Some(t) = picked {
                out.push((buffer, t));
            }
        }
        self.settle(false)?;
        Ok(out)
    }

    /// How many more events a read may take, for a bridge holding `held` of the `window`
    /// it keeps in memory.
    pub fn room(&self, window: usize, held: usize) -> usize {
        window
            .saturating_sub(held)
            .min(MAX_READ_AHEAD.saturating_sub(self.in_flight.len()))
    }

    /// The entry read as `buffer_id` and not yet taken.
    fn waiting_entry(&mut self, buffer_id: &str) -> Option<&mut Entry> {
        let cursor: Cursor = buffer_id.parse().ok()?;
        self.in_flight
            .iter_mut()
            .find(|e| e.waiting && e.cursor == cursor)
    }

    /// The event read as `buffer_id`, read again from the spool: a message whose chat parked
    /// it. `None` when it is not waiting, or the spool has rotated past it.
    pub fn fetch(&mut self, buffer_id: &str) -> Result<Option<Event>, FeedError> {
        let Some(cursor) = self.waiting_entry(buffer_id).map(|e| e.cursor) else {
            return Ok(None);
        };
        match read_at(&self.spool_dir, cursor) {
            Ok(found) => Ok(Some(found.record.event)),
            Err(CursorError::Gone { .. }) => {
                tracing::warn!(buffer = %buffer_id, "the spool rotated past a message waiting for its chat's turn; it is not sent");
                Ok(None)
            }
            Err(e) => Err(FeedError::Spool(e)),
        }
    }

    /// Hermes took the message sent as `buffer_id`: its event's id. `None` when no message
    /// waits under it (an ack from an earlier connection, or a made-up one).
    pub fn ack(&mut self, buffer_id: &str) -> Result<Option<String>, FeedError> {
        let Some(entry) = self.waiting_entry(buffer_id) else {
            return Ok(None);
        };
        entry.waiting = false;
        let event = entry.event.clone();
        self.taken.insert(buffer_id.to_owned());
        self.settle(true)?;
        Ok(Some(event))
    }

    /// The oldest event after the durable cursor that `pick` takes, looking at no more than a
    /// page: what has waited longest for the agent.
    pub fn oldest(&self, pick: impl Fn(&Event) -> bool) -> Result<Option<Event>, FeedError> {
        let limits = Limits {
            events: 1000,
            bytes: PAGE_BYTES,
        };
        let page = match read_after(&self.spool_dir, self.durable, limits) {
            Ok(page) => page,
            Err(CursorError::Gone { .. }) => return Ok(None),
            Err(e) => return Err(FeedError::Spool(e)),
        };
        Ok(page
            .events
            .into_iter()
            .map(|f| f.record.event)
            .find(|e| pick(e)))
    }

    /// When the oldest message read and not yet taken arrived (RFC 3339).
    pub fn oldest_waiting(&self) -> Option<&str> {
        self.in_flight
            .iter()
            .find(|e| e.waiting)
            .map(|e| e.received_at.as_str())
    }

    /// Read and not yet taken.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.in_flight.iter().filter(|e| e.waiting).count()
    }

    /// The connection ended: what it was sent and did not take is sent again on the next.
    pub fn rewind(&mut self) {
        self.in_flight.clear();
        self.next = self.durable;
    }

    /// Where the durable cursor is: the next connection starts after it.
    pub fn durable(&self) -> Position {
        self.durable
    }

    /// Move the durable cursor over the taken front, and store it with what is taken beyond.
    /// Written on every change: a message taken and not in the file would be sent again
    /// after a crash, and Hermes answers it again.
    fn settle(&mut self, changed: bool) -> Result<(), FeedError> {
        let mut moved = false;
        while self.in_flight.front().is_some_and(|e| !e.waiting) {
            if let Some(e) = self.in_flight.pop_front() {
                self.taken.remove(&e.cursor.to_string());
                self.durable = Position::After(e.cursor);
                moved = true;
            }
        }
        if moved || changed {
            self.store()?;
        }
        Ok(())
    }

    fn store(&self) -> Result<(), FeedError> {
        let mut text = format!("{}\n", self.durable);
        for buffer in &self.taken {
            text.push_str(buffer);
            text.push('\n');
        }
        atomic_file::write(&self.cursor_file, text.as_bytes(), 0o600).map_err(|source| {
            FeedError::Io {
                op: "write",
                path: self.cursor_file.clone(),
                source,
            }
        })
    }

    fn page(&self, from: Position, events: usize) -> Result<Position, FeedError> {
        let limits = Limits {
            events,
            bytes: PAGE_BYTES,
        };
        let page = read_after(&self.spool_dir, from, limits).map_err(FeedError::Spool)?;
        Ok(page.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::spool::tests::{event, temp_dir};
    use crate::gateway::spool::Spool;

    fn every(e: &Event) -> Option<String> {
        (!e.id.starts_with("skip")).then(|| e.id.clone())
    }

    #[tokio::test]
    async fn the_cursor_moves_only_over_what_was_acked_and_survives_a_reopen() {
        let dir = temp_dir("relay-feed");
        let spool = Spool::open(&dir).unwrap();
        spool.append(&event("old")).await.unwrap();
        let cursor_file = dir.join("agent-cursor");
        let mut feed = Feed::open(&dir, &cursor_file).unwrap();
        // What was there before the agent is not sent.
        assert!(feed.read(10, every).unwrap().is_empty());

        for id in ["a", "skip1", "b", "c"] {
            spool.append(&event(id)).await.unwrap();
        }
        let sent = feed.read(10, every).unwrap();
        let ids: Vec<&str> = sent.iter().map(|(_, id)| id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(feed.waiting(), 3);
        // Acks out of order: the cursor passes only the acked front.
        assert_eq!(feed.ack(&sent[1].0).unwrap().as_deref(), Some("b"));
        assert_eq!(
            feed.ack("i0.o0.h0").unwrap(),
            None,
            "an ack of nothing sent"
        );
        assert_eq!(feed.oldest(|e| e.id != "skip1").unwrap().unwrap().id, "a");
        let before = feed.durable();
        assert!(feed.ack(&sent[0].0).unwrap().is_some());
        assert_eq!(feed.oldest(|e| e.id != "skip1").unwrap().unwrap().id, "c");
        assert_ne!(feed.durable(), before);

        // The connection ends with c unacked: it comes again, and only it.
        feed.rewind();
        let again = feed.read(10, every).unwrap();
        assert_eq!(
            again.iter().map(|(_, id)| id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );

        // A message taken behind one still in its turn is not sent again either.
        spool.append(&event("d")).await.unwrap();
        let d = feed.read(10, every).unwrap();
        assert_eq!(d.len(), 1);
        assert!(feed.ack(&d[0].0).unwrap().is_some());
        feed.rewind();
        let again = feed.read(10, every).unwrap();
        assert_eq!(
            again.iter().map(|(_, id)| id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );

        // So does a restart of the gateway.
        let mut reopened = Feed::open(&dir, &cursor_file).unwrap();
        let after_restart = reopened.read(10, every).unwrap();
        assert_eq!(
            after_restart
                .iter()
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>(),
            ["c"]
        );
        assert!(reopened.ack(&after_restart[0].0).unwrap().is_some());
        assert!(reopened.oldest(|_| true).unwrap().is_none());
        let mut third = Feed::open(&dir, &cursor_file).unwrap();
        assert!(
            third.read(10, every).unwrap().is_empty(),
            "everything was taken"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_message_read_is_fetched_again_by_its_buffer_id_until_taken() {
        let dir = temp_dir("relay-feed-fetch");
        let spool = Spool::open(&dir).unwrap();
        let mut feed = Feed::open(&dir, &dir.join("agent-cursor")).unwrap();
        for id in ["a", "b"] {
            spool.append(&event(id)).await.unwrap();
        }
        let read = feed.read(10, every).unwrap();
        assert_eq!(feed.room(64, 2), 62);
        assert_eq!(feed.fetch(&read[1].0).unwrap().unwrap().id, "b");
        assert!(feed.ack(&read[1].0).unwrap().is_some());
        assert!(feed.fetch(&read[1].0).unwrap().is_none(), "taken");
        assert!(feed.fetch("i1.o1.h1").unwrap().is_none(), "never read");
        assert!(feed.fetch("nonsense").unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_window_is_the_callers() {
        let dir = temp_dir("relay-feed-window");
        let spool = Spool::open(&dir).unwrap();
        let mut feed = Feed::open(&dir, &dir.join("agent-cursor")).unwrap();
        for i in 0..5 {
            spool.append(&event(&format!("m{i}"))).await.unwrap();
        }
        assert_eq!(feed.read(2, every).unwrap().len(), 2);
        assert_eq!(feed.read(0, every).unwrap().len(), 0);
        assert_eq!(feed.read(10, every).unwrap().len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
