//! Who holds a profile's instance lock, as an onlooker sees it: doctor (HSV016) and `status`
//! both need "which process serves this profile right now, and does a service run it", and
//! the kernel's word on that is the flock on `gateway.lock`, whatever pid files say.
//!
//! The kernel's lock table is read at most once per run, and only when the cheap answer will
//! not do: a gateway its unit runs is named by the lock file's own record, which the unit's
//! main pid confirms. Nothing here ever takes the lock, not even briefly, so a gateway
//! starting at that moment never finds its profile taken by an onlooker.

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::path::Path;

use crate::gateway::flock;

/// A process holding a profile's instance lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LockHolder {
    pub(crate) pid: u32,
    /// Its command line, NUL-separated arguments joined by spaces; empty when it cannot be
    /// read (macOS has no `/proc`).
    pub(crate) cmdline: String,
    /// The service unit whose cgroup the process is in, if any: the unit that runs it. A
    /// process started from a terminal sits in a session scope, and has none.
    pub(crate) unit: Option<String>,
}

impl LockHolder {
    fn of(pid: u32) -> Self {
        Self {
            pid,
            cmdline: cmdline(pid).unwrap_or_default(),
            unit: service_of(pid),
        }
    }
}

/// Who holds a profile's instance lock, asking the kernel's lock table only when it matters.
pub(crate) struct LockLookup {
    /// Every unit's `MainPID`: a holder among them needs no look at the table.
    main_pids: BTreeSet<u32>,
    table: OnceCell<flock::LockTable>,
}

impl LockLookup {
    /// `main_pids` are the pids the manager runs as services.
    pub(crate) fn new(main_pids: BTreeSet<u32>) -> Self {
        Self {
            main_pids,
            table: OnceCell::new(),
        }
    }

    /// The process holding `lock_file`, with its command line and the service it runs in;
    /// `None` when nobody holds it (or, on macOS, when no unit's main process does: there is
    /// no lock table to ask).
    pub(crate) fn holder(&self, lock_file: &Path) -> Option<LockHolder> {
        self.holder_pid(lock_file).map(LockHolder::of)
    }

    /// The process holding `lock_file` unless it is one of the main pids: a gateway its unit
    /// runs, which the caller knows already, and whose command line and cgroup are then not
    /// read (two `/proc` files a profile, 7% of `status`'s own CPU over twenty running ones).
    pub(crate) fn other_holder(&self, lock_file: &Path) -> Option<LockHolder> {
        let pid = self.holder_pid(lock_file)?;
        (!self.main_pids.contains(&pid)).then(|| LockHolder::of(pid))
    }

    fn holder_pid(&self, lock_file: &Path) -> Option<u32> {
        if !lock_file.exists() {
            return None;
        }
        // The common case, a gateway its unit runs, needs no table: its record names the
        // unit's main process, which is alive. Anything else is checked against the kernel.
        match flock::recorded_holder(lock_file) {
            Some(h) if self.main_pids.contains(&h.pid) => Some(h.pid),
            _ => self
                .table
                .get_or_init(flock::LockTable::read)
                .holder(lock_file),
        }
    }
}

/// The command line of process `pid`, its arguments joined by spaces; `None` when there is no
/// such process or it cannot be read.
#[cfg(target_os = "linux")]
pub(crate) fn cmdline(pid: u32) -> Option<String> {
    if pid == 0 {
        return None;
    }
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// macOS has no `/proc` to read a command line from.
#[cfg(not(target_os = "linux"))]
pub(crate) fn cmdline(_pid: u32) -> Option<String> {
    None
}

/// The service unit whose cgroup `pid` is in: the last component of its cgroup path, when
/// that names a service (a process started from a terminal sits in a session scope).
fn service_of(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    // The unified hierarchy ("0::/…") when there is one, else systemd's named hierarchy.
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| {
            text.lines()
                .find_map(|l| l.split_once(":name=systemd:").map(|(_, p)| p))
        })?;
    path.rsplit('/')
        .next()
        .filter(|u| u.ends_with(".service"))
        .map(str::to_owned)
}
