//! Inbound events go into the spool before the platform hears that they arrived. Every
//! transport acknowledges through a cursor (the gateway seq a heartbeat reports, the update
//! offset a long poll commits), and the cursor here moves only after the append (and, in a
//! cluster, after the replica has it too: `gateway/replica.rs`).

use serde_json::Value;

use crate::gateway::replica::Position;
pub(crate) use crate::gateway::replica::ResumeState;
use crate::gateway::spool::{Event, Spool};

/// Where a session stands, for the replica.
fn position(session: Option<&ResumeState>) -> Position<'_> {
    Position {
        session,
        cursor: None,
    }
}

/// The spool as one connection sees it, with the resume state whose cursor acknowledges what
/// was stored.
pub(crate) struct Inbox<'a> {
    adapter: &'a str,
    spool: &'a Spool,
    resume: Option<ResumeState>,
    /// Events stored over this connection.
    stored: u64,
}

impl<'a> Inbox<'a> {
    pub(crate) fn new(adapter: &'a str, spool: &'a Spool, resume: Option<ResumeState>) -> Self {
        Self {
            adapter,
            spool,
            resume,
            stored: 0,
        }
    }

    pub(crate) fn resume(&self) -> Option<&ResumeState> {
        self.resume.as_ref()
    }

    /// A new session (READY): what the next connection resumes.
    pub(crate) fn begin(&mut self, resume: ResumeState) {
        self.resume = Some(resume);
    }

    /// Move the cursor on to `seq`, never back.
    pub(crate) fn advance(&mut self, seq: Option<u64>) {
        if let (Some(seq), Some(r)) = (seq, self.resume.as_mut()) {
            r.seq = r.seq.max(seq);
        }
    }

    /// The event to store. One without an id of its own is named by session and seq, which
    /// is what a replay after a resume repeats.
    pub(crate) fn event(
        &self,
        id: Option<String>,
        kind: String,
        seq: Option<u64>,
        data: Value,
    ) -> Event {
        let id = id.unwrap_or_else(|| {
            let session = self.resume.as_ref().map_or("", |r| r.session_id.as_str());
            match seq {
                Some(s) => format!("{}:{session}:{s}", self.adapter),
                None => format!("{}:{}", self.adapter, fastrand::u64(..)),
            }
        });
        Event::new(id, self.adapter, kind, seq, data)
    }

    /// Spool first, then the replica, then advance the cursor: an event is acknowledged (by
    /// the seq we report) only once it is stored, so a crash in between means a replay, never
    /// a loss. The error is the spool's or the replica's, and nothing more may be
    /// acknowledged after it.
    pub(crate) async fn append(&mut self, event: &Event) -> Result<(), String> {
        self.spool.append(event).await.map_err(|e| e.to_string())?;
        let mut at = self.resume.clone();
        if let (Some(seq), Some(r)) = (event.seq, at.as_mut()) {
            r.seq = r.seq.max(seq);
        }
        self.spool
            .replicate(
                self.adapter,
                position(at.as_ref()),
                std::slice::from_ref(event),
            )
            .await?;
        self.stored += 1;
        self.resume = at;
        Ok(())
    }

    /// The session is ready (READY or RESUMED): in a cluster, record where it stands, so that
    /// a successor resumes it even if nothing arrives before this host goes.
    pub(crate) async fn settle(&self) -> Result<(), String> {
        self.spool
            .replicate(self.adapter, position(self.resume.as_ref()), &[])
            .await
    }

    /// The resume state for the next connection, and how many events this one stored.
    pub(crate) fn finish(self) -> (Option<ResumeState>, u64) {
        (self.resume, self.stored)
    }
}
