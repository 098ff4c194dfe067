//! A gateway session: the sequence counter and dispatch history that outlive any one
//! connection, which is what makes resume (and loss accounting across reconnects) testable.

use std::collections::VecDeque;

use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// Enough history for a long soak to resume after a multi-second outage at high rates, small
/// enough that a thousand sessions cannot exhaust memory by accident.
pub(super) const BUFFER_LIMIT: usize = 200_000;

/// The connection currently delivering this session's dispatches.
pub(super) struct Attachment {
    pub(crate) conn_id: u64,
    pub(crate) tx: mpsc::UnboundedSender<Utf8Bytes>,
}

pub(super) struct Session {
    last_seq: u64,
    /// Dispatches by seq, ascending. READY and RESUMED take seqs too but are not kept: a
    /// resume replays events, not handshakes.
    buffer: VecDeque<(u64, Utf8Bytes)>,
    pub(crate) attached: Option<Attachment>,
}

impl Session {
    pub(crate) fn new() -> Self {
        Session {
            last_seq: 0,
            buffer: VecDeque::new(),
            attached: None,
        }
    }

    pub(crate) fn new_id() -> String {
        format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    pub(crate) fn record(&mut self, seq: u64, frame: Utf8Bytes) {
        self.buffer.push_back((seq, frame));
        if self.buffer.len() > BUFFER_LIMIT {
            self.buffer.pop_front();
        }
    }

    /// Everything still buffered that the client has not acknowledged seeing, oldest first.
    pub(crate) fn missed_since(&self, seq: u64) -> Vec<Utf8Bytes> {
        let start = self.buffer.partition_point(|(s, _)| *s <= seq);
        self.buffer
            .range(start..)
            .map(|(_, frame)| frame.clone())
            .collect()
    }

    pub(crate) fn is_attached_to(&self, conn_id: u64) -> bool {
        self.attached.as_ref().is_some_and(|a| a.conn_id == conn_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_since_returns_only_later_dispatches_in_order() {
        let mut session = Session::new();
        let ready = session.next_seq();
        assert_eq!(ready, 1);
        for _ in 0..3 {
            let seq = session.next_seq();
            session.record(seq, Utf8Bytes::from(format!("frame-{seq}")));
        }
        let missed: Vec<String> = session
            .missed_since(2)
            .iter()
            .map(|f| f.as_str().to_owned())
            .collect();
        assert_eq!(missed, vec!["frame-3", "frame-4"]);
        assert_eq!(session.missed_since(0).len(), 3);
        assert!(session.missed_since(4).is_empty());
    }

    #[test]
    fn buffer_keeps_only_the_newest_dispatches() {
        let mut session = Session::new();
        for _ in 0..BUFFER_LIMIT + 5 {
            let seq = session.next_seq();
            session.record(seq, Utf8Bytes::from_static("x"));
        }
        assert_eq!(session.missed_since(0).len(), BUFFER_LIMIT);
        assert_eq!(session.missed_since(6).len(), BUFFER_LIMIT - 1);
    }
}
