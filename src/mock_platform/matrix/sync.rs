//! `GET /_matrix/client/v3/sync`, the long poll (docs/research/matrix-client-server.md §2,
//! Synapse semantics): an initial sync (no `since`), `timeout=0` and `full_state=true` answer
//! at once; any other is held until an event the filter lets through arrives (and answers
//! early) or `timeout` (capped at `MatrixConfig::max_timeout`) runs out, and then answers
//! with `next_batch` equal to `since`, the "repeated batch" a client must not spin on.
//! Parameters are checked in Synapse's order: `timeout`, `set_presence`, `full_state`, the
//! filter, then the `since` token.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

use super::super::http::RequestHead;
use super::super::reply::{Answer, Reply};
use super::super::shutdown::stopped;
use super::auth;
use super::errors;
use super::faults::MatrixFault;
use super::filter::{Refused, SyncFilter};
use super::state::{MatrixState, SyncView};
use super::tokens::Kind;

const PRESENCE: [&str; 3] = ["offline", "online", "unavailable"];

struct SyncRequest {
    /// As sent, for a `next_batch` that repeats it.
    since_token: Option<String>,
    since: Option<u64>,
    timeout: Duration,
    full_state: bool,
    filter: SyncFilter,
}

impl SyncRequest {
    fn read(head: &RequestHead, state: &MatrixState) -> Result<SyncRequest, Answer> {
        let invalid = |message: String| errors::error(400, "M_INVALID_PARAM", &message);
        if head.query_param("from").is_some() {
            let message = "'from' is not a valid query parameter. Did you mean 'since'?";
            return Err(errors::error(400, "M_UNKNOWN", message));
        }
        let timeout = match head.query_param("timeout") {
            None => 0,
            Some(text) => text.trim().parse::<i64>().map_err(|_| {
                invalid("Query parameter \"timeout\" must be an integer".to_owned())
            })?,
        };
        let timeout = Duration::from_millis(timeout.max(0).unsigned_abs());
        if let Some(presence) = head.query_param("set_presence") {
            if !PRESENCE.contains(&presence.as_str()) {
                let message =
                    format!("Query parameter \"set_presence\" must be one of {PRESENCE:?}");
                return Err(invalid(message));
            }
        }
        let full_state = match head.query_param("full_state").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                let message =
                    "Boolean query parameter \"full_state\" must be one of ['true', 'false']";
                return Err(invalid(message.to_owned()));
            }
        };
        let filter = match head.query_param("filter") {
            None => SyncFilter::default(),
            Some(text) => filter(&text, state)?,
        };
        let since_token = head.query_param("since");
        let since = match &since_token {
            None => None,
            Some(token) => match state.parse_token(token, &[Kind::Sync]) {
                Some(position) => Some(position),
                None => return Err(errors::invalid_token()),
            },
        };
        Ok(SyncRequest {
            since_token,
            since,
            timeout: timeout.min(state.config.max_timeout),
            full_state,
            filter,
        })
    }

    /// Whether Synapse answers without waiting.
    fn at_once(&self) -> bool {
        self.since.is_none() || self.timeout.is_zero() || self.full_state
    }
}

/// The filter the parameter names: inline JSON when it starts with `{`, else an uploaded
/// filter's id.
fn filter(text: &str, state: &MatrixState) -> Result<SyncFilter, Answer> {
    let refused = |refused: Refused| match refused {
        Refused::NotJson => errors::error(400, "M_NOT_JSON", "Invalid filter JSON"),
        Refused::BadJson(message) => errors::error(400, "M_BAD_JSON", &message),
    };
    if text.starts_with('{') {
        return SyncFilter::inline(text).map_err(refused);
    }
    let Some(uploaded) = state.filter(text) else {
        return Err(errors::error(400, "M_INVALID_PARAM", "No such filter"));
    };
    super::filter::from_value(uploaded).map_err(refused)
}

pub(crate) async fn sync(
    head: &RequestHead,
    state: &MatrixState,
    mut shutdown: watch::Receiver<bool>,
) -> Reply {
    state.sync_arrived();
    let refused = |answer: Answer| {
        state.count(|s| s.refused += 1);
        Reply::Answer(answer)
    };
    if let Err(answer) = auth::check(head, state) {
        return refused(answer);
    }
    let fault = state.strike(head.query_param("since").is_some());
    match fault {
        Some(MatrixFault::HangSyncs) => {
            state.count(|s| s.hung += 1);
            return Reply::Hang;
        }
        Some(MatrixFault::RateLimited {
            retry_after_ms,
            header_secs,
        }) => return refused(errors::limit_exceeded(retry_after_ms, header_secs)),
        Some(MatrixFault::ServerError { status, html }) => {
            return refused(errors::proxy_error(status, html))
        }
        Some(MatrixFault::UnknownToken { soft_logout }) => {
            return refused(errors::unknown_token(soft_logout))
        }
        Some(MatrixFault::InvalidSince) => return refused(errors::invalid_token()),
        Some(MatrixFault::RepeatBatch) => {
            if let Some(batch) = state.last_batch() {
                state.count(|s| s.syncs_answered += 1);
                return Reply::Answer(Answer::new(200, batch));
            }
        }
        Some(MatrixFault::HalfBody) | None => {}
    }
    let request = match SyncRequest::read(head, state) {
        Ok(request) => request,
        Err(answer) => return refused(answer),
    };
    if fault == Some(MatrixFault::HalfBody) {
        let view = state.sync_view(request.since, &request.filter, request.full_state);
        let body = render(state, &request, view);
        let sent = body.to_string().len() / 2;
        state.count(|s| s.refused += 1);
        return Reply::Partial {
            answer: Answer::new(200, body),
            sent,
        };
    }
    // Subscribed before the stream is first read, so nothing appended after that read is
    // missed.
    let mut arrivals = state.arrivals();
    let deadline = Instant::now() + request.timeout;
    let _live = (!request.at_once()).then(|| state.live());
    let view = loop {
        let view = state.sync_view(request.since, &request.filter, request.full_state);
        if request.at_once() || view.events > 0 || Instant::now() >= deadline {
            break view;
        }
        tokio::select! {
            // The sender lives as long as the state, so this never fails while we hold it.
            _ = arrivals.changed() => {}
            _ = sleep_until(deadline) => {}
            _ = stopped(&mut shutdown) => return Reply::Hang,
        }
    };
    let (events, limited) = (view.events, view.limited);
    let body = render(state, &request, view);
    state.answered(&body, events, limited);
    Reply::Answer(Answer::new(200, body))
}

/// The answer, with only what is not empty, as Synapse's `encode_response` leaves out empty
/// sections (and always sends the one-time key counts). `next_batch` is the view's position,
/// or `since` as sent when an incremental sync found nothing.
fn render(state: &MatrixState, request: &SyncRequest, view: SyncView) -> Value {
    let next_batch = match &request.since_token {
        Some(since) if view.events == 0 => since.clone(),
        _ => state.token(Kind::Sync, view.position),
    };
    let mut body = json!({
        "next_batch": next_batch,
        "device_one_time_keys_count": {"signed_curve25519": 0},
        "device_unused_fallback_key_types": [],
    });
    if !view.join.is_empty() {
        body["rooms"] = json!({"join": view.join});
    }
    body
}
