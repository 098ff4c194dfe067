//! What the platform can hand a live connection: the commands a fault sends it and the server
//! frames it writes, each tagged with what it counts as. The shared state sends these and the
//! connection task obeys them, so they live below both.

use tokio_tungstenite::tungstenite::Utf8Bytes;

use super::frames;

/// What a fault can ask of a live connection.
pub(super) enum Command {
    Send(Outgoing),
    Close(u16),
    /// Go quiet in both directions but keep the socket open.
    Silence,
    /// Stop reading client frames (so no ACK, no Pong) but keep writing.
    StopReading,
}

/// A server frame and what it counts as in the stats.
pub(super) struct Outgoing {
    pub(crate) frame: Utf8Bytes,
    pub(crate) kind: Kind,
}

#[derive(Clone, Copy)]
pub(super) enum Kind {
    Dispatch,
    Ack,
    Control,
}

impl Outgoing {
    pub(crate) fn dispatch(frame: Utf8Bytes) -> Outgoing {
        Outgoing {
            frame,
            kind: Kind::Dispatch,
        }
    }

    pub(crate) fn control(frame: Utf8Bytes) -> Outgoing {
        Outgoing {
            frame,
            kind: Kind::Control,
        }
    }

    pub(crate) fn ack() -> Outgoing {
        Outgoing {
            frame: frames::heartbeat_ack(),
            kind: Kind::Ack,
        }
    }
}
