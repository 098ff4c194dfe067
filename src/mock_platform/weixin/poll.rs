//! `POST /ilink/bot/getupdates`: the long poll.
//!
//! The client sends the previous answer's `get_updates_buf` (empty the first time or after a
//! reset); the server holds the request until a message is newer than that cursor or the
//! long-poll timeout passes, then answers `{ret, msgs, get_updates_buf,
//! longpolling_timeout_ms}` (Tencent's protocol doc). The mock's cursor is opaque to the
//! client but is only a position in the mock's log, so asking again with an old cursor gets
//! the same messages again, as a client that lost an answer needs.
//!
//! Assumptions where the sources are silent: an answer carries at most [`BATCH`] messages; a
//! timed-out hold answers `ret` 0, no messages and the cursor as sent; a cursor the mock
//! never gave reads as the start of the log (and is counted).

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{sleep, sleep_until, Instant};

use super::checks::{self, check_post};
use super::codec;
use super::faults::{WeixinFault, REPLAY};
use super::state::WeixinState;
use crate::mock_platform::http::RequestHead;
use crate::mock_platform::reply::Answer;
use crate::mock_platform::reply::Reply;
use crate::mock_platform::shutdown::stopped;

/// The most messages one answer carries.
pub(crate) const BATCH: usize = 100;

pub(crate) async fn get_updates(
    head: &RequestHead,
    body: &[u8],
    state: &WeixinState,
    mut shutdown: watch::Receiver<bool>,
) -> Reply {
    let checked = check_post(head, body, state);
    let sent = match &checked {
        Ok(body) => body.get("get_updates_buf").and_then(Value::as_str),
        Err(_) => None,
    }
    .unwrap_or_default()
    .to_owned();
    let fault = {
        let mut inner = state.lock();
        inner.stats.polls += 1;
        inner.stats.last_cursor_seen = Some(sent.clone());
        match &checked {
            Ok(_) => inner.strike_fault(),
            Err(_) => None,
        }
    };
    if let Err(answer) = checked {
        return Reply::Answer(answer);
    }
    let mut start = None;
    match fault {
        Some(WeixinFault::HangPolls) => {
            state.lock().stats.hung += 1;
            return Reply::Hang;
        }
        Some(WeixinFault::RateLimited) => {
            state.lock().stats.rate_limited += 1;
            return Reply::Answer(checks::frequency_limit());
        }
        Some(WeixinFault::ServerError) => {
            state.lock().stats.server_errors += 1;
            return Reply::Answer(checks::http_error(502));
        }
        Some(WeixinFault::Slow(delay)) => {
            tokio::select! {
                _ = stopped(&mut shutdown) => return Reply::Hang,
                _ = sleep(delay) => {}
            }
        }
        Some(WeixinFault::Duplicate) => {
            // Taken before answering: the guard of an `if let` scrutinee would live through
            // its block, and `batch_answer` locks again.
            let previous = state.lock().last_batch.clone();
            if let Some((msgs, cursor)) = previous {
                return Reply::Answer(batch_answer(state, msgs, cursor));
            }
        }
        Some(WeixinFault::CursorReset) => start = Some(reset_point(state, &sent)),
        None => {}
    }
    let start = match start {
        Some(start) => start,
        None => read_cursor(state, &sent),
    };
    hold(state, start, sent, shutdown).await
}

/// Where a poll with this cursor starts.
fn read_cursor(state: &WeixinState, sent: &str) -> usize {
    codec::position(sent).unwrap_or_else(|| {
        state.lock().stats.bad_cursors += 1;
        0
    })
}

/// An earlier point than the cursor: up to [`REPLAY`] messages before the log's end, never
/// later than where the client was (so the fault repeats messages and never skips any).
fn reset_point(state: &WeixinState, sent: &str) -> usize {
    let at = codec::position(sent).unwrap_or(0);
    let len = state.lock().log.len();
    at.min(len.saturating_sub(REPLAY))
}

/// Answers with what follows `start`, waiting up to the long-poll timeout for something to.
async fn hold(
    state: &WeixinState,
    start: usize,
    sent: String,
    mut shutdown: watch::Receiver<bool>,
) -> Reply {
    let timeout = Duration::from_millis(state.config.longpolling_timeout_ms);
    let deadline = Instant::now() + timeout;
    loop {
        // Registered before looking, so a message emitted in between still wakes this poll.
        let arrival = state.arrivals.notified();
        tokio::pin!(arrival);
        arrival.as_mut().enable();
        if let Some((msgs, cursor)) = batch(state, start) {
            state.lock().last_batch = Some((msgs.clone(), cursor.clone()));
            return Reply::Answer(batch_answer(state, msgs, cursor));
        }
        tokio::select! {
            _ = &mut arrival => {}
            _ = sleep_until(deadline) => {
                state.lock().stats.empty_answers += 1;
                return Reply::Answer(batch_answer(state, Vec::new(), sent));
            }
            _ = stopped(&mut shutdown) => return Reply::Hang,
        }
    }
}

/// The messages after `start` (at most [`BATCH`]) and the cursor after them; `None` when
/// there are none.
fn batch(state: &WeixinState, start: usize) -> Option<(Vec<Value>, String)> {
    let inner = state.lock();
    let start = start.min(inner.log.len());
    let end = inner.log.len().min(start + BATCH);
    if start == end {
        return None;
    }
    let msgs = inner.log[start..end]
        .iter()
        .map(|message| message.to_json(&state.config.bot_id))
        .collect();
    Some((msgs, codec::cursor(end)))
}

fn batch_answer(state: &WeixinState, msgs: Vec<Value>, cursor: String) -> Answer {
    {
        let mut inner = state.lock();
        inner.stats.answered += 1;
        inner.stats.messages_delivered += msgs.len() as u64;
    }
    Answer::new(
        200,
        json!({
            "ret": 0,
            "errcode": 0,
            "msgs": msgs,
            "get_updates_buf": cursor,
            "longpolling_timeout_ms": state.config.longpolling_timeout_ms,
        }),
    )
}
