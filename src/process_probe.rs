//! Whether a PID names a process, asked the way each platform can answer it.
//!
//! Linux answers from `/proc`. macOS has no `/proc`, so there the question goes to `kill` with
//! no signal, which only checks: doctor must never call a live process dead (its fix removes
//! the pid file of a dead one). A process's command line is another matter: macOS gives it
//! only through `sysctl(KERN_PROCARGS2)`, so callers there say they could not read it rather
//! than guess (see `doctor::homes::pid_process`).

/// Whether `pid` names a process, a zombie included.
#[cfg(target_os = "linux")]
pub(crate) fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `pid` names a process, a zombie included.
#[cfg(not(target_os = "linux"))]
pub(crate) fn exists(pid: u32) -> bool {
    exists_by_signal(pid)
}

/// macOS's answer, built on Linux too for its tests. `EPERM` is someone else's process, which
/// exists all the same. PID 0 is refused: `kill(0, …)` would ask about our own process group.
#[cfg(any(not(target_os = "linux"), test))]
fn exists_by_signal(pid: u32) -> bool {
    use nix::errno::Errno;
    match i32::try_from(pid) {
        Ok(raw) if raw > 0 => matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
            Ok(()) | Err(Errno::EPERM)
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_probes_see_a_live_process_and_not_a_reaped_or_impossible_one() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let reaped = child.id();
        child.wait().unwrap();
        for (name, probe) in [
            ("exists", exists as fn(u32) -> bool),
            ("exists_by_signal", exists_by_signal),
        ] {
            assert!(probe(std::process::id()), "{name}: this process");
            assert!(probe(1), "{name}: init");
            assert!(!probe(reaped), "{name}: a reaped child");
            assert!(!probe(0), "{name}: PID 0");
            assert!(!probe(u32::MAX), "{name}: a PID no process can have");
        }
    }
}
