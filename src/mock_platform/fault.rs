//! The failure modes a test can switch on, a vocabulary shared by the listener, the
//! connections and the state they hold, so it lives below all of them.

use std::sync::{Mutex, PoisonError};
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

/// A failure of the message-send endpoints, set per platform with
/// [`MockPlatform::set_send_fault`](super::MockPlatform::set_send_fault). Counted faults act on
/// the next `n` posts that reach them and then clear themselves; `Down` clears itself when its
/// time is up. Faults that act "before processing" hit any authorised post; those that act
/// "after processing" hit only posts the platform accepted (new or deduplicated), because only
/// those have something to lose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendFault {
    /// `send-500`: answer 500 and record nothing.
    ServerError(u32),
    /// `send-429`: answer 429 in the platform's rate-limit shape and record nothing. Discord's
    /// answer carries `retry_after` (body and headers); QQ documents no wait, so its answer
    /// carries none and `retry_after` is ignored there.
    RateLimited { posts: u32, retry_after: Duration },
    /// `send-hang`: read the request, record nothing, never answer.
    Hang(u32),
    /// `send-reset-after-processing`: record the post, then reset the connection without an
    /// answer. The client cannot tell this from a post that never arrived; only an idempotent
    /// retry saves it from a duplicate.
    ResetAfterProcessing(u32),
    /// `send-hang-after-processing`: record the post, then never answer.
    HangAfterProcessing(u32),
    /// `send-down`: an outage; every post is answered 503 until this much time has passed.
    Down(Duration),
}

impl SendFault {
    /// The name tests and logs use for it.
    pub fn name(&self) -> &'static str {
        match self {
            SendFault::ServerError(_) => "send-500",
            SendFault::RateLimited { .. } => "send-429",
            SendFault::Hang(_) => "send-hang",
            SendFault::ResetAfterProcessing(_) => "send-reset-after-processing",
            SendFault::HangAfterProcessing(_) => "send-hang-after-processing",
            SendFault::Down(_) => "send-down",
        }
    }

    /// Whether the fault strikes after the post is processed and recorded.
    pub(crate) fn after_processing(&self) -> bool {
        matches!(
            self,
            SendFault::ResetAfterProcessing(_) | SendFault::HangAfterProcessing(_)
        )
    }
}

/// The armed [`Fault`]. The op-code gateway arms it (and acts on the one-shot faults as it
/// does); the listener reads it too, because `Refuse` and `NoUpgrade` act on every socket
/// before anyone knows which platform it is for.
#[derive(Default)]
pub(super) struct FaultSwitch(Mutex<Fault>);

impl FaultSwitch {
    pub(crate) fn get(&self) -> Fault {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set(&self, fault: Fault) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = fault;
    }
}
