//! What an endpoint hands the server to send back: an answer, or one of the ways a fault
//! withholds it (in full or in part). Every platform's endpoints return these and only the
//! server writes them, so they sit below both.

use serde_json::{json, Value};

/// What an answer carries after its head.
pub(super) enum Body {
    /// JSON, sent as `application/json`: what every platform's own API answers.
    Json(Value),
    /// Anything else, as is: a proxy's HTML error page, or nothing at all. `content_type`
    /// `None` sends no `Content-Type` header.
    Raw {
        content_type: Option<&'static str>,
        text: String,
    },
    /// Bytes, as is: a file a platform serves.
    Bytes {
        content_type: &'static str,
        bytes: Vec<u8>,
    },
}

/// An HTTP answer: status, extra headers and a body.
pub(super) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Body,
}

impl Answer {
    pub(crate) fn new(status: u16, body: Value) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Body::Json(body),
        }
    }

    /// An answer whose body is not JSON: what a reverse proxy in front of a platform sends
    /// when the platform itself is away.
    pub(crate) fn raw(status: u16, content_type: Option<&'static str>, text: String) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Body::Raw { content_type, text },
        }
    }

    /// A file's bytes, as a platform's file server sends them.
    pub(crate) fn bytes(content_type: &'static str, bytes: Vec<u8>) -> Answer {
        Answer {
            status: 200,
            headers: Vec::new(),
            body: Body::Bytes {
                content_type,
                bytes,
            },
        }
    }

    /// The mock's own error, `{"code", "message"}` with the status as the code: for what no
    /// platform answers (a body too large, a path nobody serves).
    pub(crate) fn error(status: u16, message: &str) -> Answer {
        Answer::new(status, json!({"code": status, "message": message}))
    }
}

/// What the connection does with a request.
pub(super) enum Reply {
    Answer(Answer),
    /// Keep the connection open and never answer.
    Hang,
    /// Close the connection with a reset and no answer.
    Reset,
    /// Send the answer's head, which declares the whole body's length, and only the first
    /// `sent` bytes of the body; then keep the connection open and silent, as a server (or a
    /// middlebox) that stalled in the middle of an answer.
    Partial {
        answer: Answer,
        sent: usize,
    },
}
