//! An adapter: one platform connection kept alive for the life of the gateway.
//!
//! Each platform's wing (`platform/<kind>/`) starts its adapter on one of the loops here,
//! giving it what only the platform knows. The WebSocket runner ([`run`]) owns everything
//! that outlives a single connection (resume state, backoff) and decides, from how each
//! connection ended, whether to resume at once, back off, identify afresh or give up; the
//! platform's [`setup::Connector`] fetches what a connection needs (an access token, the
//! gateway's URL) and says what a close code means. Health is published to the registry on
//! every transition, so supervision reads facts rather than guesses.
//!
//! What every transport shares sits beside the runner: proof of life (`liveness`), spool
//! before ack and the resume cursor (`inbox`), how a connection ended (`outcome`), `backoff`,
//! and the platform's session start limit (`identify_queue`). A transport is one connection,
//! from connect to end, that returns an `Outcome`: the WebSocket connection (`session`),
//! speaking the op-code dialect or plain JSON (`dialect`, `opcode`; a plain socket that can
//! send takes its sender's frames through its `outlet`). The HTTP long-poll platforms share
//! one loop, `long_poll`, over their [`long_poll::Poll`]: a deadline on every poll, spool
//! before cursor. A platform whose connection fits neither keeps its own loop in its wing,
//! built from the same pieces.

pub(crate) mod answer_batch;
pub(crate) mod backoff;
pub mod batch;
pub(crate) mod chain;
pub(crate) mod close_code;
pub(crate) mod connect;
pub(crate) mod cursor_file;
pub(crate) mod dialect;
pub(crate) mod frame_loop;
pub(crate) mod identify_queue;
pub(crate) mod inbox;
pub(crate) mod liveness;
pub(crate) mod long_poll;
pub(crate) mod opcode;
pub(crate) mod outcome;
pub(crate) mod outlet;
pub mod proxy;
pub(crate) mod session;
pub(crate) mod setup;
mod shared;
pub(crate) mod supervise;
pub(crate) mod token_cache;
pub mod whoami;

pub use shared::Shared;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::Timing;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::replica::Inherited;
use crate::gateway::spool::Spool;
use close_code::CloseAction;
use dialect::Dialect;
use identify_queue::IdentifyQueue;
use inbox::ResumeState;
use outcome::SessionEnd;
use outlet::Outlet;
use session::Session;
use setup::{Connector, PlatformError};
pub use supervise::retry_deadline;
use supervise::wait;
use supervise::{supervise, Ended, Link, Pace, Step, Transport};

/// How an adapter stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum AdapterExit {
    Shutdown,
    /// Retrying cannot help; the gateway exits 78 with this reason.
    Fatal(String),
    /// The component's task panicked, with this message: a bug, and a restart (exit 75).
    Crashed(String),
}

/// What the adapter shares with the rest of the gateway.
pub struct Deps {
    pub spool: Arc<Spool>,
    pub heartbeat: Heartbeat,
    pub shared: Shared,
    pub shutdown: watch::Receiver<bool>,
}

/// Resumes in a row that fail or die within `backoff-min` before the session is dropped and
/// the adapter identifies afresh: a session the platform keeps accepting and killing is dead.
const MAX_SHORT_RESUMES: u32 = 3;

/// Stale-token closes (QQ 4004) in a row answered with an immediate refresh; past this they
/// back off like any failure, so a platform that keeps rejecting fresh tokens is not hammered.
const IMMEDIATE_TOKEN_REFRESHES: u32 = 1;

/// A wait for an Identify slot up to this long happens on the open connection, heartbeating;
/// a longer one is waited out before connecting.
const IDENTIFY_WAIT_CONNECTED: Duration = Duration::from_secs(10);

/// Keep a WebSocket adapter named `name` connected, through its platform's `platform`,
/// until shutdown or a fatal error.
pub(crate) async fn run<C: Connector>(
    name: &str,
    timing: &Timing,
    platform: C,
    deps: Deps,
) -> AdapterExit {
    let transport = WebSocket {
        identify: deps.shared.identify.queue(&platform.identify_key()),
        outlet: platform.outlet(),
        platform,
        resume: None,
        short_resumes: 0,
        stale_tokens: 0,
    };
    supervise(name, timing, transport, deps).await
}

/// The WebSocket transport: a platform's connections, each prepared by its [`Connector`] and
/// resumed where the last left off.
struct WebSocket<C> {
    platform: C,
    identify: IdentifyQueue,
    outlet: Option<Arc<Outlet>>,
    resume: Option<ResumeState>,
    /// Resumes in a row that did not live ([`MAX_SHORT_RESUMES`]).
    short_resumes: u32,
    /// Stale-token closes in a row ([`IMMEDIATE_TOKEN_REFRESHES`]).
    stale_tokens: u32,
}

