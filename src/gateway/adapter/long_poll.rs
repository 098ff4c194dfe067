//! An adapter that receives by HTTP long polling, kept going for the life of the gateway.
//!
//! Long polling fails in its own ways, and each has its answer here:
//! - A poll that hangs on a dead socket: every poll has a client deadline, the time the
//!   server may hold it plus a grace, and one unanswered by then is a dead connection,
//!   dropped and tried again. Each answered poll is proof of life.
//! - A cursor moved before the event was stored: the events of a batch go into the spool
//!   first, and only then does the platform's poller move its cursor (an offset, or a
//!   persisted buffer). A crash in between means the platform sends
//!   them again, and the spool drops what it already holds.
//! - Two pollers on one token: the platform answers one of them with a conflict. Right after
//!   a restart that can be the previous process's last poll, so a conflict is retried until
//!   a poll's whole deadline has passed; one that lasts longer is another instance, and the
//!   adapter ends (exit 78) rather than fight it.
//! - A login the platform ended: the adapter says so (`needs-login`) and waits, beating, for
//!   a new one, instead of sleeping in silence while it looks healthy.
//!
//! The platforms' requests and answers are theirs ([`Poll`], in their wings); this is the
//! loop, the deadline and the order of spool and cursor.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::supervise::{supervise, wait, Ended, Link, Pace, Step, Transport};
use super::{AdapterExit, Deps};
use crate::config::Timing;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::replica::{Inherited, Position};
use crate::gateway::spool::Event;

/// How one poll ended, as the loop acts on it.
pub(crate) enum Polled {
    /// The server answered: the events to store, in order. The poller holds the cursor that
    /// acknowledges them until [`Poll::commit`].
    Batch(Vec<Event>),
    /// Part of a batch, to store now, before the poller fetches the rest (a gap paged in
    /// after the answer): what a batch holds in memory is then one part, not the whole. Not
    /// acknowledged: the next [`Poll::poll`] goes on with the same batch, and only the
    /// [`Polled::Batch`] that ends it is followed by [`Poll::commit`].
    Part(Vec<Event>),
    /// Asked to wait (a 429's `retry_after`, a frequency limit), read by
    /// `platform_number::platform_wait`. A floor under the growing backoff, not an exact
    /// delay: a server that keeps refusing with short waits is asked ever less often.
    Wait(Duration, String),
    /// No usable answer (a 5xx, a refused connection, a garbled body): back off and retry.
    Failed(String),
    /// No answer by the poll's deadline: the connection is dead.
    Dead(String),
    /// Another poller holds the token (a 409).
    Conflict(String),
    /// The platform ended the login (an expired session).
    NeedsLogin(String),
    /// Retrying cannot help (a revoked token).
    Fatal(String),
}

/// The platform side of a long-poll adapter: its requests, its cursor, its answers.
pub(crate) trait Poll: Send {
    /// One poll, within [`Poll::deadline`].
    fn poll(&mut self) -> impl Future<Output = Polled> + Send;

    /// The last batch is in the spool: acknowledge it.
    fn commit(&mut self) -> Result<(), String>;

    /// The cursor [`Poll::commit`] will keep, for a cluster's replica; none where the
    /// platform keeps it (an offset confirmed on the server).
    fn next_cursor(&self) -> Option<&str> {
        None
    }

    /// Poll from `cursor`, which a cluster's previous active kept, rather than from this
    /// host's own.
    fn inherit_cursor(&mut self, _cursor: String) {}

    /// What was polled last did not all reach the spool: anything the poller goes on from
    /// (the rest of a batch after a [`Polled::Part`]) is dropped, and the next poll starts
    /// again from the cursor kept.
    fn abandon(&mut self) {}

    /// Why the last batch made no progress (updates that cannot be confirmed), if so.
    fn stalled(&mut self) -> Option<String> {
        None
    }

    /// The client deadline of the next poll.
    fn deadline(&self) -> Duration;

    /// The deadline of a full long poll, however short the next one is: how long the
    /// previous process's last poll may still be held.
    fn longest_poll(&self) -> Duration {
        self.deadline()
    }

