//! What the mock homeserver counts for a test to read. Sends are also in the shared post
//! record ([`MockPlatform::posts`](crate::mock_platform::MockPlatform::posts)).

use std::time::Instant;

/// Counters of the client-server API. Every `/sync` ends up in exactly one of
/// `syncs_answered`, `refused` and `hung`, or is still counted in `live_syncs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatrixStats {
    /// `/sync` requests, whatever their token and whatever became of them.
    pub syncs: u64,
    /// Syncs answered 200 with a whole body (a repeated batch included).
    pub syncs_answered: u64,
    /// Syncs read and never answered (`HangSyncs`).
    pub hung: u64,
    /// Syncs answered anything else: a fault's error or half body, a missing, wrong or
    /// revoked token, a bad `since`, `filter` or parameter.
    pub refused: u64,
    /// Limited timelines answered (one per room and sync).
    pub limited: u64,
    /// `/rooms/{roomId}/messages` requests.
    pub messages_requests: u64,
    /// `/account/whoami` requests.
    pub whoami: u64,
    /// `PUT …/send/…` requests, whatever became of them.
    pub sends: u64,
    /// Sends answered with an earlier event's id: a transaction id the device already used
    /// on that path.
    pub txn_hits: u64,
    /// `POST /_matrix/media/v3/upload` requests, whatever became of them, and those that
    /// stored content: every one is new content, so a repeat is an orphan copy.
    pub uploads: u64,
    pub uploaded: u64,
    /// Syncs being held right now.
    pub live_syncs: u64,
    /// When each `/sync` arrived, in order: what a test reads to count requests per second.
    pub sync_times: Vec<Instant>,
}