impl<C: Connector> Transport for WebSocket<C> {
    fn inherit(&mut self, inherited: Inherited) {
        if let Some(session) = inherited.resume {
            self.resume = Some(session);
        }
    }

    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let name = link.name;
        let hb = link.deps.heartbeat.clone();
        let resume_url = self.resume.as_ref().and_then(|r| r.resume_url.as_deref());
        // Boxed: token and gateway-URL requests live only while they run.
        let prepared = match Box::pin(self.platform.prepare(resume_url)).await {
            Ok(p) => p,
            Err(PlatformError::Fatal(e)) => return Ended::unconnected(Step::Fatal(e)),
            Err(PlatformError::Retry(e) | PlatformError::Unreachable(e)) => {
                tracing::warn!(adapter = %name, error = %e, "setup failed");
                return Ended::unconnected(Step::again(e, Pace::Backoff));
            }
        };
        if let Some(limit) = prepared.limit {
            self.identify.update(limit);
        }
        // A long wait for the session start limit (a spent daily budget) is waited out here,
        // holding no connection; the slot itself is booked when Identify is about to go out.
        if let (None, Dialect::Gateway(gateway)) = (&self.resume, &prepared.dialect) {
            let at = self.identify.earliest(gateway.shard.map_or(0, |s| s[0]));
            if at > Instant::now() + IDENTIFY_WAIT_CONNECTED {
                hb.enter(State::Retrying);
                let secs = at.saturating_duration_since(Instant::now()).as_secs_f64();
                hb.error(format!(
                    "waiting {secs:.0}s for the platform's session start limit"
                ));
                tracing::info!(adapter = %name, wait_s = secs, "identify queued by the session start limit");
                if wait(&hb, at, &mut link.deps.shutdown).await {
                    return Ended::unconnected(Step::Shutdown);
                }
            }
        }
        let session = Session {
            adapter: name,
            url: &prepared.url,
            authorization: prepared.authorization.as_deref(),
            dialect: &prepared.dialect,
            timing: link.timing,
            heartbeat: &hb,
            spool: &link.deps.spool,
            proxies: &link.deps.shared.proxies,
            fence: &link.deps.shared.fence,
            grid: &link.deps.shared.grid,
            identify: &self.identify,
            outlet: self.outlet.as_deref(),
            whoami: &link.deps.shared.whoami,
        };
        let resuming = self.resume.is_some();
        let outcome = session
            .run(self.resume.take(), &mut link.deps.shutdown)
            .await;
        self.resume = outcome.resume;
        let progressed = outcome.stored > 0;
        let lived = supervise::lived(outcome.connected_for, link.timing);
        if lived || progressed {
            self.short_resumes = 0;
        } else if resuming {
            self.short_resumes += 1;
        }
        if lived {
            self.stale_tokens = 0;
        }
        if self.short_resumes >= MAX_SHORT_RESUMES && self.resume.is_some() {
            tracing::warn!(adapter = %name, short_resumes = self.short_resumes, "resumes keep failing; identifying afresh");
            self.resume = None;
            self.short_resumes = 0;
        }
        Ended {
            step: self.next(name, link.timing, outcome.end),
            connected_for: outcome.connected_for,
            progressed,
        }
    }
}

impl<C: Connector> WebSocket<C> {
    /// What a connection's end means for the next one.
    fn next(&mut self, name: &str, timing: &Timing, end: SessionEnd) -> Step {
        match end {
            SessionEnd::Shutdown => Step::Shutdown,
            SessionEnd::Zombie(z) => {
                // Drop and resume at once: the server still has the session.
                tracing::warn!(adapter = %name, reason = %z, "connection is dead; resuming");
                Step::again(z.to_string(), Pace::Resume)
            }
            SessionEnd::Reconnect => {
                tracing::info!(adapter = %name, "server asked to reconnect (op 7); resuming");
                Step::Again {
                    error: None,
                    pace: Pace::Resume,
                }
            }
            SessionEnd::InvalidSession { resumable } => {
                if !resumable {
                    self.resume = None;
                }
                tracing::info!(adapter = %name, resumable, "invalid session (op 9)");
                // The dialect asks for a short random wait before identifying again; a
                // platform that answers every Identify with op 9 gets the growing backoff, so
                // that it is not asked twice a second for ever (each Identify spends the daily
                // budget).
                let error = format!("invalid session (op 9, resumable: {resumable})");
                Step::again(error, Pace::Jitter(timing.backoff_min))
            }
            SessionEnd::Closed(code) => self.closed(name, timing, code),
            SessionEnd::Failed(e) | SessionEnd::Spool(e) => {
                tracing::warn!(adapter = %name, error = %e, "connection attempt failed");
                self.platform.invalidate();
                // A resume URL that could not be reached is not tried again; the session
                // may still resume through the normal gateway URL.
                if let Some(r) = self.resume.as_mut() {
                    r.resume_url = None;
                }
                Step::again(e, Pace::Backoff)
            }
        }
    }

    /// What the server closing with `code` means, by the platform's table.
    fn closed(&mut self, name: &str, timing: &Timing, code: Option<u16>) -> Step {
        let (action, meaning) = self.platform.close(code);
        let code_text = code.map_or("none".into(), |c| c.to_string());
        let error = format!("closed with code {code_text} ({meaning})");
        tracing::info!(adapter = %name, code = %code_text, ?action, meaning, "connection closed");
        let pace = match action {
            // A server closing everyone at once (a deploy) must not get everyone back in the
            // same millisecond: a short jitter spreads the herd.
            CloseAction::Resume => Pace::Jitter(timing.backoff_min),
            CloseAction::Reidentify => {
                self.resume = None;
                Pace::Resume
            }
            CloseAction::RefreshToken => {
                self.platform.drop_token();
                self.stale_tokens += 1;
                if self.stale_tokens > IMMEDIATE_TOKEN_REFRESHES {
                    Pace::Backoff
                } else {
                    Pace::Now
                }
            }
            CloseAction::PushBack(at_least) => Pace::AtLeast(at_least),
            CloseAction::Fatal => {
                let hint = self.platform.fatal_hint(code);
                return Step::Fatal(format!("closed with code {code_text}: {meaning}{hint}"));
            }
        };
        Step::again(error, pace)
    }
}
