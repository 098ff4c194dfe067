//! How one connection ended, as the runner (`adapter.rs`) reads it to decide what comes next:
//! the same for every transport, so that the runner's resume, backoff and outage rules serve
//! a WebSocket dialect and a long poll alike.

use std::time::Duration;

use super::inbox::ResumeState;
use super::liveness::Zombie;

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub(crate) enum SessionEnd {
    /// Could not connect, or the handshake did not complete (no Hello, no READY).
    Failed(String),
    Zombie(Zombie),
    Closed(Option<u16>),
    /// op 7: the server asks for a reconnect and resume.
    Reconnect,
    /// op 9: the session is invalid; `resumable` says whether a resume may still work.
    InvalidSession {
        resumable: bool,
    },
    /// The spool could not store a dispatch: stop reading so nothing is acknowledged.
    Spool(String),
    Shutdown,
}

/// The result of one connection: how it ended, the resume state for the next one, and how long
/// it was connected (to reset the backoff after a stable period).
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) end: SessionEnd,
    pub(crate) resume: Option<ResumeState>,
    pub(crate) connected_for: Option<Duration>,
    /// Dispatches stored in the spool over this connection.
    pub(crate) stored: u64,
}

impl Outcome {
    /// A connection that never got as far as a session: the resume state goes back as it was.
    #[must_use]
    pub(crate) fn failed(end: SessionEnd, resume: Option<ResumeState>) -> Self {
        Outcome {
            end,
            resume,
            connected_for: None,
            stored: 0,
        }
    }
}