    /// What to add to a conflict's fatal error (whether a webhook is set, say).
    fn conflict_hint(&mut self) -> impl Future<Output = String> + Send {
        async { String::new() }
    }

    /// Wait for a new login, beating; true on shutdown. A platform with no login to renew
    /// never says [`Polled::NeedsLogin`].
    fn await_login(
        &mut self,
        _heartbeat: &Heartbeat,
        _shutdown: &mut watch::Receiver<bool>,
    ) -> impl Future<Output = bool> + Send {
        async { false }
    }
}

/// Run a long-poll adapter named `name` until shutdown or a fatal answer.
pub(crate) async fn run<P: Poll>(
    name: &str,
    timing: &Timing,
    poller: P,
    deps: Deps,
) -> AdapterExit {
    deps.heartbeat.enter(State::Connecting);
    let transport = Polling {
        poller,
        conflict_since: None,
    };
    supervise(name, timing, transport, deps).await
}

/// The long-poll transport: a "connection" is a run of answered polls, from the first answer
/// to the first poll that failed.
struct Polling<P> {
    poller: P,
    /// When the conflicts in a row began.
    conflict_since: Option<Instant>,
}

impl<P: Poll> Transport for Polling<P> {
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        // When the first poll of this run was answered.
        let mut answered: Option<Instant> = None;
        let step = loop {
            if *link.deps.shutdown.borrow() {
                break Step::Shutdown;
            }
            // A poll takes the platform's updates, and its offset confirms the last batch: a
            // deposed cluster member must do neither (docs/cluster.md).
            if !link.deps.shared.fence.holds() {
                break failed(name, "fenced: the cluster's lease may be gone".into());
            }
            let deadline = self.poller.deadline();
            // A poll may take its whole deadline and a backoff may follow it; silent for
            // longer than both, the adapter itself is stuck and the watchdog should see it.
            hb.set_deadline(deadline + link.backoff.max() + Duration::from_secs(5));
            let polled = tokio::select! {
                p = self.poller.poll() => p,
                _ = crate::gateway::until_shutdown(&mut link.deps.shutdown) => break Step::Shutdown,
            };
            let (events, whole) = match polled {
                Polled::Batch(events) => (events, true),
                Polled::Part(events) => (events, false),
                Polled::Wait(d, why) => {
                    tracing::warn!(adapter = %name, wait_ms = d.as_millis() as u64, reason = %why, "the platform asked to wait");
                    break Step::again(why, Pace::AtLeast(d));
                }
                Polled::Failed(why) | Polled::Dead(why) => break failed(name, why),
                Polled::Conflict(why) => break self.conflict(name, link.timing, why).await,
                Polled::NeedsLogin(why) => break Step::NeedsLogin(why),
                Polled::Fatal(why) => break Step::Fatal(why),
            };
            if answered.is_none() {
                hb.enter(State::Connected);
                answered = Some(Instant::now());
            } else {
                hb.beat();
            }
            self.conflict_since = None;
            // A batch that cannot all be confirmed comes back at once: wait, growing the
            // wait (and so the rate of its warning) as a failure would.
            let stalled = if whole { self.poller.stalled() } else { None };
            if stalled.is_none() {
                link.backoff.reset();
            }
            // A part goes to the replica with the cursor kept so far, which its batch has
            // not moved yet.
            if let Err(e) = store(name, link.deps, &events, self.poller.next_cursor()).await {
                self.poller.abandon();
                break failed(name, e);
            }
            if !whole {
                continue;
            }
            if let Err(e) = self.poller.commit() {
                break failed(name, e);
            }
            if let Some(why) = stalled {
                hb.error(&why);
                tracing::warn!(adapter = %name, reason = %why, "the poll made no progress; waiting before the next");
                let d = link.backoff.next_delay(fastrand::f64);
                if wait(&hb, Instant::now() + d, &mut link.deps.shutdown).await {
                    break Step::Shutdown;
                }
            }
        };
        Ended {
            step,
            connected_for: answered.map(|t| t.elapsed()),
            progressed: answered.is_some(),
        }
    }

    async fn await_login(&mut self, hb: &Heartbeat, shutdown: &mut watch::Receiver<bool>) -> bool {
        self.poller.await_login(hb, shutdown).await
    }

    fn inherit(&mut self, inherited: Inherited) {
        if let Some(cursor) = inherited.cursor {
            self.poller.inherit_cursor(cursor);
        }
    }
}

