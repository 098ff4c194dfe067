//! Filling a limited timeline's gap: `GET /rooms/{roomId}/messages?dir=f` from the position
//! the sync started at (`since`) `to` the timeline's `prev_batch`, page after page until the
//! server leaves out `end` (spec, "Syncing": a gap is paged from `/messages` between the two;
//! message_pagination.yaml: `from` and `to` take a sync's tokens, and an empty page with an
//! `end` is not the end). The spool drops what overlaps what it has.
//!
//! Forward, not back from `prev_batch`: each page comes oldest first, in the order the spool
//! keeps, so it is stored before the next is asked for, and a batch holds one page at a time
//! rather than every page of every room. Paged backwards and held until the batch was whole,
//! one `/sync` with 10 limited rooms of 7.9 MB pages took the process to 2.08 GiB, and the
//! cursor that had not moved did it again after the restart.

use std::collections::VecDeque;

use reqwest::Method;
use serde_json::Value;

use super::super::api::{Api, Refusal};
use crate::gateway::adapter::cursor_file::Cursor;
use crate::gateway::adapter::long_poll::{exchange, Exchange, Polled};
use crate::safe_text::clip;

/// Events per page: the most Synapse gives in one.
const PAGE: &str = "100";
/// Pages per room's gap: 2,000 events, hours of a busy room.
pub(super) const PAGES_PER_ROOM: u32 = 20;
/// Pages per sync batch, over all its rooms: 5,000 events, and with the one page held at a
/// time (each answer at most 8 MiB as read) the bound on what a batch costs in requests
/// and time. A gap past either cap is cut where it stands, and said: its newest part, before
/// the timeline the sync carried, is not fetched, rather than a day of commands answered.
pub(super) const PAGES_PER_BATCH: u32 = 50;
/// How long one page may take.
pub(super) const PAGE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// A sync answer being taken: what is left of it, room by room, after its answer was read.
pub(super) struct Taking {
    /// Its `next_batch`, staged once every room is stored.
    pub(super) next: Cursor,
    /// A first sync ever: its timelines are history, not stored.
    pub(super) baseline: bool,
    pub(super) rooms: VecDeque<Room>,
    /// Pages this batch may still ask for.
    pub(super) pages_left: u32,
}

/// A joined room of the sync: its gap, while pages are left to ask for, then its timeline.
pub(super) struct Room {
    pub(super) id: String,
    pub(super) gap: Option<Gap>,
    pub(super) timeline: Vec<Value>,
}

/// Where the next page of a room's gap starts, and where the gap ends.
pub(super) struct Gap {
    from: String,
    to: String,
    pages: u32,
}

impl Gap {
    /// The gap from `since` to a limited timeline's `prev_batch`.
    pub(super) fn new(since: &str, prev_batch: &str) -> Gap {
        Gap {
            from: since.to_owned(),
            to: prev_batch.to_owned(),
            pages: 0,
        }
    }
}

/// One page of a room's gap, oldest first, and what is left of the gap after it.
pub(super) struct Page {
    pub(super) events: Vec<Value>,
    pub(super) rest: Option<Gap>,
}

/// The next page of `room`'s `gap`; or how the poll ends when it cannot be had (the cursor
/// does not move, so the next sync finds the same gap, and the spool drops the pages it
/// already stored).
pub(super) async fn page(
    api: &Api,
    room: &str,
    mut gap: Gap,
    filter: &str,
) -> Result<Page, Polled> {
    let where_ = format!("filling a gap in room {}", clip(room, 80));
    let query = [
        ("dir", "f"),
        ("from", gap.from.as_str()),
        ("to", gap.to.as_str()),
        ("limit", PAGE),
        ("filter", filter),
    ];
    let Some(request) = api.request(Method::GET, &["rooms", room, "messages"], &query) else {
        return Err(Polled::Failed(format!("{where_}: unusable token")));
    };
    let page = match exchange(request, PAGE_DEADLINE).await {
        Exchange::Answer {
            status: 200, body, ..
        } => serde_json::from_slice::<Value>(&body)
            .map_err(|_| Polled::Failed(format!("{where_}: /messages answered no JSON")))?,
        Exchange::Answer {
            status,
            headers,
            body,
        } => {
            let r = Refusal::read(status, &headers, &body);
            let said = format!("{where_}: /messages: {r}");
            return Err(if r.rate_limited() {
                Polled::Wait(r.wait(), said)
            } else {
                Polled::Failed(said)
            });
        }
        Exchange::Dead(e) | Exchange::Failed(e) => {
            return Err(Polled::Failed(format!("{where_}: {e}")))
        }
    };
    let (events, end) = match page {
        Value::Object(mut o) => {
            let end = o.get("end").and_then(Value::as_str).map(str::to_owned);
            match o.remove("chunk") {
                Some(Value::Array(chunk)) => (chunk, end),
                _ => (Vec::new(), end),
            }
        }
        _ => (Vec::new(), None),
    };
    gap.pages += 1;
    let rest = match end.filter(|end| !end.is_empty() && *end != gap.from) {
        Some(end) if gap.pages < PAGES_PER_ROOM => {
            gap.from = end;
            Some(gap)
        }
        Some(_) => {
            tracing::warn!(room = %clip(room, 80), pages = PAGES_PER_ROOM, "a gap longer than a room's pages; its newest part, before the sync's timeline, was not fetched");
            None
        }
        None => None,
    };
    Ok(Page { events, rest })
}
