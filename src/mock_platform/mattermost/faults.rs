//! The faults of the mock Mattermost's WebSocket and its upgrade.

/// A fault of the open WebSocket connections, applied to every one open when set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MattermostFault {
    /// Half-open: nothing more is written or read, no pong, no close, no FIN.
    Silence,
    /// Events keep coming, but nothing the client sends is read, so its pings get no pong.
    Deaf,
    /// The TCP connection is dropped without a close frame.
    Drop,
    /// A close frame with this code: 1001 (going away) is the server's planned restart.
    Close(u16),
}
