//! etcd's members, a client each, and which one to ask.
//!
//! etcd-client balances one channel over every endpoint, but a member whose connection fails
//! still looks ready to its balancer: a dead member keeps getting about a third of the
//! requests, and a keep-alive stream that lands on it dies with it
//! (docs/research/round-three.md, section 1). So each member has a client of its own here,
//! every request goes to one member, the current one, while it answers, and a failure of the
//! member (not of the request: see `failure.rs`) moves the request to the next member at
//! once. The failed member is passed over for a cooldown, so the next request does not try
//! it first either; when every member failed lately, they are tried again in the order
//! their cooldowns end, with a short pause between rounds, because a cluster in an election
//! refuses at once and must not be asked in a hot loop. A request that may be sent twice
//! also goes to the next member, as a copy, while its first has not answered: a member that
//! lost it with its leader gives no error, only silence.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use etcd_client::Client;

use super::failure::Failure;
use crate::gateway::fence::Fence;

/// Between two rounds over members that all failed lately: an election lasts a second or
/// more, and a member without a leader refuses in a millisecond.
const PAUSE: Duration = Duration::from_millis(200);

/// How long a request that may be sent twice waits for an answer before a copy goes to the
/// next member, and again between copies: etcd answers on a LAN in milliseconds, and a member
/// that has not answered in half a second is either gone or waiting for a leader that is.
const HEDGE: Duration = Duration::from_millis(500);

/// `tokio::time::sleep_until`, or never.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Which failures a request may be sent again after, to another member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Only when etcd never had it: a write that must not be applied twice (a lease grant,
    /// a campaign's take).
    Unsent,
    /// Also when etcd may have applied it: a read, or a write that does the same again (a
    /// put guarded by the term's compare, a revoke, a renewal).
    Idempotent,
}

/// How long a request may go on to other members.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Until<'a> {
    /// Each member once at most.
    OneRound,
    /// Until then.
    At(Instant),
    /// While the fence holds: a term's write is of no use once it has closed.
    Fence(&'a Fence),
}

impl Until<'_> {
    fn deadline(self) -> Option<Instant> {
        match self {
            Until::OneRound => None,
            Until::At(at) => Some(at),
            Until::Fence(fence) => fence.until(),
        }
    }

    fn goes_on(self, tried: usize, members: usize) -> bool {
        match self.deadline() {
            Some(at) => Instant::now() < at,
            None => tried < members,
        }
    }

    fn time_left(self) -> Option<Duration> {
        self.deadline()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

/// The cluster's members, shared by every task of the run.
#[derive(Clone)]
pub(crate) struct Etcd(Arc<Inner>);

struct Inner {
    /// How long a failed member is passed over.
    cooldown: Duration,
    state: Mutex<State>,
}

/// One list of members: a reload of `[cluster] endpoints` or its TLS replaces the list (for
/// every holder of this `Etcd` at once: the term, the replicas, the presence record), and a
/// request or stream that began on the old list says so by its generation.
struct Members {
    generation: u64,
    /// Each member's URL (as `[cluster] endpoints` gives it) and client.
    list: Vec<(String, Client)>,
}

/// A member, as one request or stream met it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    generation: u64,
    pub(crate) index: usize,
}

struct State {
    members: Arc<Members>,
    /// The member asked first.
    current: usize,
    /// Until when each member is passed over, since it last failed.
    down_until: Vec<Option<Instant>>,
}

impl State {
    fn of(members: Arc<Members>) -> State {
        let n = members.list.len();
        State {
            members,
            current: 0,
            down_until: vec![None; n],
        }
    }
}

impl Etcd {
    /// `members` (at least one), each failed member passed over for `cooldown`.
    pub(crate) fn new(members: Vec<(String, Client)>, cooldown: Duration) -> Etcd {
        assert!(!members.is_empty(), "the configuration has an endpoint");
        let members = Arc::new(Members {
            generation: 0,
            list: members,
        });
        Etcd(Arc::new(Inner {
            cooldown,
            state: Mutex::new(State::of(members)),
        }))
    }

    /// Ask `other`'s members from now on, in place of these, for every holder of this
    /// `Etcd`. A request in flight ends on the member it went to; a failure it meets is not
    /// held against the new list.
    pub(crate) fn replace_members(&self, other: &Etcd) {
        let list = other.members().list.clone();
        let mut state = self.state();
        let generation = state.members.generation + 1;
        *state = State::of(Arc::new(Members { generation, list }));
    }

