//! What the mock Slack keeps for a test to read: every event and its deliveries, and counts.

use std::time::Instant;

/// One event the platform sent, with each delivery of it.
#[derive(Clone, Debug)]
pub struct SlackEventRecord {
    /// `payload.event_id`: the same on every delivery.
    pub event_id: String,
    pub channel: String,
    pub text: String,
    pub ts: String,
    /// Whether this is the bot's own post coming back (it carries `bot_id`).
    pub own: bool,
    pub emitted_at: Instant,
    /// `(envelope_id, retry_attempt, when)` of each delivery, in order.
    pub deliveries: Vec<(String, u32, Instant)>,
    /// When an ack for any of its envelopes arrived first.
    pub acked_at: Option<Instant>,
    /// Still unacked after every retry: Slack gives up on it.
    pub dropped: bool,
}

/// Counters a test reads to assert what a Socket Mode client did.
#[derive(Clone, Debug, Default)]
pub struct SlackStats {
    /// `apps.connections.open` answers with a URL.
    pub urls_issued: u64,
    /// `apps.connections.open` requests refused (bad token, an armed refusal, Socket Mode off).
    pub opens_refused: u64,
    /// WebSocket connections admitted, and upgrades refused for an unknown or used ticket.
    pub connections: u64,
    pub tickets_refused: u64,
    pub live_connections: u64,
    /// The most connections the app held at once (a client that opens its next connection
    /// before closing the one Slack asked to refresh holds two).
    pub peak_connections: u64,
    /// Envelope frames written, first deliveries and retries alike.
    pub envelopes_sent: u64,
    pub redeliveries: u64,
    /// Ack frames received, and those naming no envelope the platform is waiting on.
    pub acks: u64,
    pub stray_acks: u64,
    /// WebSocket pings received from clients.
    pub ws_pings: u64,
    /// `disconnect` messages sent.
    pub disconnects: u64,
    /// `files.getUploadURLExternal` answers with a URL, bodies taken at an upload URL, and
    /// files `files.completeUploadExternal` shared into a channel.
    pub upload_urls: u64,
    pub uploads: u64,
    pub files_shared: u64,
    /// Requests for a shared file's bytes (`/files-pri/…`): answered with the bytes, and
    /// answered with the sign-in page; and `files.info` calls.
    pub file_downloads: u64,
    pub sign_in_pages: u64,
    pub files_info_calls: u64,
    /// When each connection was admitted, in order.
    pub connection_times: Vec<Instant>,
}
