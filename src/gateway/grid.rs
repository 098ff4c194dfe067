//! One timer for the deadlines of a gateway: every connection's heartbeats, answer, idle and
//! handshake deadlines, and the run's own tick (state file, watchdog).
//!
//! Each connection has one deadline at a time, and moves it twice per heartbeat (to the
//! answer's deadline once the probe is out, then to the next probe once answered). On a tokio
//! timer each such move is an entry moved in the runtime's wheel, and a 5 s deadline passes
//! through three of its levels before it fires: at a thousand connections that wheel was the
//! largest single item of the gateway's CPU profile (docs/benchmarks.md). Deadlines are
//! already rounded onto a grid shared by all connections (`session::coalesce`), so here the
//! connections due at one instant share one entry, and one timer (the driver's, [`alarm`])
//! sleeps until the earliest: a move is a `BTreeMap` update, and a slot that comes due wakes
//! its connections together. At rest that timer is a kernel timer, which wakes the process
//! once per deadline where tokio's wheel wakes it about three times.

mod alarm;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use alarm::{Alarm, Clock};

/// The gateway's grid: cheap to clone, one per gateway (in
/// [`crate::gateway::adapter::Shared`]). Its driver is spawned on the runtime of the first
/// deadline polled, and again on the next one's if that runtime ended (a test's, say).
#[derive(Clone, Default)]
pub(crate) struct Grid(Arc<Mutex<Slots>>);

#[derive(Default)]
struct Slots {
    /// The connections waiting for each instant, by deadline id.
    due: BTreeMap<Instant, Vec<(u64, Waker)>>,
    /// Emptied slots' lists, kept for the next slots: a slot comes and goes every tick of the
    /// grid, and the allocator showed in the profile.
    spare: Vec<Vec<(u64, Waker)>>,
    next_id: u64,
    driver: Driver,
    clock: Clock,
}

#[derive(Default)]
enum Driver {
    #[default]
    NotSpawned,
    /// Sleeping until `until` (or for a slot, if `None`), to be woken with `waker` when an
    /// earlier slot appears.
    Running {
        waker: Option<Waker>,
        until: Option<Instant>,
        task: tokio::task::AbortHandle,
    },
}

