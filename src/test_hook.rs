//! Test-only hooks, compiled out of release builds.
//!
//! Some acceptance tests need a real process to stop at an exact point: a gateway component
//! whose state machine is genuinely stuck (not merely disconnected) under a real systemd, or
//! doctor paused between listing units and reading them while the test removes one. Both are
//! asked for in `HERMES_TEST_FAULT`, comma-separated:
//! - `wedge:NAME` makes component NAME hang forever at its next step;
//! - `panic:NAME` makes adapter NAME panic as it starts, as a bug would;
//! - `kill:POINT` makes the process SIGKILL itself at POINT, as a power cut or the OOM killer
//!   would, with nothing flushed and no handler run; `kill:POINT:SUBJECT` only when POINT is
//!   reached for SUBJECT (an outbox message's idempotency key), so that a test can aim at one
//!   message while others pass the same point;
//! - `pause:POINT:FIFO` makes the process stop at POINT until the test has opened FIFO for
//!   writing and closed it again;
//! - `stall:POINT:MS` makes the first task that reaches POINT wait MS milliseconds there, as
//!   one slow write to disk would, while the rest of the process runs on;
//! - `ask-manager` makes every unit's properties come from the systemd manager, never from
//!   its files (see [`switched`]);
//! - `machine-id:ID` makes the process take ID for this machine's identity (its cluster
//!   claims'), so that two processes on one machine can stand for two machines;
//! - `clock-skew:MS` makes the process tell its cluster's members a wall clock MS
//!   milliseconds (negative: behind) off the machine's, as a host whose NTP failed would.
//!
//! In release builds every hook says no, so no environment variable can wedge or pause a
//! production binary.

