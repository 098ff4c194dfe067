//! The Bot API's answer envelope ("Making requests" in <https://core.telegram.org/bots/api>):
//! `{"ok": true, "result": …}` or `{"ok": false, "error_code", "description"}` with the same
//! HTTP status, plus `parameters.retry_after` on a flood wait.

use std::time::Duration;

use serde_json::{json, Value};

use super::super::reply::Answer;

pub(crate) const UNAUTHORIZED: &str = "Unauthorized";
pub(crate) const NOT_FOUND: &str = "Not Found";
pub(crate) const TERMINATED_BY_POLL: &str =
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";
pub(crate) const TERMINATED_BY_WEBHOOK: &str = "Conflict: terminated by setWebhook request";
pub(crate) const WEBHOOK_ACTIVE: &str =
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";

pub(crate) fn ok(result: Value) -> Answer {
    Answer::new(200, json!({"ok": true, "result": result}))
}

/// `ok` with the `description` the webhook methods add.
pub(crate) fn ok_described(result: Value, description: &str) -> Answer {
    Answer::new(
        200,
        json!({"ok": true, "result": result, "description": description}),
    )
}

pub(crate) fn error(status: u16, description: &str) -> Answer {
    Answer::new(
        status,
        json!({"ok": false, "error_code": status, "description": description}),
    )
}

pub(crate) fn bad_request(detail: &str) -> Answer {
    error(400, &format!("Bad Request: {detail}"))
}

/// The whole seconds a flood wait tells the client: rounded up, at least one (the server
/// never says 0).
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs_f64().ceil() as u64).max(1)
}

pub(crate) fn too_many_requests(retry_after: u64) -> Answer {
    Answer::new(
        429,
        json!({
            "ok": false,
            "error_code": 429,
            "description": format!("Too Many Requests: retry after {retry_after}"),
            "parameters": {"retry_after": retry_after},
        }),
    )
}

pub(crate) fn bad_gateway() -> Answer {
    error(502, "Bad Gateway")
}

pub(crate) fn internal_error() -> Answer {
    error(500, "Internal Server Error")
}
