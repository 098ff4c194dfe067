//! `events --follow` through the gateway's API: a long-poll that returns as soon as the
//! gateway spools an event, instead of looking at the file five times a second.
//!
//! The output is the file follow's, line for line: the same listing first (`--since`
//! included), then each new event. Should the API stop answering midway (the gateway
//! stopped or restarts), the follow goes on from the same cursor by reading the spool files
//! itself, since a cursor means the same to both.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use tracing::warn;

use super::super::error::FollowError;
use super::{print, Listing};
use crate::api::client::{Client, ClientError};
use crate::api::wire::PagedEvent;
use crate::api::{MAX_LIMIT, PAGE_BYTES};
use crate::gateway::spool::cursor::{read_after, Limits, Position};
use crate::gateway::spool::reader::{after, Record};
use crate::gateway::spool::FOLLOW_POLL;

/// How long each long-poll waits for an event.
const LONG_POLL: Duration = Duration::from_secs(30);

/// Where pages come from: the API while it answers, then the files.
struct Source<'a> {
    client: &'a Client,
    dir: &'a Path,
    api: bool,
}

impl Source<'_> {
    /// The events after `after` and the cursor to read on from, waiting up to `wait` for
    /// one when there are none.
    async fn page(
        &mut self,
        after: Option<&str>,
        wait: Duration,
    ) -> Result<(Vec<Record>, String), FollowError> {
        if self.api {
            match self.client.events(after, wait, MAX_LIMIT).await {
                Ok(page) => return Ok((records(page.events), page.next)),
                Err(e) if unreachable(&e) => {
                    warn!(
                        error = %crate::error_chain::one_line(&e),
                        "the gateway's API stopped answering; following the spool files from the same place"
                    );
                    self.api = false;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let limits = Limits {
            events: MAX_LIMIT,
            bytes: PAGE_BYTES,
        };
        let page = read_after(self.dir, Position::parse(after)?, limits)?;
        if page.events.is_empty() && !wait.is_zero() {
            tokio::time::sleep(FOLLOW_POLL).await;
        }
        let next = page.next.to_string();
        Ok((page.events.into_iter().map(|f| f.record).collect(), next))
    }
}

/// The events as the file follow prints them: `raw` is the event written as the gateway
/// writes it, which is the stored line.
fn records(events: Vec<PagedEvent>) -> Vec<Record> {
    events
        .into_iter()
        .map(|p| Record {
            raw: serde_json::to_string(&p.event).expect("an event serialises"),
            event: p.event,
        })
        .collect()
}

/// Nothing answers on the socket, or the answer was cut off: a gateway that is not there.
fn unreachable(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::NotRunning { .. }
            | ClientError::Connect { .. }
            | ClientError::Http { .. }
            | ClientError::Timeout { .. }
    )
}

/// Follow through the API. `Ok(false)` when the API did not answer at all, and nothing was
/// printed: the caller follows the files instead. Otherwise it runs until an error, a
/// closed output included.
pub(super) async fn follow(
    client: &Client,
    dir: &Path,
    listing: Listing<'_>,
    out: &mut (dyn Write + Send),
) -> Result<bool, FollowError> {
    let first = match client.events(None, Duration::ZERO, MAX_LIMIT).await {
        Err(e) if unreachable(&e) => return Ok(false),
        other => other?,
    };
    let mut source = Source {
        client,
        dir,
        api: true,
    };
    // The listing: every event kept, then only those after `--since`, as the file follow
    // does; it reads until a page comes back empty.
    let mut next = first.next;
    let mut listed = records(first.events);
    loop {
        let (page, cursor) = source.page(Some(&next), Duration::ZERO).await?;
        next = cursor;
        if page.is_empty() {
            break;
        }
        listed.extend(page);
    }
    print(&after(listed, listing.since)?, listing, out)?;
    loop {
        let (page, cursor) = source.page(Some(&next), LONG_POLL).await?;
        next = cursor;
        print(&page, listing, out)?;
    }
}
