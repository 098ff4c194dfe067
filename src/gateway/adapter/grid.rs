//! One timer for the deadlines of every connection in a gateway: heartbeats, answer
//! deadlines, idle and handshake deadlines.
//!
//! Each connection has one deadline at a time, and moves it twice per heartbeat (to the
//! answer's deadline once the probe is out, then to the next probe once answered). On a tokio
//! timer each such move is an entry moved in the runtime's wheel, and a 5 s deadline passes
//! through three of its levels before it fires: at a thousand connections that wheel was the
//! largest single item of the gateway's CPU profile (docs/benchmarks.md). Deadlines are
//! already rounded onto a grid shared by all connections (`session::coalesce`), so here the
//! connections due at one instant share one entry, and one tokio timer (the driver's) sleeps
//! until the earliest: a move is a `BTreeMap` update, and a slot that comes due wakes its
//! connections together.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::time::{Instant, Sleep};

/// The gateway's grid: cheap to clone, one per gateway ([`super::Shared`]). Its driver is
/// spawned on the runtime of the first deadline polled, and again on the next one's if that
/// runtime ended (a test's, say).
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
    fn slots(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding the lock leaves the map whole (every update is one call).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
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

    /// The driver: sleeps on one tokio timer until the earliest slot, wakes it, and so on.
    ///
    /// A later slot gets a new tokio timer rather than the old one moved: tokio moves a timer
    /// later lazily, leaving it in its wheel at the old instant, where it would still wake
    /// the thread. An answer deadline emptied by its answer is that case every heartbeat.
    async fn drive(self) {
        let mut sleep: Option<Pin<Box<Sleep>>> = None;
        let mut woken = vec![];
        std::future::poll_fn(|cx| loop {
            let Some(next) = self.fire(Instant::now(), cx.waker(), &mut woken) else {
                sleep = None;
                return Poll::<()>::Pending;
            };
            let timer = match &mut sleep {
                Some(s) if s.deadline() == next || next < s.deadline() || s.is_elapsed() => {
                    if s.deadline() != next {
                        s.as_mut().reset(next);
                    }
                    s
                }
                _ => sleep.insert(Box::pin(tokio::time::sleep_until(next))),
            };
            if timer.as_mut().poll(cx).is_pending() {
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

    pub(crate) fn is_elapsed(&self) -> bool {
        Instant::now() >= self.at
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

impl Drop for Deadline {
    fn drop(&mut self) {
        self.leave_slot();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