    /// Whether `member` is of the list asked now: a stream opened on an older one is better
    /// opened again on this one.
    pub(crate) fn is_current(&self, member: Member) -> bool {
        self.state().members.generation == member.generation
    }

    /// Let `lease` go without waiting for it: nothing that matters is held under it, and
    /// failing that it runs out.
    pub(crate) fn revoke_in_background(&self, lease: i64) {
        let etcd = self.clone();
        tokio::spawn(async move {
            let _ = etcd
                .call(Retry::Idempotent, Until::OneRound, |mut c| async move {
                    c.lease_revoke(lease).await
                })
                .await;
        });
    }

    fn members(&self) -> Arc<Members> {
        self.state().members.clone()
    }

    /// Ask `op` of the current member; on a failure of the member that `retry` allows to
    /// go on from, of the next one at once, while `until` lasts.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        retry: Retry,
        until: Until<'_>,
        op: F,
    ) -> Result<T, etcd_client::Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call_on(retry, until, op).await.map(|(_, v)| v)
    }

    /// As [`Etcd::call`], and which member answered: a stream opened there fails with it.
    ///
    /// A request that may be sent twice and has no answer after [`HEDGE`] goes to the next
    /// member as well, and so on every [`HEDGE`], as many copies as there are members; the
    /// first answer wins. A follower that has not yet noticed its leader's death forwards a
    /// write to the dead leader, which loses it, and the write waits out its whole timeout;
    /// the next follower may not have noticed either. With a copy every half second, the
    /// first sent after the election ends is answered.
    pub(crate) async fn call_on<T, F, Fut>(
        &self,
        retry: Retry,
        until: Until<'_>,
        mut op: F,
    ) -> Result<(Member, T), etcd_client::Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        use futures_util::stream::{FuturesUnordered, StreamExt};
        let members = self.members();
        let n = members.list.len();
        let member = |index| Member {
            generation: members.generation,
            index,
        };
        let mut flight = FuturesUnordered::new();
        let mut send = |at: usize| {
            let attempt = op(members.list[at].1.clone());
            async move { (at, attempt.await) }
        };
        // The members the copies in flight went to, and when the last went.
        let mut flying: Vec<usize> = Vec::with_capacity(n);
        let mut sent = tokio::time::Instant::now();
        let mut tried = 0;
        loop {
            if flight.is_empty() {
                let at = self.pick(&members, until).await;
                flying.push(at);
                flight.push(send(at));
                sent = tokio::time::Instant::now();
            }
            // A copy every HEDGE while none is answered, as many as there are members.
            let hedge = (retry == Retry::Idempotent
                && flying.len() < n
                && until.goes_on(tried + flying.len(), n))
            .then(|| sent + HEDGE);
            let deadline = until.deadline();
            let (at, answer) = tokio::select! {
                Some(done) = flight.next() => done,
                () = sleep_until(hedge) => {
                    let next = self.after(&members, *flying.last().unwrap_or(&0));
                    flying.push(next);
                    flight.push(send(next));
                    sent = tokio::time::Instant::now();
                    continue;
                }
                // A member that has not answered by the caller's deadline has failed it,
                // whatever its own timeout says: were it not marked, the caller's next try
                // would go to it again (a member that accepts and stalls, or that its packets
                // no longer reach).
                () = sleep_until(deadline.map(Into::into)) => {
                    for &at in &flying {
                        self.failed(member(at), "no answer before the caller's deadline");
                    }
                    return Err(etcd_client::Error::IoError(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no answer from etcd before the deadline",
                    )));
                }
            };
            if let Some(i) = flying.iter().position(|&m| m == at) {
                flying.remove(i);
            }
            let error = match answer {
                Ok(answer) => {
                    self.answered(member(at));
                    return Ok((member(at), answer));
                }
                Err(e) => e,
            };
            let failure = Failure::of(&error);
            if !failure.is_member() {
                return Err(error);
            }
            self.failed(member(at), &crate::error_chain::one_line(&error));
            tried += 1;
            if !flight.is_empty() {
                // Another copy may yet be answered.
                continue;
            }
            let again = failure == Failure::Unsent || retry == Retry::Idempotent;
            if !again || !until.goes_on(tried, n) {
                return Err(error);
            }
        }
    }

    /// `member` failed (a request, or a stream opened there): ask the next one from now on,
    /// and pass this one over for the cooldown. A member of a list since replaced is no
    /// longer asked anyway.
    pub(crate) fn failed(&self, member: Member, why: &str) {
        let now = Instant::now();
        let name = {
            let mut state = self.state();
            if state.members.generation != member.generation {
                return;
            }
            let at = member.index;
            let was_up = state.down_until[at].is_none_or(|t| t <= now);
            state.down_until[at] = Some(now + self.0.cooldown);
            if state.current == at {
                state.current = (at + 1) % state.down_until.len();
            }
            was_up.then(|| state.members.list[at].0.clone())
        };
        if let Some(name) = name {
            tracing::warn!(member = %name, error = %why, "an etcd member failed; asking the next one");
        }
    }

    /// The member after `last` for another copy: the next in ring order that has not failed
    /// lately, else simply the next. A member may hold two copies: a follower that had not
    /// noticed its leader's death when it took the first may know the new one by the second.
    fn after(&self, members: &Members, last: usize) -> usize {
        let state = self.state();
        let n = members.list.len();
        if state.members.generation != members.generation {
            return (last + 1) % n;
        }
        let now = Instant::now();
        (1..=n)
            .map(|k| (last + k) % n)
            .find(|&i| state.down_until[i].is_none_or(|t| t <= now))
            .unwrap_or((last + 1) % n)
    }

    fn answered(&self, member: Member) {
        let mut state = self.state();
        if state.members.generation != member.generation {
            return;
        }
        let at = member.index;
        if state.down_until[at].take().is_some() {
            tracing::info!(member = %state.members.list[at].0, "an etcd member answers again");
        }
        state.current = at;
    }

    /// The member of `members` to ask: the current one unless it failed lately, else the
    /// next that did not; when every one did, the one whose cooldown ends first, after a
    /// pause. A request that began on a list since replaced goes on with it, from its first.
    async fn pick(&self, members: &Members, until: Until<'_>) -> usize {
        let soonest = {
            let mut state = self.state();
            if state.members.generation != members.generation {
                return 0;
            }
            let now = Instant::now();
            let n = state.down_until.len();
            let up = (0..n)
                .map(|k| (state.current + k) % n)
                .find(|&i| state.down_until[i].is_none_or(|t| t <= now));
            if let Some(i) = up {
                state.current = i;
                return i;
            }
            let soonest = (0..n).min_by_key(|&i| state.down_until[i]).unwrap_or(0);
            state.current = soonest;
            soonest
        };
        let pause = until.time_left().map_or(PAUSE, |left| left.min(PAUSE));
        tokio::time::sleep(pause).await;
        soonest
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Clients of members nobody listens at: lazy, so building them sends nothing.
    async fn members(n: usize) -> Etcd {
        let mut members = vec![];
        for i in 0..n {
            let url = format!("http://127.0.0.1:{}", 1 + i);
            let client = Client::connect([url.as_str()], None).await.unwrap();
            members.push((url, client));
        }
        Etcd::new(members, Duration::from_secs(10))
    }

    fn maybe_applied() -> etcd_client::Error {
        etcd_client::Error::IoError(std::io::ErrorKind::ConnectionReset.into())
    }

    /// An op that fails its first `fails` calls with `error`, then answers; and its calls.
    fn failing(
        fails: usize,
        error: fn() -> etcd_client::Error,
    ) -> (
        Arc<AtomicUsize>,
        impl FnMut(Client) -> std::future::Ready<Result<(), etcd_client::Error>>,
    ) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let op = move |_| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if n < fails { Err(error()) } else { Ok(()) })
        };
        (calls, op)
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_that_fails_is_passed_over_and_the_next_asked_at_once() {
        let etcd = members(3).await;
        let (calls, op) = failing(1, maybe_applied);
        let started = tokio::time::Instant::now();
        let (at, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, op)
            .await
            .unwrap();
        assert_eq!((at.index, calls.load(Ordering::SeqCst)), (1, 2));
        assert_eq!(started.elapsed(), Duration::ZERO, "no pause");
        // The next request goes to the member that answered, not back to the failed one.
        let (at, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, |_| async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(at.index, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_may_have_been_applied_is_sent_once_unless_it_may_be_sent_again() {
        let etcd = members(3).await;
        let (calls, op) = failing(1, maybe_applied);
        assert!(etcd.call(Retry::Unsent, Until::OneRound, op).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // The member is passed over all the same.
        let (at, ()) = etcd
            .call_on(Retry::Unsent, Until::OneRound, |_| async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(at.index, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn etcd_answers_are_not_asked_of_another_member() {
        let etcd = members(3).await;
        let (calls, op) = failing(1, || {
            etcd_client::Error::LeaseKeepAliveError("lease not found".into())
        });
        assert!(etcd
            .call(Retry::Idempotent, Until::OneRound, op)
            .await
            .is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let (at, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, |_| async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(
            at.index, 0,
            "the member that answered is still the one asked"
        );
    }

    /// A copy of a request that may be sent twice goes to a second member when the first
    /// has not answered in time; one that must not be sent twice waits for its member.
    #[tokio::test(start_paused = true)]
    async fn a_request_that_may_be_sent_twice_goes_to_a_second_member_when_the_first_stalls() {
        let etcd = members(3).await;
        let calls = Arc::new(AtomicUsize::new(0));
        let first_stalls = |calls: Arc<AtomicUsize>| {
            move |_| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 0 {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, etcd_client::Error>(())
                }
            }
        };
        let started = tokio::time::Instant::now();
        let (at, ()) = etcd
            .call_on(
                Retry::Idempotent,
                Until::OneRound,
                first_stalls(calls.clone()),
            )
            .await
            .unwrap();
        assert_eq!((at.index, calls.load(Ordering::SeqCst)), (1, 2));
        assert_eq!(started.elapsed(), HEDGE);
        // Sent once: it waits for its member (here, for ever).
        let calls = Arc::new(AtomicUsize::new(0));
        let once = etcd.call(Retry::Unsent, Until::OneRound, first_stalls(calls.clone()));
        assert!(tokio::time::timeout(HEDGE * 4, once).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// A reload's new members are asked from then on, by every holder, and a failure met on
    /// the old list is not held against the new one.
    #[tokio::test(start_paused = true)]
    async fn replaced_members_are_asked_and_an_old_failure_is_not_held_against_them() {
        let etcd = members(3).await;
        let held = etcd.clone();
        let ok = |_| async { Ok::<_, etcd_client::Error>(()) };
        let (old, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, ok)
            .await
            .unwrap();
        held.replace_members(&members(2).await);
        assert!(!etcd.is_current(old), "the old list is not current");
        let (new, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, ok)
            .await
            .unwrap();
        assert!(etcd.is_current(new));
        etcd.failed(old, "a stream on the old list ended");
        let (again, ()) = held
            .call_on(Retry::Idempotent, Until::OneRound, ok)
            .await
            .unwrap();
        assert_eq!(again, new, "still the first of the new list");
    }

    /// On real time, as the next: the deadline is on the monotonic clock, as the fence's is.
    #[tokio::test]
    async fn a_member_that_does_not_answer_by_the_deadline_has_failed() {
        let etcd = members(3).await;
        let until = Until::At(Instant::now() + Duration::from_millis(300));
        let stalled = etcd
            .call(Retry::Idempotent, until, |_| {
                std::future::pending::<Result<(), etcd_client::Error>>()
            })
            .await;
        assert!(stalled.is_err());
        let (at, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, |_| async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(at.index, 1, "the stalled member is passed over");
    }

    /// On real time: the deadline is on the monotonic clock, as the fence's is.
    #[tokio::test]
    async fn members_that_all_failed_are_asked_again_after_a_pause_until_the_deadline() {
        let etcd = members(3).await;
        let (calls, op) = failing(usize::MAX, maybe_applied);
        assert!(etcd
            .call(Retry::Idempotent, Until::OneRound, op)
            .await
            .is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 3, "each member once");
        // Every member failed lately: a round of pauses, until a deadline.
        let started = Instant::now();
        let (calls, op) = failing(usize::MAX, maybe_applied);
        let until = Until::At(started + Duration::from_secs(1));
        assert!(etcd.call(Retry::Idempotent, until, op).await.is_err());
        assert!(started.elapsed() >= Duration::from_secs(1));
        // No hot loop: at most one call per pause (fewer on a busy machine).
        let calls = calls.load(Ordering::SeqCst);
        assert!((1..=6).contains(&calls), "{calls} calls in a second");
        // One answers: it is asked first from then on.
        let (calls, op) = failing(2, maybe_applied);
        let until = Until::At(Instant::now() + Duration::from_secs(5));
        let (at, ()) = etcd.call_on(Retry::Idempotent, until, op).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let (again, ()) = etcd
            .call_on(Retry::Idempotent, Until::OneRound, |_| async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(again, at);
    }
}
