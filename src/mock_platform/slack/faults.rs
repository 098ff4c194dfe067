//! What can go wrong on the mock Slack's side, each as the field reports describe it
//! (docs/research/slack-socket-mode.md, "What a mock must reproduce").

/// A fault of the Socket Mode connections, applied to every open connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlackFault {
    /// Half-open: nothing more is written or read, no pong, no close, no FIN.
    Silence,
    /// Events keep coming, but nothing the client sends is read: no pong, no ack.
    Deaf,
    /// A close frame with code 1000, as Slack closes a refreshed connection.
    CloseAll,
    /// A `disconnect` message with this reason (`warning`, `refresh_requested`,
    /// `link_disabled`, `too_many_websockets`). With `link_disabled` the app's Socket Mode is
    /// switched off too: `apps.connections.open` refuses until [`SlackFault`]s are cleared.
    Disconnect(String),
}

/// What `apps.connections.open` answers instead of a URL, while set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenRefusal {
    /// `{"ok": false, "error": CODE}`: `invalid_auth`, `token_revoked`, `internal_error`,
    /// `socket_mode_not_enabled`, ….
    Error(String),
    /// HTTP 429 with `Retry-After: SECS` and `ratelimited`.
    RateLimited(u64),
}
