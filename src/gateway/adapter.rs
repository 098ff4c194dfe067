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
pub(crate) mod close_code;
pub(crate) mod connect;
pub(crate) mod dialect;
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
pub(crate) mod token_cache;

pub use shared::Shared;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::Timing;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::Spool;
use backoff::Backoff;
use close_code::CloseAction;
use dialect::Dialect;
use inbox::ResumeState;
use outcome::SessionEnd;
use session::Session;
use setup::{Connector, PlatformError};

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

/// The deadline of a component that is backing off: it must come back and try within this.
pub fn retry_deadline(timing: &Timing, backoff_max: Duration) -> Duration {
    backoff_max + timing.connect_timeout + timing.hello_timeout + Duration::from_secs(5)
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
    mut platform: C,
    mut deps: Deps,
) -> AdapterExit {
    let hb = deps.heartbeat.clone();
    let identify = deps.shared.identify.queue(&platform.identify_key());
    let mut backoff = Backoff::new(timing.backoff_min, timing.backoff_max);
    let mut resume: Option<ResumeState> = None;
    let mut delay: Option<Duration> = None;
    let mut short_resumes = 0;
    let mut stale_tokens = 0;
    let retry_deadline = retry_deadline(timing, backoff.max().max(Duration::from_secs(60)));
    let outlet = platform.outlet();
    loop {
        if let Some(d) = delay.take() {
            hb.enter(State::Retrying);
            hb.set_deadline(retry_deadline);
            tracing::info!(adapter = %name, delay_ms = d.as_millis() as u64, "reconnecting after backoff");
            if wait(&hb, Instant::now() + d, &mut deps.shutdown).await {
                return AdapterExit::Shutdown;
            }
        }
        if *deps.shutdown.borrow() {
            return AdapterExit::Shutdown;
        }
        hb.set_deadline(retry_deadline);
        // Boxed: token and gateway-URL requests live only while they run.
        let prepared =
            match Box::pin(platform.prepare(resume.as_ref().and_then(|r| r.resume_url.as_deref())))
                .await
            {
                Ok(p) => p,
                Err(PlatformError::Fatal(e)) => return fatal(&hb, name, e),
                Err(PlatformError::Retry(e) | PlatformError::Unreachable(e)) => {
                    hb.error(&e);
                    tracing::warn!(adapter = %name, error = %e, "setup failed");
                    delay = Some(backoff.next_delay(fastrand::f64));
                    continue;
                }
            };
        if let Some(limit) = prepared.limit {
            identify.update(limit);
        }
        // A long wait for the session start limit (a spent daily budget) is waited out here,
        // holding no connection; the slot itself is booked when Identify is about to go out.
        if let (None, Dialect::Gateway(gateway)) = (&resume, &prepared.dialect) {
            let at = identify.earliest(gateway.shard.map_or(0, |s| s[0]));
            if at > Instant::now() + IDENTIFY_WAIT_CONNECTED {
                hb.enter(State::Retrying);
                let secs = at.saturating_duration_since(Instant::now()).as_secs_f64();
                hb.error(format!(
                    "waiting {secs:.0}s for the platform's session start limit"
                ));
                tracing::info!(adapter = %name, wait_s = secs, "identify queued by the session start limit");
                if wait(&hb, at, &mut deps.shutdown).await {
                    return AdapterExit::Shutdown;
                }
            }
        }
        let session = Session {
            adapter: name,
            url: &prepared.url,
            authorization: prepared.authorization.as_deref(),
            dialect: &prepared.dialect,
            timing,
            heartbeat: &hb,
            spool: &deps.spool,
            proxies: &deps.shared.proxies,
            identify: &identify,
            outlet: outlet.as_deref(),
        };
        let resuming = resume.is_some();
        let outage = hb.outage_since();
        let outcome = session.run(resume.take(), &mut deps.shutdown).await;
        resume = outcome.resume;
        if outcome
            .connected_for
            .is_some_and(|c| c >= timing.stable_after)
        {
            backoff.reset();
        }
        let was_connected = outcome.connected_for.is_some();
        // A connection that lived a while may come back at once; one that the server dropped
        // right after READY (or never got there) gets backoff, not a tight loop, and did not
        // end the outage it interrupted.
        let lived = outcome
            .connected_for
            .is_some_and(|c| c >= timing.backoff_min);
        // A connection that stored dispatches did its job, however short it was: a resume
        // that replays a long backlog and then dies still moved the session on, and dropping
        // that session would lose what it had yet to replay.
        let progressed = outcome.stored > 0;
        if lived || progressed {
            short_resumes = 0;
        } else {
            hb.continue_outage(outage);
            if resuming {
                short_resumes += 1;
            }
        }
        if lived {
            stale_tokens = 0;
        }
        if short_resumes >= MAX_SHORT_RESUMES && resume.is_some() {
            tracing::warn!(adapter = %name, short_resumes, "resumes keep failing; identifying afresh");
            resume = None;
            short_resumes = 0;
        }
        if was_connected && outcome.end != SessionEnd::Shutdown {
            hb.reconnected();
        }
        match outcome.end {
            SessionEnd::Shutdown => return AdapterExit::Shutdown,
            SessionEnd::Zombie(z) => {
                // Drop and resume at once: the server still has the session.
                hb.error(z);
                tracing::warn!(adapter = %name, reason = %z, "connection is dead; resuming");
                if !lived {
                    delay = Some(backoff.next_delay(fastrand::f64));
                }
            }
            SessionEnd::Reconnect => {
                tracing::info!(adapter = %name, "server asked to reconnect (op 7); resuming");
                if !lived {
                    delay = Some(backoff.next_delay(fastrand::f64));
                }
            }
            SessionEnd::InvalidSession { resumable } => {
                if !resumable {
                    resume = None;
                }
                hb.error(format!("invalid session (op 9, resumable: {resumable})"));
                tracing::info!(adapter = %name, resumable, "invalid session (op 9)");
                // The dialect asks for a short random wait before identifying again; a
                // platform that answers every Identify with op 9 gets the growing backoff, so
                // that it is not asked twice a second for ever (each Identify spends the daily
                // budget).
                delay = if lived {
                    Some(timing.backoff_min.mul_f64(fastrand::f64()))
                } else {
                    Some(backoff.next_delay(fastrand::f64))
                };
            }
            SessionEnd::Closed(code) => {
                // A plain WebSocket server's own codes mean nothing to us: it is reconnected.
                let (action, meaning) = platform.close(code);
                let code_text = code.map_or("none".into(), |c| c.to_string());
                hb.error(format!("closed with code {code_text} ({meaning})"));
                tracing::info!(adapter = %name, code = %code_text, ?action, meaning, "connection closed");
                match action {
                    // A server closing everyone at once (a deploy) must not get everyone back
                    // in the same millisecond: a short jitter spreads the herd.
                    CloseAction::Resume if lived => {
                        delay = Some(timing.backoff_min.mul_f64(fastrand::f64()));
                    }
                    CloseAction::Resume => delay = Some(backoff.next_delay(fastrand::f64)),
                    CloseAction::Reidentify => {
                        resume = None;
                        if !lived {
                            delay = Some(backoff.next_delay(fastrand::f64));
                        }
                    }
                    CloseAction::RefreshToken => {
                        platform.drop_token();
                        stale_tokens += 1;
                        if stale_tokens > IMMEDIATE_TOKEN_REFRESHES {
                            delay = Some(backoff.next_delay(fastrand::f64));
                        }
                    }
                    CloseAction::PushBack(at_least) => {
                        backoff.push_back(at_least);
                        delay = Some(backoff.next_delay(fastrand::f64));
                    }
                    CloseAction::Fatal => {
                        let hint = platform.fatal_hint(code);
                        return fatal(
                            &hb,
                            name,
                            format!("closed with code {code_text}: {meaning}{hint}"),
                        );
                    }
                }
            }
            SessionEnd::Failed(e) | SessionEnd::Spool(e) => {
                hb.error(&e);
                tracing::warn!(adapter = %name, error = %e, "connection attempt failed");
                platform.invalidate();
                // A resume URL that could not be reached is not tried again; the session
                // may still resume through the normal gateway URL.
                if let Some(r) = resume.as_mut() {
                    r.resume_url = None;
                }
                delay = Some(backoff.next_delay(fastrand::f64));
            }
        }
    }
}

/// Sleep until `until`, beating on the way: waiting out a schedule (a backoff, the platform's
/// session start limit) is progress, however long the platform asks for. True on shutdown.
pub(crate) async fn wait(
    hb: &Heartbeat,
    until: Instant,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    const STEP: Duration = Duration::from_secs(5);
    loop {
        let now = Instant::now();
        if now >= until {
            return false;
        }
        hb.beat();
        tokio::select! {
            _ = tokio::time::sleep_until(until.min(now + STEP)) => {}
            _ = crate::gateway::until_shutdown(shutdown) => return true,
        }
    }
}

pub(crate) fn fatal(hb: &Heartbeat, name: &str, reason: String) -> AdapterExit {
    hb.enter(State::Fatal);
    hb.error(&reason);
    tracing::error!(adapter = %name, %reason, "fatal; not retrying");
    AdapterExit::Fatal(reason)
}