impl<P: Poll> Polling<P> {
    /// Another poller answered. The previous process's last poll lasts at most one full
    /// deadline; a conflict that outlives it is another poller, and the adapter ends.
    async fn conflict(&mut self, name: &str, timing: &Timing, why: String) -> Step {
        let since = *self.conflict_since.get_or_insert_with(Instant::now);
        if since.elapsed() > self.poller.longest_poll() {
            let hint = self.poller.conflict_hint().await;
            let held = since.elapsed().as_secs();
            return Step::Fatal(format!(
                "{why}: another poller has held the bot token for {held}s, longer than a poll \
                 lasts, so it is not this gateway's previous run{hint}"
            ));
        }
        tracing::warn!(adapter = %name, reason = %why, "another poller answered; retrying within the grace");
        Step::again(why, Pace::Wait(timing.backoff_min))
    }
}

/// A failed poll (or store): back off.
fn failed(name: &str, why: String) -> Step {
    tracing::warn!(adapter = %name, reason = %why, "poll failed; retrying after backoff");
    Step::again(why, Pace::Backoff)
}

/// Spool every event of a batch, in order, then tell the replica (in a cluster) of them and of
/// the `cursor` that will acknowledge them. The first failure stops the batch: nothing after
/// it may be acknowledged.
async fn store(
    name: &str,
    deps: &Deps,
    events: &[Event],
    cursor: Option<&str>,
) -> Result<(), String> {
    for event in events {
        crate::test_hook::kill_at("poll-received", &event.id);
        deps.spool
            .append(event)
            .await
            .map_err(|e| format!("the spool refused an event: {e}"))?;
    }
    if events.is_empty() && cursor.is_none() {
        return Ok(());
    }
    let at = Position {
        session: None,
        cursor,
    };
    deps.spool.replicate(name, at, events).await
}

/// One poll request's answer, or why none came: the transport part both platforms share.
pub(crate) enum Exchange {
    Answer {
        status: u16,
        /// Where a platform says how long to wait (`Retry-After`) when its body does not.
        headers: reqwest::header::HeaderMap,
        body: Vec<u8>,
    },
    /// No answer within the deadline.
    Dead(String),
    /// No connection, or the connection broke.
    Failed(String),
}

/// A poll answer larger than this is not read: a batch of 100 updates with long
/// texts is well under a megabyte.
const MAX_POLL_BODY: usize = 8 * 1024 * 1024;

/// Send `request` and read its whole answer within `deadline`, measured from now: the
/// deadline covers the connect, the server's wait and the body.
pub(crate) async fn exchange(request: reqwest::RequestBuilder, deadline: Duration) -> Exchange {
    let work = async {
        let mut resp = request.timeout(deadline).send().await.map_err(text)?;
        let status = resp.status().as_u16();
        let headers = std::mem::take(resp.headers_mut());
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(text)? {
            if body.len() + chunk.len() > MAX_POLL_BODY {
                return Err((false, format!("answer larger than {MAX_POLL_BODY} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, headers, body))
    };
    let secs = deadline.as_secs_f64();
    match tokio::time::timeout(deadline, work).await {
        Ok(Ok((status, headers, body))) => Exchange::Answer {
            status,
            headers,
            body,
        },
        Ok(Err((true, _))) | Err(_) => Exchange::Dead(format!(
            "no answer to a poll within {secs:.1}s (its timeout plus grace): a dead connection"
        )),
        Ok(Err((false, e))) => Exchange::Failed(e),
    }
}

/// A transport error without its URL (which may hold the bot token), and whether it was
/// a timeout.
fn text(e: reqwest::Error) -> (bool, String) {
    let timeout = e.is_timeout();
    (timeout, crate::error_chain::one_line(&e.without_url()))
}
