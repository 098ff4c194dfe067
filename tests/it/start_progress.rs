//! `start` waiting on a gateway that cannot get ready, under a real user manager: on a
//! terminal (a pty from script(1)) it shows the gateway's live STATUS= line while it waits;
//! through a pipe it prints nothing but its result; past `--timeout` it exits 1 naming the
//! last STATUS= and the unit's Result.

use std::net::TcpListener;

use crate::harness::{scratch_dir, stderr, stdout, Manager, BIN};
use crate::profile_builder::ProfileTest;

#[test]
fn start_shows_what_it_waits_for_and_gives_up_with_the_last_status() {
    // A platform that takes connections and never answers: the adapter stays `connecting`.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut conns = vec![];
        for c in silent.incoming().flatten() {
            conns.push(c);
        }
    });
    let toml = format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"SP_TOKEN\"\n\
         api-base = \"{base}\"\nconnect-timeout = \"20s\"\nhello-timeout = \"20s\"\n"
    );
    let m = Manager::boot();
    let profile = ProfileTest::new("spwait")
        .config(&toml)
        .env("SP_TOKEN=sp-token\n")
        .install_args(&["--no-start"])
        .write(&m);
    let locks = scratch_dir("spwait-locks");
    profile.install_ok(&m, locks.path());

    // Through a pipe: no spinner, and the timeout's error says what the gateway last said.
    let out = m.hermes(&["start", "--profile", "spwait", "--timeout", "3s"]);
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{so}{se}");
    assert!(
        se.contains("did not finish within 3 s")
            && se.contains("its last STATUS: starting: 0/1 adapters ready; dc: "),
        "{se}"
    );
    assert!(!so.contains('\r') && !se.contains('\r'), "{so:?} {se:?}");
    assert!(m.systemctl(&["stop", &profile.unit]).status.success());

    // On a terminal: the spinner shows the gateway's STATUS= while it waits.
    let tty = m
        .command("script")
        .args([
            "-qec",
            &format!("{BIN} start --profile spwait --timeout 3s"),
            "/dev/null",
        ])
        .output()
        .unwrap();
    let text = stdout(&tty);
    assert_eq!(tty.status.code(), Some(1), "{text}");
    assert!(
        text.contains("hermes-gateway-spwait.service: starting: 0/1 adapters ready; dc: "),
        "{text:?}"
    );
    assert!(text.contains("did not finish within 3 s"), "{text:?}");
    assert!(m.systemctl(&["stop", &profile.unit]).status.success());
    drop(m);
    drop(held);
}
