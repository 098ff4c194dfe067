//! What the mock's Telegram side counts for a test to read.

use std::time::Instant;

/// Counters of the Bot API's update side. Sends are in the shared post record
/// ([`MockPlatform::posts`](crate::mock_platform::MockPlatform::posts)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TelegramStats {
    /// `getUpdates` requests with the right token, whatever became of them.
    pub polls: u64,
    /// When each of those arrived, in order: what a test reads to check a client's waits.
    pub poll_times: Vec<Instant>,
    /// Polls answered `ok: true` (an empty batch included).
    pub answered: u64,
    /// Polls answered 409: terminated by a later poll or by `setWebhook`, refused while a
    /// webhook is set, or taken over under `OtherPoller`.
    pub conflicts: u64,
    /// Polls answered with a fault's error (429, 502, 401).
    pub refused: u64,
    /// Polls read and never answered (`HangPolls`).
    pub hung: u64,
    /// The highest offset a poll confirmed: every update below it is forgotten.
    pub confirmed_below: i64,
    /// The offset of the last poll that carried one.
    pub last_offset: Option<i64>,
    /// Updates generated and not yet confirmed (or dropped).
    pub pending: usize,
    /// Updates generated so far.
    pub updates: u64,
    /// The largest `timeout` (seconds) a poll asked for, before the server's cap.
    pub max_timeout_asked: u64,
    /// `allowed_updates` as the last poll that carried it sent it.
    pub last_allowed_updates: Option<Vec<String>>,
    /// `deleteWebhook` calls.
    pub webhook_deletes: u64,
}
