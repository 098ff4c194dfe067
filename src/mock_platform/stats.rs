//! What the mock counts: the snapshot a test reads ([`MockStats`]) and the lock-free counters
//! the hot paths bump to produce it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters a test reads to assert what the client did. Connection counts are WebSocket
/// connections only (HTTP requests have their own counter); `live_connections` is a gauge.
/// Client frames are counted when received (valid or not), server frames when written, so
/// `dispatches_sent` includes replays and `events_generated` does not.
#[derive(Clone, Debug, Default)]
pub struct MockStats {
    pub connections: u64,
    pub live_connections: u64,
    pub identifies: u64,
    pub resumes: u64,
    pub heartbeats: u64,
    pub acks: u64,
    pub dispatches_sent: u64,
    pub events_generated: u64,
    pub http_requests: u64,
    /// The `seq` of the last successful resume, to check what a client claimed to have seen.
    pub last_resume_seq: Option<u64>,
    /// When each Identify arrived, in order.
    pub identify_times: Vec<std::time::Instant>,
    /// When each successful Resume arrived, in order.
    pub resume_times: Vec<std::time::Instant>,
    /// Connections closed with 4004 because their token was wrong or stale.
    pub token_rejections: u64,
    /// When each WebSocket connection was accepted, in order.
    pub connection_times: Vec<std::time::Instant>,
    /// WebSocket-level pings received from clients.
    pub ws_pings: u64,
    /// Each WebSocket connection's life, in the order they were accepted: what a test reads
    /// to check that two clients never acted at once.
    pub spans: Vec<ConnectionSpan>,
}

/// One connection: when it was accepted, when the client sent its first and its last frame
/// (a session acts on the platform only by sending), and when it closed.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionSpan {
    pub conn: u64,
    pub opened: std::time::Instant,
    pub first_frame: Option<std::time::Instant>,
    pub last_frame: Option<std::time::Instant>,
    pub closed: Option<std::time::Instant>,
}

impl ConnectionSpan {
    /// Did the clients of `self` and `other` both send frames within one stretch of time?
    pub fn acted_together(&self, other: &ConnectionSpan) -> bool {
        match (
            self.first_frame,
            self.last_frame,
            other.first_frame,
            other.last_frame,
        ) {
            (Some(a0), Some(a1), Some(b0), Some(b1)) => a0 <= b1 && b0 <= a1,
            _ => false,
        }
    }
}

/// Monotonic counters kept outside the state mutex because the hot paths (acks, dispatch
/// writes) only ever bump them.
#[derive(Default)]
pub(super) struct Counters {
    pub(crate) connections: AtomicU64,
    pub(crate) live_connections: AtomicU64,
    pub(crate) identifies: AtomicU64,
    pub(crate) resumes: AtomicU64,
    pub(crate) heartbeats: AtomicU64,
    pub(crate) acks: AtomicU64,
    pub(crate) dispatches_sent: AtomicU64,
    pub(crate) http_requests: AtomicU64,
    pub(crate) token_rejections: AtomicU64,
    pub(crate) ws_pings: AtomicU64,
    pub(crate) next_conn_id: AtomicU64,
    pub(crate) next_token: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
