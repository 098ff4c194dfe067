//! `getUpdates` (<https://core.telegram.org/bots/api#getupdates>): confirm what the offset
//! confirms, then answer the pending updates at once, or hold the request until one comes or
//! `timeout` runs out. One poll is held at a time per bot: a new one ends the one held before
//! with 409, as tdlib/telegram-bot-api does, and a webhook refuses polling altogether.
//! `limit` and `timeout` are clamped, not refused, as the server clamps them.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::{sleep, sleep_until, Instant};

use super::super::reply::Reply;
use super::super::shutdown::stopped;
use super::answers::{self, TERMINATED_BY_POLL, UNAUTHORIZED, WEBHOOK_ACTIVE};
use super::faults::TelegramFault;
use super::params::Params;
use super::state::{Registered, TelegramState};

/// "Values between 1-100 are accepted. Defaults to 100."
const MAX_LIMIT: i64 = 100;

struct PollRequest {
    offset: Option<i64>,
    limit: usize,
    /// Seconds as asked, before the cap.
    asked_timeout: u64,
    timeout: Duration,
    allowed_updates: Option<Vec<String>>,
}

impl PollRequest {
    fn read(params: &Params<'_>, max_timeout: Duration) -> PollRequest {
        let limit = params.int("limit").unwrap_or(MAX_LIMIT).clamp(1, MAX_LIMIT);
        let asked_timeout = params.int("timeout").unwrap_or(0).max(0).unsigned_abs();
        PollRequest {
            offset: params.int("offset"),
            limit: usize::try_from(limit).unwrap_or(1),
            asked_timeout,
            timeout: Duration::from_secs(asked_timeout).min(max_timeout),
            allowed_updates: params.allowed_updates(),
        }
    }
}

enum Outcome {
    Batch(Vec<Value>),
    /// Ended early with a 409 for this reason.
    Ended(&'static str),
    /// The mock is stopping.
    Stopped,
}

pub(crate) async fn get_updates(
    params: &Params<'_>,
    state: &TelegramState,
    mut shutdown: watch::Receiver<bool>,
) -> Reply {
    let fault = state.strike();
    let refused = |answer| {
        state.count(|s| s.refused += 1);
        Reply::Answer(answer)
    };
    match fault {
        Some(TelegramFault::HangPolls) => {
            state.count(|s| s.hung += 1);
            return Reply::Hang;
        }
        Some(TelegramFault::RateLimited { retry_after }) => {
            return refused(answers::too_many_requests(retry_after.max(1)));
        }
        Some(TelegramFault::ServerError) => return refused(answers::bad_gateway()),
        Some(TelegramFault::Unauthorized) => return refused(answers::error(401, UNAUTHORIZED)),
        Some(TelegramFault::Duplicate) => {
            if let Some(batch) = state.last_batch() {
                state.answered(&batch);
                return Reply::Answer(answers::ok(Value::Array(batch)));
            }
        }
        Some(TelegramFault::OtherPoller | TelegramFault::Slow(_)) | None => {}
    }
    let config = &state.config;
    let request = PollRequest::read(params, config.max_timeout);
    // Subscribed before the queue is first read, so nothing queued after that read is missed.
    let arrivals = state.arrivals();
    let allowed = request.allowed_updates.clone();
    let Some(mut registered) = state.begin_poll(request.offset, request.asked_timeout, allowed)
    else {
        state.count(|s| s.conflicts += 1);
        return Reply::Answer(answers::error(409, WEBHOOK_ACTIVE));
    };
    let outcome = if fault == Some(TelegramFault::OtherPoller) {
        taken_over(&mut registered, config.other_poller_after, &mut shutdown).await
    } else {
        hold(state, &mut registered, arrivals, &request, &mut shutdown).await
    };
    state.release(registered.poll);
    let answer = match outcome {
        Outcome::Batch(batch) => {
            state.answered(&batch);
            answers::ok(Value::Array(batch))
        }
        Outcome::Ended(reason) => {
            state.count(|s| s.conflicts += 1);
            answers::error(409, reason)
        }
        Outcome::Stopped => return Reply::Hang,
    };
    if let Some(TelegramFault::Slow(delay)) = fault {
        tokio::select! {
            _ = sleep(delay) => {}
            _ = stopped(&mut shutdown) => return Reply::Hang,
        }
    }
    Reply::Answer(answer)
}

/// Waits for a pending update, the timeout, a later poll, or the mock's stop.
async fn hold(
    state: &TelegramState,
    registered: &mut Registered,
    mut arrivals: watch::Receiver<u64>,
    request: &PollRequest,
    shutdown: &mut watch::Receiver<bool>,
) -> Outcome {
    let deadline = Instant::now() + request.timeout;
    loop {
        let batch = state.batch(request.limit);
        if !batch.is_empty() || Instant::now() >= deadline {
            return Outcome::Batch(batch);
        }
        tokio::select! {
            reason = &mut registered.ended => {
                return Outcome::Ended(reason.unwrap_or(TERMINATED_BY_POLL));
            }
            // The sender lives as long as the state, so this never fails while we hold it.
            _ = arrivals.changed() => {}
            _ = sleep_until(deadline) => {}
            _ = stopped(shutdown) => return Outcome::Stopped,
        }
    }
}

/// `OtherPoller`: the other instance's poll arrives `after` ours and ends it.
async fn taken_over(
    registered: &mut Registered,
    after: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> Outcome {
    tokio::select! {
        _ = sleep(after) => Outcome::Ended(TERMINATED_BY_POLL),
        reason = &mut registered.ended => Outcome::Ended(reason.unwrap_or(TERMINATED_BY_POLL)),
        _ = stopped(shutdown) => Outcome::Stopped,
    }
}