#[cfg(debug_assertions)]
fn faults() -> Vec<String> {
    std::env::var("HERMES_TEST_FAULT")
        .map(|spec| spec.split(',').map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Should component `name` hang now?
#[cfg(debug_assertions)]
pub(crate) fn wedged(name: &str) -> bool {
    faults()
        .iter()
        .any(|f| f.strip_prefix("wedge:") == Some(name))
}

#[cfg(not(debug_assertions))]
pub(crate) fn wedged(_name: &str) -> bool {
    false
}

/// Hang forever if `name` is wedged: the task stops making progress but keeps its resources,
/// exactly like a deadlocked state machine.
pub(crate) async fn hang_if_wedged(name: &str) {
    if wedged(name) {
        tracing::warn!(component = name, "test fault: wedged");
        std::future::pending::<()>().await;
    }
}

/// Panic now if adapter `name` was asked to (`panic:NAME`): a bug, at a known place.
#[cfg(debug_assertions)]
pub(crate) fn panic_if_asked(name: &str) {
    if faults()
        .iter()
        .any(|f| f.strip_prefix("panic:") == Some(name))
    {
        panic!("test fault: panic in {name}");
    }
}

#[cfg(not(debug_assertions))]
pub(crate) fn panic_if_asked(_name: &str) {}

/// Is the plain switch `name` (a fault with no argument) set? `ask-manager` makes
/// `Systemd::describe` ask the manager about every unit instead of reading unit files, so a
/// test can hold the two views side by side.
#[cfg(debug_assertions)]
pub(crate) fn switched(name: &str) -> bool {
    faults().iter().any(|f| f == name)
}

#[cfg(not(debug_assertions))]
pub(crate) fn switched(_name: &str) -> bool {
    false
}

/// Stop at `point` while the test holds the FIFO it named for it open. Blocking, on purpose:
/// the whole process is held still, as if the scheduler had paused it there.
#[cfg(debug_assertions)]
pub(crate) fn pause(point: &str) {
    use std::io::Read;
    for f in faults() {
        let Some((p, fifo)) = f.strip_prefix("pause:").and_then(|r| r.split_once(':')) else {
            continue;
        };
        if p == point {
            // Opening blocks until the test opens the write end; reading ends when it closes it.
            if let Ok(mut r) = std::fs::File::open(fifo) {
                let _ = r.read_to_end(&mut vec![]);
            }
        }
    }
}

#[cfg(not(debug_assertions))]
pub(crate) fn pause(_point: &str) {}

/// Wait at `point` for as long as the test asked with `stall:POINT:MS`: only this task waits,
/// as it would on a slow disk, so a test can widen a window that is otherwise too short to
/// hit (a caller hanging up while its submit waits for the fsync).
/// Only the first arrival waits, so what follows (a retry, the delivery) runs at full speed.
#[cfg(debug_assertions)]
pub(crate) async fn stall(point: &str) {
    static STALLED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    for f in faults() {
        let Some((p, ms)) = f.strip_prefix("stall:").and_then(|r| r.split_once(':')) else {
            continue;
        };
        let (true, Ok(ms)) = (p == point, ms.parse::<u64>()) else {
            continue;
        };
        {
            let mut stalled = STALLED.lock().unwrap_or_else(|p| p.into_inner());
            if stalled.iter().any(|s| s == point) {
                return;
            }
            stalled.push(point.to_owned());
        }
        tracing::warn!(point, ms, "test fault: stalling");
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

#[cfg(not(debug_assertions))]
pub(crate) async fn stall(_point: &str) {}

/// The machine identity a test asked for with `machine-id:ID`.
#[cfg(debug_assertions)]
pub(crate) fn machine_id() -> Option<String> {
    faults()
        .iter()
        .find_map(|f| f.strip_prefix("machine-id:").map(str::to_owned))
}

#[cfg(not(debug_assertions))]
pub(crate) fn machine_id() -> Option<String> {
    None
}

/// How far off this process tells its cluster its wall clock is, in milliseconds.
#[cfg(debug_assertions)]
pub(crate) fn cluster_clock_skew_ms() -> i64 {
    faults()
        .iter()
        .find_map(|f| f.strip_prefix("clock-skew:").and_then(|ms| ms.parse().ok()))
        .unwrap_or(0)
}

#[cfg(not(debug_assertions))]
pub(crate) fn cluster_clock_skew_ms() -> i64 {
    0
}

/// How far tests have moved the wall clock forward, in milliseconds (debug builds only).
#[cfg(debug_assertions)]
static WALL_CLOCK_SKEW_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Move this process's view of the wall clock forward by `by`, as a suspend does: the
/// monotonic clock stands still while the machine sleeps, the wall clock does not. In-process
/// tests use it to put a laptop to sleep; it only ever moves forward, so tests that run
/// alongside merely see tokens age sooner.
#[cfg(debug_assertions)]
pub fn skew_wall_clock(by: std::time::Duration) {
    WALL_CLOCK_SKEW_MS.fetch_add(
        by.as_millis().try_into().unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// The wall clock that token lifetimes are checked against.
#[cfg(debug_assertions)]
pub(crate) fn wall_clock() -> std::time::SystemTime {
    let skew = WALL_CLOCK_SKEW_MS.load(std::sync::atomic::Ordering::Relaxed);
    std::time::SystemTime::now() + std::time::Duration::from_millis(skew)
}

#[cfg(not(debug_assertions))]
pub(crate) fn wall_clock() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

/// SIGKILL this process at `point`, reached for `subject`, if the test asked for it with
/// `kill:POINT` or `kill:POINT:SUBJECT`.
#[cfg(debug_assertions)]
pub(crate) fn kill_at(point: &str, subject: &str) {
    let armed = |f: &String| {
        let Some(rest) = f.strip_prefix("kill:").and_then(|r| r.strip_prefix(point)) else {
            return false;
        };
        rest.is_empty() || rest.strip_prefix(':') == Some(subject)
    };
    if faults().iter().any(armed) {
        tracing::warn!(point, subject, "test fault: killing this process");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(not(debug_assertions))]
pub(crate) fn kill_at(_point: &str, _subject: &str) {}
