//! What the grid's driver sleeps on until the earliest slot.
//!
//! tokio's timer wheel wakes the thread once per level a deadline passes through: a 5 s
//! deadline sits in the 4.096 s level, is moved down to the 64 ms level at that level's slot
//! boundary, then to the millisecond level, and fires, so each long deadline costs about three
//! wake-ups. At rest those are most of what a gateway does (docs/benchmarks.md, "At rest"). A
//! kernel timer (timerfd, on the runtime's own epoll) wakes the thread once, at the deadline.
//! Where there is none (macOS, or a timerfd refused) the driver sleeps on tokio's timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

/// Which timer a grid's driver sleeps on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// tokio's timer wheel: the one a paused test clock moves.
    Runtime,
    /// The kernel's (timerfd) where there is one; else tokio's.
    Kernel,
}

impl Default for Clock {
    /// The kernel's, but tokio's in unit tests, which pause tokio's clock.
    fn default() -> Self {
        if cfg!(test) {
            Self::Runtime
        } else {
            Self::Kernel
        }
    }
}

pub(super) enum Alarm {
    /// A later instant gets a new tokio timer rather than the old one moved: tokio moves a
    /// timer later lazily, leaving it in its wheel at the old instant, where it would still
    /// wake the thread. An answer deadline emptied by its answer is that case every heartbeat.
    Runtime(Option<Pin<Box<Sleep>>>),
    #[cfg(target_os = "linux")]
    Kernel(kernel::Timer),
}

impl Alarm {
    pub(super) fn new(clock: Clock) -> Self {
        #[cfg(target_os = "linux")]
        if clock == Clock::Kernel {
            match kernel::Timer::new() {
                Ok(timer) => return Self::Kernel(timer),
                Err(error) => {
                    tracing::warn!(%error, "no kernel timer; the timer grid sleeps on tokio's")
                }
            }
        }
        let _ = clock;
        Self::Runtime(None)
    }

    /// Ready once `at` has passed.
    pub(super) fn poll_at(&mut self, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Self::Runtime(sleep) => {
                let timer = match sleep {
                    Some(s) if s.deadline() == at || at < s.deadline() || s.is_elapsed() => {
                        if s.deadline() != at {
                            s.as_mut().reset(at);
                        }
                        s
                    }
                    _ => sleep.insert(Box::pin(tokio::time::sleep_until(at))),
                };
                timer.as_mut().poll(cx)
            }
            #[cfg(target_os = "linux")]
            Self::Kernel(timer) => match timer.poll_at(at, cx) {
                Ok(poll) => poll,
                Err(error) => {
                    tracing::warn!(%error, "the kernel timer failed; the timer grid sleeps on tokio's");
                    *self = Self::Runtime(None);
                    self.poll_at(at, cx)
                }
            },
        }
    }

    /// Nothing is due: sleep until woken.
    pub(super) fn disarm(&mut self) {
        match self {
            Self::Runtime(sleep) => *sleep = None,
            #[cfg(target_os = "linux")]
            Self::Kernel(timer) => timer.disarm(),
        }
    }
}

#[cfg(target_os = "linux")]
mod kernel {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use std::task::{Context, Poll};

    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    use tokio::time::Instant;

    /// A one-shot timerfd on `CLOCK_MONOTONIC`, the clock `Instant` reads on Linux.
    pub(in super::super) struct Timer {
        fd: AsyncFd<Fd>,
        armed: Option<Instant>,
    }

    struct Fd(TimerFd);

    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }

    impl Timer {
        pub(super) fn new() -> io::Result<Self> {
            let flags = TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC;
            let fd = TimerFd::new(ClockId::CLOCK_MONOTONIC, flags)?;
            // SAFETY: `Fd` owns the timer's descriptor and gives the same one for as long as
            // it lives, which is as long as the `AsyncFd` that owns it.
            let fd = unsafe { AsyncFd::register_with_interest(Fd(fd), Interest::READABLE) }?;
            Ok(Self { fd, armed: None })
        }

        pub(super) fn poll_at(
            &mut self,
            at: Instant,
            cx: &mut Context<'_>,
        ) -> io::Result<Poll<()>> {
            loop {
                if self.armed != Some(at) {
                    let wait = at.saturating_duration_since(Instant::now());
                    if wait.is_zero() {
                        return Ok(Poll::Ready(()));
                    }
                    // Relative to the kernel's now at this call, which is no earlier than
                    // the `now` read above: it expires at `at` or after, never before.
                    let when = Expiration::OneShot(TimeSpec::from_duration(wait));
                    self.fd.get_ref().0.set(when, TimerSetTimeFlags::empty())?;
                    self.armed = Some(at);
                }
                let mut ready = match self.fd.poll_read_ready(cx) {
                    Poll::Pending => return Ok(Poll::Pending),
                    Poll::Ready(ready) => ready?,
                };
                let mut expirations = [0u8; 8];
                match ready
                    .try_io(|fd| Ok(nix::unistd::read(fd.get_ref().0.as_fd(), &mut expirations)?))
                {
                    Ok(read) => {
                        read?;
                        self.armed = None;
                        return Ok(Poll::Ready(()));
                    }
                    // Readiness left from an expiry the timer was re-armed over.
                    Err(_would_block) => continue,
                }
            }
        }

        pub(super) fn disarm(&mut self) {
            if self.armed.take().is_some() {
                // A failure leaves one wake-up for nothing.
                let _ = self.fd.get_ref().0.unset();
            }
        }
    }
}
