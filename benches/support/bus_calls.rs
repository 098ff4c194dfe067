//! The method calls a command makes to the user manager, as a bus monitor sees them.

use crate::bus_monitor::BusMonitor;
use crate::harness::Manager;

/// Calls to `org.freedesktop.systemd1` while `run` runs, in a run of its own beside the timed
/// ones (the monitor slows the bus down). A call of the bench's own after `run` marks the end.
pub fn to_the_manager(m: &Manager, run: impl FnOnce()) -> usize {
    let mut busctl = m.command("busctl");
    busctl.args(["--user", "monitor"]);
    let monitor = BusMonitor::start(busctl);
    run();
    let marker = m.call_bus_daemon("GetId");
    assert!(marker.status.success(), "{marker:?}");
    monitor
        .calls_before_get_id()
        .iter()
        .filter(|c| c.destination == "org.freedesktop.systemd1")
        .count()
}
