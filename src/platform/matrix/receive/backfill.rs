//! Filling a limited timeline's gap: `GET /rooms/{roomId}/messages?dir=b`, from the sync's
//! `prev_batch` back `to` the position the sync started at (spec, "Syncing": "the client
//! should make a request to /rooms/<room_id>/messages with … from=x-y-z and to=d-e-f"),
//! page after page until the server leaves out `end`. An empty page with an `end` is not
//! the end (message_pagination.yaml). The spool drops what overlaps what it has.

use reqwest::Method;
use serde_json::Value;

use super::super::api::{Api, Refusal};
use crate::gateway::adapter::long_poll::{exchange, Exchange, Polled};
use crate::safe_text::clip;

/// Events per page: the most Synapse gives in one.
const PAGE: &str = "100";
/// Pages per gap: 2,000 events. A gap longer than that is hours of a busy room; the oldest
/// part is left, and said, rather than answering a day of commands at once.
const MAX_PAGES: usize = 20;
/// How long one page may take.
const PAGE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The gap's events, oldest first; or how the poll ends when a page cannot be had (the
/// cursor does not move, so the next sync finds the same gap).
pub(super) async fn gap(
    api: &Api,
    room: &str,
    prev_batch: &str,
    since: &str,
    filter: &str,
) -> Result<Vec<Value>, Polled> {
    let mut events = Vec::new();
    let mut from = prev_batch.to_owned();
    let where_ = format!("filling a gap in room {}", clip(room, 80));
    for _ in 0..MAX_PAGES {
        let query = [
            ("dir", "b"),
            ("from", from.as_str()),
            ("to", since),
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
        events.extend(page["chunk"].as_array().into_iter().flatten().cloned());
        match page["end"].as_str() {
            Some(end) if !end.is_empty() && end != from => end.clone_into(&mut from),
            _ => {
                events.reverse();
                return Ok(events);
            }
        }
    }
    tracing::warn!(room = %clip(room, 80), pages = MAX_PAGES, "a gap longer than the pages fetched; its oldest events were not fetched");
    events.reverse();
    Ok(events)
}
