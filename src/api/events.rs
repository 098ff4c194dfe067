//! `GET /v1/events?after=CURSOR&wait=30s&limit=N`: the spool read after a cursor, held open
//! until something arrives when it has nothing yet.
//!
//! Delivery is at least once: the reader owns its cursor and moves it only after handling
//! what it got, so a reader that crashes reads the last answer again, and one that comes
//! back with its cursor misses nothing, across rotations too (`spool/cursor.rs`).
//!
//! The wait is a wakeup from the spool writer, not a poll of the file: the watch is marked
//! seen before each read, so a line appended between the read and the wait is not missed.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Deserialize;
use tokio::time::Instant;

use super::connections::{Conn, Phase};
use super::problem::Problem;
use super::routes::Ctx;
use super::{DEFAULT_LIMIT, MAX_LIMIT, MAX_WAIT, PAGE_BYTES};
use crate::gateway::spool::cursor::{read_after, CursorError, Limits, Page, Position};
use crate::gateway::spool::SpoolError;
use crate::gateway::until_shutdown;
use crate::platform::Normaliser;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsQuery {
    after: Option<String>,
    wait: Option<String>,
    limit: Option<String>,
}

pub(super) async fn get_events(
    State(ctx): State<Arc<Ctx>>,
    conn: Option<Extension<Arc<Conn>>>,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let Query(query) = query.map_err(|e| {
        Problem::bad_request(
            "bad_query",
            format!(
                "{}; the parameters are after, wait and limit",
                e.body_text()
            ),
        )
    })?;
    let position = Position::parse(query.after.as_deref())
        .map_err(|e| Problem::bad_request("bad_cursor", e.to_string()).field("after"))?;
    let wait = parse_wait(query.wait.as_deref())?;
    let limit = parse_limit(query.limit.as_deref())?;
    let limits = Limits {
        events: limit,
        bytes: PAGE_BYTES,
    };
    let conn = conn.map(|Extension(conn)| conn);
    let page = long_poll(&ctx, conn.as_deref(), position, wait, limits)
        .await
        .map_err(|e| match e {
            CursorError::Gone { .. } => {
                Problem::new(StatusCode::GONE, "cursor_gone", e.to_string()).field("after")
            }
            CursorError::Malformed(_) => {
                Problem::bad_request("bad_cursor", e.to_string()).field("after")
            }
            CursorError::Spool(e) => Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "spool_unreadable",
                crate::error_chain::one_line(&e),
            ),
        })?;
    let body = render(&page, &ctx.state.normaliser);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn parse_wait(text: Option<&str>) -> Result<Duration, Problem> {
    let Some(text) = text else {
        return Ok(Duration::ZERO);
    };
    let bad = |why: &str| {
        Problem::bad_request(
            "bad_wait",
            format!("wait {text:?} {why}: give a duration from 0s to 60s, such as 30s or 500ms"),
        )
        .field("wait")
    };
    let wait = humantime::parse_duration(text).map_err(|_| bad("is not a duration"))?;
    if wait > MAX_WAIT {
        return Err(bad("is longer than the most a request may wait"));
    }
    Ok(wait)
}

fn parse_limit(text: Option<&str>) -> Result<usize, Problem> {
    let Some(text) = text else {
        return Ok(DEFAULT_LIMIT);
    };
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(Problem::bad_request(
            "bad_limit",
            format!("limit {text:?} is not a number of events from 1 to {MAX_LIMIT}"),
        )
        .field("limit")),
    }
}

/// Read after `position`; with nothing there, wait up to `wait` for the writer to append,
/// and read again. A shutdown ends the wait with what there is (nothing), and so does the
/// connection table shedding this connection to admit another (connections.rs): a long-poll
/// may be answered early at any time, and its client asks again.
async fn long_poll(
    ctx: &Ctx,
    conn: Option<&Conn>,
    mut position: Position,
    wait: Duration,
    limits: Limits,
) -> Result<Page, CursorError> {
    let mut appended = ctx.state.appended.clone();
    let mut shutdown = ctx.shutdown.clone();
    let deadline = Instant::now() + wait;
    loop {
        appended.borrow_and_update();
        let dir = ctx.state.spool_dir.clone();
        let page = tokio::task::spawn_blocking(move || read_after(&dir, position, limits))
            .await
            .map_err(|e| {
                CursorError::Spool(SpoolError::Io {
                    op: "read",
                    path: ctx.state.spool_dir.clone(),
                    source: std::io::Error::other(e),
                })
            })??;
        if !page.events.is_empty() || Instant::now() >= deadline || *shutdown.borrow() {
            return Ok(page);
        }
        // `end` is now the event it meant: what is appended next comes after it.
        position = page.next;
        let shed = async {
            match conn {
                Some(conn) => conn.shed().await,
                None => std::future::pending().await,
            }
        };
        if let Some(conn) = conn {
            conn.set(Phase::Waiting);
        }
        let woken = tokio::select! {
            changed = appended.changed() => changed.is_ok(), // an error: the spool is closed
            () = tokio::time::sleep_until(deadline) => false,
            () = until_shutdown(&mut shutdown) => false,
            _ = shed => false,
        };
        if let Some(conn) = conn {
            conn.set(Phase::Handling);
        }
        if !woken {
            return Ok(page);
        }
    }
}

/// `{"events":[...],"next":"..."}`, each event the stored line with `"cursor"` put first and
/// then, for a chat message, `"message"`, its normalised form (`platform/message.rs`), and
/// the access rules' verdict as stored (`"access"`; one stored before there was a verdict is
/// said to be `unjudged`, which is never sent to the agent either). The
/// line is spliced rather than parsed and written again, so an event reads exactly as the
/// spool has it; a line that would not splice cleanly is written from the parsed event.
fn render(page: &Page, normaliser: &Normaliser) -> String {
    let size: usize = page.events.iter().map(|f| f.raw().len() + 64).sum();
    let mut body = String::with_capacity(size + 64);
    body.push_str("{\"events\":[");
    for (i, found) in page.events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        let raw = found.raw().trim();
        let spliced = raw.starts_with('{') && !raw.contains("\"cursor\"");
        let line = if spliced {
            raw.to_owned()
        } else {
            serde_json::to_string(found.event()).expect("an event serialises")
        };
        body.push_str("{\"cursor\":");
        body.push_str(&json_string(&found.cursor.to_string()));
        body.push(',');
        if let Some(message) = normaliser.message(found.event()) {
            body.push_str("\"message\":");
            body.push_str(&serde_json::to_string(&message).expect("a message serialises"));
            body.push(',');
            if found.event().access.is_none() {
                body.push_str(crate::access::UNJUDGED_FIELD);
            }
        }
        body.push_str(&line[1..]);
    }
    body.push_str("],\"next\":");
    body.push_str(&json_string(&page.next.to_string()));
    body.push('}');
    body
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}
