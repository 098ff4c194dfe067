//! The failure modes a test can switch on, a vocabulary shared by the listener, the
//! connections and the state they hold, so it lives below all of them.

use std::time::Duration;

/// A failure mode to inject. One-shot faults (`Close`, `Reconnect`, `InvalidSession`) act on the
/// connections open when they are set and then the fault returns to `None`; `Silent` and
/// `DropClientFrames` break the connections open when they are set and leave later connections
/// alone (so a client can recover by reconnecting); the rest persist until `clear_fault`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// Stops reading and writing on every current connection but keeps TCP open, like a peer
    /// that vanished without a FIN.
    Silent,
    /// Heartbeats go unanswered; everything else is normal.
    NoAck,
    /// Each heartbeat ACK is held back by this much.
    SlowAck(Duration),
    /// Current connections stop reading (so no ACK and no Pong) but keep writing dispatches.
    DropClientFrames,
    /// Closes every current connection with this close code.
    Close(u16),
    /// New TCP connections, HTTP included, are accepted and dropped at once.
    Refuse,
    /// A WebSocket upgrade request is answered with a plain 200 and closed.
    NoUpgrade,
    /// New WebSocket connections upgrade but never get Hello.
    NoHello,
    /// Every server frame is held back by this much.
    Slow(Duration),
    /// Sends op 7 (reconnect) on every current connection.
    Reconnect,
    /// Sends op 9 with this `d` on every current connection; `false` also drops the session.
    InvalidSession(bool),
    /// Every Identify is answered with op 9 (`d` false) and creates no session.
    RejectIdentify,
    /// Every Resume is accepted (replay and RESUMED), then the connection is closed at once
    /// with this code: a session the platform keeps taking back and dropping.
    CloseAfterResume(u16),
    /// A resume replays what was missed one frame per this long: a long replay that keeps
    /// making progress.
    SlowReplay(Duration),
}