impl Grid {
    /// A grid whose driver sleeps on `clock`; a gateway's takes the default, the kernel's.
    #[cfg(all(test, target_os = "linux"))]
    fn on(clock: Clock) -> Self {
        Self(Arc::new(Mutex::new(Slots {
            clock,
            ..Slots::default()
        })))
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding the lock leaves the map whole (every update is one call).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A deadline that comes round every `every`, the first at once ([`Ticker::tick`]).
    pub(crate) fn ticker(&self, every: Duration) -> Ticker {
        Ticker {
            deadline: self.deadline(Instant::now()),
            every,
        }
    }

    /// A deadline on this grid, at `at`.
    pub(crate) fn deadline(&self, at: Instant) -> Deadline {
        let mut slots = self.slots();
        slots.next_id += 1;
        Deadline {
            grid: self.clone(),
            id: slots.next_id,
            at,
            registered: None,
        }
    }

    /// Wake every connection whose slot has come, and say when the next one comes: the
    /// driver (`driver`) sleeps until then unless woken for a sooner slot.
    fn fire(&self, now: Instant, driver: &Waker, woken: &mut Vec<Waker>) -> Option<Instant> {
        let next = {
            let mut slots = self.slots();
            while let Some(entry) = slots.due.first_entry() {
                if *entry.key() > now {
                    break;
                }
                let mut slot = entry.remove();
                woken.extend(slot.drain(..).map(|(_, w)| w));
                slots.spare.push(slot);
            }
            let next = slots.due.keys().next().copied();
            if let Driver::Running { waker, until, .. } = &mut slots.driver {
                *waker = Some(driver.clone());
                *until = next;
            }
            next
        };
        // Outside the lock: a woken task on another thread may register at once.
        woken.drain(..).for_each(Waker::wake);
        next
    }

    /// The driver: sleeps on one timer until the earliest slot, wakes it, and so on.
    async fn drive(self) {
        let mut alarm = Alarm::new(self.slots().clock);
        let mut woken = vec![];
        std::future::poll_fn(|cx| loop {
            let Some(next) = self.fire(Instant::now(), cx.waker(), &mut woken) else {
                alarm.disarm();
                return Poll::<()>::Pending;
            };
            if alarm.poll_at(next, cx).is_pending() {
                return Poll::Pending;
            }
        })
        .await
    }

    /// Put `id`'s waker in the slot at `at`, and the driver on its way if `at` is sooner
    /// than it sleeps.
    fn register(&self, id: u64, at: Instant, waker: &Waker) {
        let mut slots = self.slots();
        let slots = &mut *slots;
        let spare = &mut slots.spare;
        let slot = slots
            .due
            .entry(at)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        slot.push((id, waker.clone()));
        match &mut slots.driver {
            Driver::Running { task, .. } if task.is_finished() => slots.driver = Driver::NotSpawned,
            _ => {}
        }
        match &mut slots.driver {
            Driver::NotSpawned => {
                let task = tokio::spawn(self.clone().drive()).abort_handle();
                slots.driver = Driver::Running {
                    waker: None,
                    until: None,
                    task,
                };
            }
            Driver::Running { waker, until, .. } => {
                if until.is_none_or(|u| at < u) {
                    *until = Some(at);
                    if let Some(w) = waker.take() {
                        w.wake();
                    }
                }
            }
        }
    }

    fn unregister(&self, id: u64, at: Instant) {
        let mut slots = self.slots();
        if let Some(slot) = slots.due.get_mut(&at) {
            slot.retain(|(i, _)| *i != id);
            if slot.is_empty() {
                if let Some(slot) = slots.due.remove(&at) {
                    slots.spare.push(slot);
                }
                // The driver sleeps for nothing now: it sleeps until the next slot instead.
                if let Driver::Running { waker, until, .. } = &mut slots.driver {
                    if *until == Some(at) {
                        *until = None;
                        if let Some(w) = waker.take() {
                            w.wake();
                        }
                    }
                }
            }
        }
    }
}

/// One connection's deadline: moved with [`Deadline::reset`], awaited with
/// [`Deadline::elapsed`]. Its slot is taken when it is first awaited at an instant and given
/// back when it moves, fires or is dropped.
pub(crate) struct Deadline {
    grid: Grid,
    id: u64,
    at: Instant,
    /// The slot this deadline's waker is in, and the waker.
    registered: Option<(Instant, Waker)>,
}

impl Deadline {
    pub(crate) fn deadline(&self) -> Instant {
        self.at
    }

    pub(crate) fn reset(&mut self, at: Instant) {
        if at != self.at {
            self.leave_slot();
            self.at = at;
        }
    }

    /// Ready once the deadline has passed.
    pub(crate) fn elapsed(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| self.poll_elapsed(cx))
    }

    fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            self.leave_slot();
            return Poll::Ready(());
        }
        // A connection's task keeps its waker; a deadline awaited with another one takes its
        // slot again with that.
        match &self.registered {
            Some((at, w)) if *at == self.at && w.will_wake(cx.waker()) => {}
            _ => {
                self.leave_slot();
                self.grid.register(self.id, self.at, cx.waker());
                self.registered = Some((self.at, cx.waker().clone()));
            }
        }
        Poll::Pending
    }

    fn leave_slot(&mut self) {
        if let Some((at, _)) = self.registered.take() {
            self.grid.unregister(self.id, at);
        }
    }
}

/// A deadline that comes round: [`Grid::ticker`].
pub(crate) struct Ticker {
    deadline: Deadline,
    every: Duration,
}

