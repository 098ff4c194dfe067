//! What an endpoint hands the server to send back: an answer, or one of the two ways a send
//! fault withholds it. Every platform's endpoints return these and only the server writes
//! them, so they sit below both.

use serde_json::{json, Value};

/// An HTTP answer: status, extra headers and a JSON body.
pub(super) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Value,
}

impl Answer {
    pub(crate) fn new(status: u16, body: Value) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body,
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
}
