//! The one error shape every route answers with: `{"error": {"code", "message", "field"?}}`,
//! so that a client reads one shape whatever went wrong, and a person reads what to fix.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::wire::{ErrorBody, ErrorDetail};
use super::{BODY_TIMEOUT, MAX_BODY};

#[derive(Debug)]
pub(super) struct Problem {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
    /// The request field or parameter at fault, when one is.
    pub(super) field: Option<&'static str>,
}

impl Problem {
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub(super) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 413: the body is over [`MAX_BODY`].
    pub(super) fn body_too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the request body is over {} MiB; a message's text is at most 65,536 characters on every platform",
                MAX_BODY / (1024 * 1024)
            ),
        )
    }

    /// 408: the body did not arrive within [`BODY_TIMEOUT`] of the headers.
    pub(super) fn body_timeout() -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!(
                "the request body did not arrive within {} s of its headers; send the whole body at once",
                BODY_TIMEOUT.as_secs()
            ),
        )
    }

    pub(super) fn field(mut self, field: &'static str) -> Self {
        self.field = Some(field);
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                field: self.field.map(str::to_owned),
            },
        };
        (self.status, Json(body)).into_response()
    }
}
