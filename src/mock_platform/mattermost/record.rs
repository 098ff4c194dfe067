//! What the mock Mattermost keeps for a test to read.

use std::time::Instant;

/// One post the server holds (a user's, or the bot's through `POST /api/v4/posts`).
#[derive(Clone, Debug)]
pub struct MattermostPostRecord {
    pub id: String,
    pub channel_id: String,
    pub user_id: String,
    pub message: String,
    pub root_id: String,
    pub create_at: i64,
    /// How many connections its `posted` event was written to (0: nobody was connected).
    pub pushed: u32,
    pub emitted_at: Instant,
}

/// One WebSocket connection the mock took, and what it made of the client's resume.
#[derive(Clone, Debug)]
pub struct MattermostConnRecord {
    /// The connection id it served under (a new one unless `resumed`).
    pub connection_id: String,
    /// The upgrade named a `connection_id`.
    pub asked_resume: bool,
    /// The hub still held the connection and its `sequence_number` was in reach: no new
    /// `hello`, the same connection id.
    pub resumed: bool,
    /// Events written again from the dead queue (written before, never read).
    pub replayed: u64,
    /// Events broadcast while no socket served the connection, written on its resume.
    pub held: u64,
}

/// Counters a test reads to assert what a client did.
#[derive(Clone, Debug, Default)]
pub struct MattermostStats {
    /// WebSocket connections admitted, and upgrades refused (a bad token, an armed refusal).
    pub connections: u64,
    pub upgrades_refused: u64,
    pub live_connections: u64,
    /// Upgrades that asked to resume (`connection_id` in the query).
    pub resume_asks: u64,
    /// Authentication challenges that passed (answered `OK`, or ignored on a connection the
    /// upgrade's token already authenticated, as the server ignores them), and `FAIL`.
    pub challenges_ok: u64,
    pub challenges_failed: u64,
    /// WebSocket pings received from clients.
    pub ws_pings: u64,
    /// `posted` frames written, and of them repeats (`redeliver`).
    pub events_sent: u64,
    pub redeliveries: u64,
    /// REST calls: `users/me`, the channel list, `posts?since=` and `POST /posts` (all,
    /// and those a `pending_post_id` answered with an earlier post).
    pub me_calls: u64,
    pub channel_lists: u64,
    pub since_calls: u64,
    pub creates: u64,
    pub deduplicated: u64,
    /// `GET /files/{id}` answered with the bytes, and `GET /files/{id}/info` calls.
    pub file_downloads: u64,
    pub file_info_calls: u64,
    /// Requests refused 401 (no token, a wrong or revoked one).
    pub unauthorized: u64,
    pub connection_times: Vec<Instant>,
    /// Every connection taken, in order, with what its resume came to.
    pub websockets: Vec<MattermostConnRecord>,
}
