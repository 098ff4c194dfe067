//! Linger as logind tells it, in the booted container (system_manager.rs): `status` in user
//! scope, in a login session (`runuser -l`, whose PAM stack opens a logind session and starts
//! the user's manager), says `on` for a user who lingers and `off` for one who does not, and
//! asks logind two things for it, with no property cache set up.

use crate::bus_monitor::BusMonitor;
use crate::system_manager::{SystemManager, CONTAINER_BIN};

const LOGIND: &str = "org.freedesktop.login1";

/// `status --json` of `user`'s own manager, as `user` in a login session, and the method
/// calls it made to logind (their `Member=`) and any `AddMatch` of its.
fn status_as(sm: &SystemManager, user: &str) -> (serde_json::Value, Vec<String>) {
    let uid = sm.run_ok(&["id", "-u", user]).trim().to_owned();
    let runtime = format!("/run/user/{uid}");
    let mut busctl = sm.command("busctl");
    busctl.args(["--system", "monitor"]);
    let monitor = BusMonitor::start(busctl);
    let status = format!(
        "env XDG_RUNTIME_DIR={runtime} DBUS_SESSION_BUS_ADDRESS=unix:path={runtime}/bus \
         {CONTAINER_BIN} status --json"
    );
    let out = sm.run_ok(&["runuser", "-l", user, "-c", &status]);
    // A call of the test's own marks the end of what status asked.
    sm.run_ok(&[
        "busctl",
        "--system",
        "call",
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "GetId",
    ]);
    let seen = monitor.calls_before_get_id();
    // status's connection is the one that asks logind for the user; the login session's
    // own calls (pam_systemd's, the new user manager's) are others'.
    let status = seen
        .iter()
        .find(|c| c.destination == LOGIND && c.member == "GetUser")
        .map(|c| c.sender.clone())
        .unwrap_or_else(|| panic!("no GetUser to logind in {seen:?}"));
    let calls = seen
        .into_iter()
        .filter(|c| c.sender == status && (c.destination == LOGIND || c.member == "AddMatch"))
        .map(|c| c.member)
        .collect();
    (serde_json::from_str(&out).unwrap(), calls)
}

/// A user of its own in the shared container, lingering or not.
fn user(sm: &SystemManager, user: &str, linger: bool) {
    sm.run_ok(&["useradd", "--create-home", user]);
    if linger {
        sm.run_ok(&["loginctl", "enable-linger", user]);
    }
}

#[test]
fn status_says_whether_the_user_manager_lingers_as_logind_does_in_two_calls() {
    let sm = SystemManager::shared();
    user(&sm, "hsvlingeron", true);
    user(&sm, "hsvlingeroff", false);
    let (on, calls) = status_as(&sm, "hsvlingeron");
    assert_eq!(on["linger"], "on", "{on}");
    // The user's object, then its one property: no `AddMatch` and `GetAll` for a cache that
    // nothing reads again.
    assert_eq!(calls, ["GetUser", "Get"]);
    let (off, calls) = status_as(&sm, "hsvlingeroff");
    assert_eq!(off["linger"], "off", "{off}");
    assert_eq!(calls, ["GetUser", "Get"]);
}
