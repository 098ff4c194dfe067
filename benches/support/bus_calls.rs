//! The method calls a command makes to the user manager, as a bus monitor sees them: not
//! `sendmsg`s under strace, since one write can carry many of `describe`'s messages.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::harness::Manager;

/// Calls to `org.freedesktop.systemd1` while `run` runs, in a run of its own beside the timed
/// ones (the monitor slows the bus down). A call of the bench's own after `run` marks the end.
pub fn to_the_manager(m: &Manager, run: impl FnOnce()) -> usize {
    let mut monitor = m
        .command("busctl")
        .args(["--user", "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says on stderr once it monitors.
    let mut said = String::new();
    BufReader::new(monitor.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    run();
    let marker = m.call_bus_daemon("GetId");
    assert!(marker.status.success(), "{marker:?}");
    let calls = BufReader::new(monitor.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.contains("Member=GetId"))
        .filter(|l| l.contains("Destination=org.freedesktop.systemd1"))
        .count();
    let _ = monitor.kill();
    let _ = monitor.wait();
    calls
}