impl Ticker {
    /// Ready at the next tick: `every` after the last one was due, so a tick taken late does
    /// not move the ones after it; after a whole interval missed, `every` after now.
    /// Cancel-safe: a tick not waited out is still the next.
    pub(crate) async fn tick(&mut self) {
        self.deadline.elapsed().await;
        let (due, now) = (self.deadline.deadline() + self.every, Instant::now());
        self.deadline
            .reset(if due > now { due } else { now + self.every });
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        self.leave_slot();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn deadlines_fire_at_their_instant_and_a_moved_one_at_its_new_one() {
        let grid = Grid::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut a = grid.deadline(at(300));
        let mut b = grid.deadline(at(300));
        let mut c = grid.deadline(at(500));
        let (ra, rb) = tokio::join!(a.elapsed(), b.elapsed());
        let _ = (ra, rb);
        assert_eq!(Instant::now(), at(300));
        // Moved later, then sooner, while waited on from a select that drops the wait.
        tokio::select! {
            _ = c.elapsed() => panic!("c is not due"),
            _ = tokio::time::sleep_until(at(350)) => {}
        }
        c.reset(at(900));
        c.reset(at(400));
        c.elapsed().await;
        assert_eq!(Instant::now(), at(400));
        assert!(grid.slots().due.is_empty(), "no slot left behind");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_deadline_leaves_its_slot() {
        let grid = Grid::default();
        let start = Instant::now();
        {
            let mut d = grid.deadline(start + Duration::from_secs(5));
            tokio::select! {
                _ = d.elapsed() => panic!("not due"),
                _ = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
            assert_eq!(grid.slots().due.len(), 1);
        }
        assert!(grid.slots().due.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_sooner_slot_wakes_the_driver_sleeping_until_a_later_one() {
        let grid = Grid::default();
        let start = Instant::now();
        let mut late = grid.deadline(start + Duration::from_secs(60));
        tokio::select! {
            _ = late.elapsed() => panic!("not due"),
            _ = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
        let mut soon = grid.deadline(start + Duration::from_secs(2));
        soon.elapsed().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticker_ticks_at_once_then_every_interval_keeping_its_cadence_through_a_late_tick() {
        let grid = Grid::default();
        let start = Instant::now();
        let every = Duration::from_secs(5);
        let mut ticks = grid.ticker(every);
        ticks.tick().await;
        assert_eq!(Instant::now(), start);
        ticks.tick().await;
        assert_eq!(Instant::now(), start + every);
        // Taken 2 s late: the next keeps the cadence.
        tokio::time::sleep(Duration::from_secs(7)).await;
        ticks.tick().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(12));
        ticks.tick().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(15));
        // Taken at 26, with the one at 25 missed whole too: the next is 5 s after this one.
        tokio::time::sleep(Duration::from_secs(11)).await;
        ticks.tick().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(26));
        ticks.tick().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(31));
    }

    /// The kernel timer follows the real clock, so this waits for real, for tens of
    /// milliseconds; the bounds only say that nothing fired early and nothing was lost.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn on_the_kernel_timer_deadlines_fire_no_earlier_than_due_and_a_sooner_one_first() {
        assert!(
            matches!(Alarm::new(Clock::Kernel), Alarm::Kernel(_)),
            "Linux has timerfd"
        );
        let grid = Grid::on(Clock::Kernel);
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut late = grid.deadline(at(60_000));
        tokio::select! {
            _ = late.elapsed() => panic!("not due"),
            _ = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
        let (mut a, mut b) = (grid.deadline(at(40)), grid.deadline(at(20)));
        let first = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                _ = a.elapsed() => "a",
                _ = b.elapsed() => "b",
            }
        })
        .await
        .expect("the sooner deadline fires");
        assert_eq!(first, "b");
        assert!(Instant::now() >= at(20));
        // Moved later while its old instant's timer may still be armed: not woken early.
        a.reset(at(80));
        tokio::time::timeout(Duration::from_secs(10), a.elapsed())
            .await
            .expect("the moved deadline fires");
        assert!(Instant::now() >= at(80));
        drop(late);
        assert!(grid.slots().due.is_empty(), "no slot left behind");
    }

    #[test]
    fn a_grid_outliving_its_drivers_runtime_gets_a_driver_on_the_next() {
        let grid = Grid::default();
        for _ in 0..2 {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async {
                let start = Instant::now();
                grid.deadline(start + Duration::from_secs(3))
                    .elapsed()
                    .await;
                assert_eq!(Instant::now(), start + Duration::from_secs(3));
            });
        }
    }
}
