//! The homeserver's error answers (docs/research/matrix-client-server.md §6, spec "Standard
//! error response"): `{"errcode", "error"}` as JSON with the status, plus the extra fields
//! some codes carry; and what a reverse proxy answers instead when the homeserver is away.

use serde_json::json;

use super::super::reply::Answer;

/// `{"errcode", "error"}`: both keys MUST be present.
pub(crate) fn error(status: u16, errcode: &str, message: &str) -> Answer {
    Answer::new(status, json!({"errcode": errcode, "error": message}))
}

/// 401 `M_MISSING_TOKEN`: no token, or one in a shape the server cannot read.
pub(crate) fn missing_token(message: &str) -> Answer {
    error(401, "M_MISSING_TOKEN", message)
}

/// 401 `M_UNKNOWN_TOKEN`; Synapse always sends `soft_logout` (§1, `InvalidClientTokenError`).
pub(crate) fn unknown_token(soft_logout: bool) -> Answer {
    Answer::new(
        401,
        json!({"errcode": "M_UNKNOWN_TOKEN", "error": "Unrecognised access token",
               "soft_logout": soft_logout}),
    )
}

/// 429 `M_LIMIT_EXCEEDED` with `retry_after_ms` in the body and `Retry-After` (seconds) in
/// the head, each when given. Synapse sends both (§6, `LimitExceededError`); the spec since
/// v1.10 (MSC4041) prefers the header and deprecates the field.
pub(crate) fn limit_exceeded(retry_after_ms: Option<u64>, header_secs: Option<u64>) -> Answer {
    let mut body = json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests"});
    if let Some(ms) = retry_after_ms {
        body["retry_after_ms"] = json!(ms);
    }
    let mut answer = Answer::new(429, body);
    if let Some(secs) = header_secs {
        answer.headers.push(("Retry-After", secs.to_string()));
    }
    answer
}

/// A 5xx from in front of the homeserver: an nginx-style HTML page, or nothing (§6: "often no
/// JSON body").
pub(crate) fn proxy_error(status: u16, html: bool) -> Answer {
    if !html {
        return Answer::raw(status, None, String::new());
    }
    let title = match status {
        500 => "500 Internal Server Error",
        502 => "502 Bad Gateway",
        503 => "503 Service Temporarily Unavailable",
        504 => "504 Gateway Time-out",
        _ => "Error",
    };
    let page = format!(
        "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    );
    Answer::raw(status, Some("text/html"), page)
}

/// 404 for a path the server does not serve, 405 for a method a served path does not take:
/// both `M_UNRECOGNIZED` (spec "Common error codes").
pub(crate) fn unrecognized(status: u16) -> Answer {
    error(status, "M_UNRECOGNIZED", "Unrecognized request")
}

/// 403 for a room the bot is not in.
pub(crate) fn not_in_room(user_id: &str, room_id: &str) -> Answer {
    error(
        403,
        "M_FORBIDDEN",
        &format!("User {user_id} not in room {room_id}"),
    )
}

/// 400 for a stream token the server cannot read (§2, `StreamToken.from_string`).
pub(crate) fn invalid_token() -> Answer {
    error(400, "M_UNKNOWN", "Invalid stream token")
}
