//! What the process a pid file names looks like where there is no `/proc` (macOS, where
//! launchd runs): the shared snapshot reads `/proc/<pid>/cmdline`, which would call every live
//! gateway dead there, and a stale-pid-file finding on a running gateway is worse than none.

use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::doctor::snapshot::PidProcess;

/// Alive when `kill(pid, 0)` finds the process (EPERM: it exists, as someone else's), with its
/// command line from `ps -o command=`, the portable way to read another process's argv.
pub(crate) fn without_proc(pid: u32) -> PidProcess {
    let Ok(raw) = i32::try_from(pid) else {
        return PidProcess::Dead;
    };
    if raw <= 0 {
        return PidProcess::Dead;
    }
    match kill(Pid::from_raw(raw), None) {
        Ok(()) | Err(Errno::EPERM) => PidProcess::Alive {
            cmdline: command_line(pid).unwrap_or_default(),
        },
        Err(_) => PidProcess::Dead,
    }
}

fn command_line(pid: u32) -> Option<String> {
    let out = Command::new("ps")
        .args(["-o", "command=", "-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        match without_proc(std::process::id()) {
            PidProcess::Alive { cmdline } => assert!(!cmdline.is_empty()),
            PidProcess::Dead => panic!("this very process reads as dead"),
        }
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(without_proc(pid), PidProcess::Dead);
    }
}
