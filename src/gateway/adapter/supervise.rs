//! One loop for every transport: connect, see how the connection ended, decide what comes next.
//!
//! A [`Transport`] is one platform connection at a time, from its setup (a token, a URL, an
//! endpoint) to its end, whatever it speaks: an op-code WebSocket, a binary long connection, a
//! run of long polls. It keeps what is its own across connections (a resume state, the
//! server's settings, a cursor) and says how each ended as an [`Ended`]: a [`Step`], and with
//! it how long the connection was up and whether it did its job. [`supervise`] then applies
//! the rules every adapter shares, written once:
//!
//! - **Pacing.** The next attempt comes at once, after a jitter, after the growing backoff, or
//!   after a wait the platform asked for ([`Pace`]); a connection that did not live
//!   (`backoff-min`) never earns an immediate retry, so a server that accepts and drops at
//!   once is not hammered. The backoff starts over after a connection that lasted
//!   `stable-after`.
//! - **Outages.** A connection that neither lived nor did its job ends no outage: a platform
//!   that accepts every connection and closes it again still reaches `max-outage`.
//! - **Health.** Waiting is `retrying` (beating on the way, since waiting out a schedule is
//!   progress); a lost connection counts as a reconnect; a fatal end is `fatal`; a login the
//!   platform ended is `needs-login` until the transport sees a new one.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::backoff::Backoff;
use super::{AdapterExit, Deps};
use crate::config::Timing;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::replica::Inherited;

/// One platform connection at a time, for one adapter.
pub(crate) trait Transport: Send {
    /// Set up and run one connection until it ends.
    fn connect(&mut self, link: &mut Link<'_>) -> impl Future<Output = Ended> + Send;

    /// Wait, beating, until the platform's login is renewed; true on shutdown. Called only
    /// after [`Step::NeedsLogin`].
    fn await_login(
        &mut self,
        _heartbeat: &Heartbeat,
        _shutdown: &mut watch::Receiver<bool>,
    ) -> impl Future<Output = bool> + Send {
        async { false }
    }

    /// Go on from where a cluster's previous active left off (its session, its cursor)
    /// rather than start afresh; a transport with neither has nothing to take.
    fn inherit(&mut self, _inherited: Inherited) {}
}

/// What a transport works with during one connection.
pub(crate) struct Link<'a> {
    pub(crate) name: &'a str,
    pub(crate) timing: &'a Timing,
    pub(crate) deps: &'a mut Deps,
    /// The adapter's backoff: a transport that makes progress within a connection (a long
    /// poll's answered batch) may start it over, or wait it out between two polls.
    pub(crate) backoff: &'a mut Backoff,
}

/// How one connection ended.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) step: Step,
    /// How long it was connected (`None`: it never was).
    pub(crate) connected_for: Option<Duration>,
    /// It did its job, however short it was: it stored events, or answered a poll. A resume
    /// that replays a backlog and then dies still moved the session on.
    pub(crate) progressed: bool,
}

impl Ended {
    /// An end before any connection was made.
    pub(crate) fn unconnected(step: Step) -> Self {
        Self {
            step,
            connected_for: None,
            progressed: false,
        }
    }

    /// Whether the connection lived long enough to have been worth it ([`lived`]).
    pub(crate) fn lived(&self, timing: &Timing) -> bool {
        lived(self.connected_for, timing)
    }
}

/// Whether a connection up for `connected_for` lived long enough to have been worth it:
/// `backoff-min`. A transport asks before it decides its next step.
pub(crate) fn lived(connected_for: Option<Duration>, timing: &Timing) -> bool {
    connected_for.is_some_and(|c| c >= timing.backoff_min)
}

/// What comes next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Shutdown,
    /// Retrying cannot help: the gateway exits 78 with this reason.
    Fatal(String),
    /// The platform ended the bot's login: nothing but a new one helps.
    NeedsLogin(String),
    /// Connect again, at `pace`; `error` is what the adapter's health shows meanwhile
    /// (`None`: the server asked for it, and nothing went wrong).
    Again {
        error: Option<String>,
        pace: Pace,
    },
}

