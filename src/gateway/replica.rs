//! Where a cluster's active keeps what its successor on another host needs to go on from
//! where it stopped: each adapter's resume state (session, seq, resume URL) and the keys of
//! the events it stored last, and the outbox's messages.
//!
//! The active's spool is on its own disk, which a standby cannot read. So once an event is
//! in the spool, and before the platform may hear that it arrived (the seq a heartbeat
//! reports, the offset of the next poll, an ack), its dedupe key and the adapter's
//! position are written to the replica too, as one write that only the current owner can
//! make (docs/cluster.md). A new active then resumes the old session where the platform
//! allows it (an op-code gateway replays what was missed), and drops what the old one stored
//! already.
//!
//! Likewise a message is accepted (202) only once the replica holds it, and each of its state
//! changes is written there before the local journal's is acted on: `sending` before the
//! request goes out, and only by the current owner, so a deposed active cannot send. A new
//! active takes the replica's messages into its own outbox and delivers what is left, by
//! each message's policy. One machine alone has no replica: its spool and journal are all of
//! it.
//!
//! This is the positions' side, which the spool and the adapters go through; the messages'
//! side is the outbox's own (`outbox::cluster::MessageReplica`). Both are seams the cluster
//! implements: the storage modules name no cluster, and this module names no storage.

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// What a resume needs, carried from one connection to the next (and, in a cluster, to the
/// next active): the session, and the cursor that says how far it has been stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResumeState {
    pub(crate) session_id: String,
    pub(crate) seq: u64,
    pub(crate) resume_url: Option<String>,
}

/// What the previous active left for one adapter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Inherited {
    /// The session to resume, when the adapter's platform has one.
    pub(crate) resume: Option<ResumeState>,
    /// The long poll's cursor, when the platform leaves it to the client (some keep the
    /// offset on the server instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cursor: Option<String>,
    /// The dedupe keys ([`crate::gateway::spool::dedupe_tag`]) of the events it stored last,
    /// oldest first.
    pub(crate) stored: Vec<String>,
}

/// Where an adapter stands, as a successor would go on from it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Position<'a> {
    /// An op-code session: its id, seq and resume URL.
    pub(crate) session: Option<&'a ResumeState>,
    /// A long poll's cursor that the client keeps.
    pub(crate) cursor: Option<&'a str>,
}

/// The replica of every adapter's position.
pub(crate) trait Replica: Send + Sync + std::fmt::Debug {
    /// What the previous active left for `adapter` (nothing, when it never stored anything).
    fn load<'a>(&'a self, adapter: &'a str) -> BoxFuture<'a, Result<Inherited, String>>;

    /// `adapter` has stored the events with dedupe keys `stored` in the spool, and stands
    /// `at`. An error means it must acknowledge nothing more: the replica could not be
    /// written, or another gateway owns the profile now.
    fn record<'a>(
        &'a self,
        adapter: &'a str,
        at: Position<'a>,
        stored: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>>;
}
