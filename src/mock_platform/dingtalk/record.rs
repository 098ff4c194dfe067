//! What the mock DingTalk keeps for a test to read, and the faults a test arms.

use std::time::Instant;

/// One robot message the platform sent, with each push of it.
#[derive(Clone, Debug)]
pub struct DingTalkEventRecord {
    /// `msgId`: the same on every push.
    pub msg_id: String,
    pub conversation_id: String,
    pub text: String,
    pub emitted_at: Instant,
    /// `(messageId, when)` of each push: each push is a new frame with a new `messageId`.
    pub deliveries: Vec<(String, Instant)>,
    /// When an ack naming any of its frames first came.
    pub acked_at: Option<Instant>,
    /// Unacked after every push: the platform gave up on it.
    pub dropped: bool,
}

/// One Stream connection as the server saw it: when it opened, when the client first proved
/// it (a WebSocket ping), when the server said `disconnect` on it, and how it ended.
#[derive(Clone, Debug)]
pub struct DingTalkConnRecord {
    pub opened_at: Instant,
    pub first_ping_at: Option<Instant>,
    pub disconnect_at: Option<Instant>,
    pub closed_at: Option<Instant>,
    pub closed_by: Option<DingTalkSide>,
}

/// Which side ended a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DingTalkSide {
    /// A close frame, a FIN or a reset from the client.
    Client,
    /// The server: its close after `disconnect_grace`, a fault, or the mock stopping.
    Server,
}

/// Counters a test reads to assert what a Stream client did.
#[derive(Clone, Debug, Default)]
pub struct DingTalkStats {
    /// `connections/open` answers with an endpoint and ticket, and requests refused.
    pub tickets_issued: u64,
    pub opens_refused: u64,
    /// Upgrades admitted, and refused for an unknown, used or expired ticket.
    pub connections: u64,
    pub tickets_refused: u64,
    pub live_connections: u64,
    pub peak_connections: u64,
    /// CALLBACK frames written, and the pushes among them that were again.
    pub callbacks_sent: u64,
    pub redeliveries: u64,
    /// Acks received, and those naming no frame the platform waits on.
    pub acks: u64,
    pub stray_acks: u64,
    /// SYSTEM pings written, and answered (echoing their data).
    pub system_pings: u64,
    pub system_pongs: u64,
    /// WebSocket pings from clients.
    pub ws_pings: u64,
    /// SYSTEM `disconnect`s written.
    pub disconnects: u64,
    /// Access tokens handed out.
    pub tokens_issued: u64,
    /// `messageFiles/download` links handed out, and files served through them.
    pub file_links: u64,
    pub file_downloads: u64,
}

/// A fault of the Stream connections, applied to every open one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DingTalkFault {
    /// Half-open: nothing more written or read, no pong, no close, no FIN.
    Silence,
    /// Messages keep coming, nothing the client sends is read: no pong, no ack, no answer
    /// to the probe.
    Deaf,
    /// The TCP connection dropped without a close frame.
    Drop,
    /// SYSTEM `disconnect`, then the close `disconnect_grace` later; meanwhile the socket is
    /// still read (acks, pings), and nothing new is pushed on it (but see
    /// `MockPlatform::dingtalk_disconnect_delivering`).
    Disconnect,
}

/// What `connections/open` answers instead of an endpoint, while set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenRefusal {
    /// An HTTP status with `{"code": CODE, "message": …}`: 503 `ServiceUnavailable`, 429
    /// `Throttling`, ….
    Status(u16, String),
}