impl Step {
    pub(crate) fn again(error: impl Into<String>, pace: Pace) -> Self {
        Step::Again {
            error: Some(error.into()),
            pace,
        }
    }
}

/// When the next connection comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// At once after a connection that lived; after the backoff otherwise.
    Resume,
    /// A random part of this after a connection that lived (a server that closed everyone at
    /// once must not get everyone back in the same millisecond); the backoff otherwise.
    Jitter(Duration),
    /// After the backoff.
    Backoff,
    /// After the backoff, which is never again shorter than this (the server's own floor).
    AtLeast(Duration),
    /// After exactly this long (what the platform asked for).
    Wait(Duration),
    /// At once, whatever the connection did.
    Now,
}

/// Keep `transport` connected for adapter `name` until shutdown or a fatal end.
pub(crate) async fn supervise<T: Transport>(
    name: &str,
    timing: &Timing,
    mut transport: T,
    mut deps: Deps,
) -> AdapterExit {
    let hb = deps.heartbeat.clone();
    let mut backoff = Backoff::new(timing.backoff_min, timing.backoff_max);
    let retry_deadline = retry_deadline(timing, backoff.max().max(Duration::from_secs(60)));
    let mut delay: Option<Duration> = None;
    match deps.spool.inherit(name).await {
        Ok(Some(inherited)) => {
            if let Some(session) = &inherited.resume {
                tracing::info!(adapter = %name, seq = session.seq, "resuming the session the cluster's previous active left");
            }
            if inherited.cursor.is_some() {
                tracing::info!(adapter = %name, "polling from the cursor the cluster's previous active left");
            }
            transport.inherit(inherited);
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(adapter = %name, error = %e, "cannot read what the cluster's previous active left; starting afresh");
        }
    }
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
        let outage = hb.outage_since();
        let mut link = Link {
            name,
            timing,
            deps: &mut deps,
            backoff: &mut backoff,
        };
        let ended = transport.connect(&mut link).await;
        if ended
            .connected_for
            .is_some_and(|c| c >= timing.stable_after)
        {
            backoff.reset();
        }
        let lived = ended.lived(timing);
        if !lived && !ended.progressed {
            hb.continue_outage(outage);
        }
        if ended.connected_for.is_some() && ended.step != Step::Shutdown {
            hb.reconnected();
        }
        match ended.step {
            Step::Shutdown => return AdapterExit::Shutdown,
            Step::Fatal(reason) => return fatal(&hb, name, reason),
            Step::NeedsLogin(why) => {
                hb.enter(State::NeedsLogin);
                hb.error(&why);
                tracing::error!(adapter = %name, reason = %why, "the platform ended the login; waiting for a new one");
                if transport.await_login(&hb, &mut deps.shutdown).await {
                    return AdapterExit::Shutdown;
                }
                tracing::info!(adapter = %name, "a new login was stored; connecting again");
                hb.enter(State::Connecting);
            }
            Step::Again { error, pace } => {
                if let Some(e) = error {
                    hb.error(e);
                }
                delay = match pace {
                    Pace::Resume if lived => None,
                    Pace::Jitter(max) if lived => Some(max.mul_f64(fastrand::f64())),
                    Pace::Resume | Pace::Jitter(_) | Pace::Backoff => {
                        Some(backoff.next_delay(fastrand::f64))
                    }
                    Pace::AtLeast(floor) => {
                        backoff.push_back(floor);
                        Some(backoff.next_delay(fastrand::f64))
                    }
                    Pace::Wait(d) => Some(d),
                    Pace::Now => None,
                };
            }
        }
    }
}

/// The deadline of a component that is backing off: it must come back and try within this.
pub fn retry_deadline(timing: &Timing, backoff_max: Duration) -> Duration {
    backoff_max + timing.connect_timeout + timing.hello_timeout + Duration::from_secs(5)
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
