//! Linger as logind tells it, in the booted container (system_manager.rs): `status` in user
//! scope, in a login session (`runuser -l`, whose PAM stack opens a logind session and starts
//! the user's manager), says `on` for a user who lingers and `off` for one who does not, and
//! asks logind two things for it, with no property cache set up.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::system_manager::{SystemManager, CONTAINER_BIN};

/// `status --json` of `user`'s own manager, as `user`, and the method calls it made to logind
/// (`Member=` of each, and any `AddMatch` of its), as `busctl --system monitor` saw them.
fn status_as(sm: &SystemManager, user: &str) -> (serde_json::Value, Vec<String>) {
    let uid = sm.run_ok(&["id", "-u", user]).trim().to_owned();
    let runtime = format!("/run/user/{uid}");
    let mut monitor = sm
        .command("busctl")
        .args(["--system", "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says on stderr once it monitors.
    let mut said = String::new();
    BufReader::new(monitor.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
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
    // (sender, destination, member) of every message on the bus meanwhile.
    let seen: Vec<[String; 3]> = BufReader::new(monitor.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.contains("Member=GetId"))
        .filter_map(|l| {
            let field = |key: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map(str::to_owned)
            };
            Some([field("Sender=")?, field("Destination=")?, field("Member=")?])
        })
        .collect();
    // status's connection is the one that asks logind for the user; the login session's
    // own calls (pam_systemd's, the new user manager's) are others'.
    let status = seen
        .iter()
        .find(|[_, d, m]| d == "org.freedesktop.login1" && m == "GetUser")
        .map(|[s, _, _]| s.clone())
        .unwrap_or_else(|| panic!("no GetUser to logind in {seen:?}"));
    let calls = seen
        .iter()
        .filter(|[s, d, m]| *s == status && (d == "org.freedesktop.login1" || m == "AddMatch"))
        .map(|[_, _, m]| m.clone())
        .collect();
    let _ = monitor.kill();
    let _ = monitor.wait();
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
