//! The agent API of a real gateway process, loaded by its own user: a full house of
//! connections trickling their bodies, or a thousand idle ones, does not keep `send` out, and
//! the state file, which `GET /v1/health` and `status` (under a real user manager) show,
//! says the API was saturated.
//! Profile names start with `al`.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use hermes_svc::api::MAX_CONNECTIONS;
use hermes_svc::mock_platform::MockConfig;

use crate::harness::wait_for;
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::outbox_rig::{sigterm, Rig};
use crate::profile_builder::ProfileTest;

fn socket(rig: &Rig) -> PathBuf {
    rig.profile_home().join("state/api/agent.sock")
}

/// `hermes-svc send` of `text` to the Discord adapter, which must finish within `deadline`.
fn send_within(rig: &Rig, text: &str, deadline: Duration) -> Output {
    let started = Instant::now();
    let mut child = rig
        .hermes()
        .args([
            "send",
            "--profile",
            &rig.profile,
            "--to",
            "dc:channel:77",
            text,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(deadline, "send to finish", || child.try_wait().unwrap());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "send after {:?}: {}",
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A request whose body is promised and never comes, left open.
fn trickle(rig: &Rig) -> UnixStream {
    let mut s = UnixStream::connect(socket(rig)).unwrap();
    s.write_all(
        b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
          Content-Length: 1000\r\n\r\n{",
    )
    .unwrap();
    s
}

#[test]
fn trickling_bodies_on_every_connection_do_not_keep_send_out() {
    let rig = Rig::new("altrickle", "");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let _slow: Vec<UnixStream> = (0..MAX_CONNECTIONS).map(|_| trickle(&rig)).collect();
    let out = send_within(&rig, "through the trickles", Duration::from_secs(5));
    assert!(String::from_utf8_lossy(&out.stdout).contains("queued"));
    sigterm(&mut gw);
}

#[test]
fn a_thousand_idle_connections_do_not_keep_send_out_and_the_state_file_says_so() {
    let rig = Rig::new("alidle", "");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let idle: Vec<UnixStream> = (0..1000)
        .map(|_| UnixStream::connect(socket(&rig)).unwrap())
        .collect();
    send_within(&rig, "through the idle ones", Duration::from_secs(5));
    // Every idle connection was accepted before the send's (the backlog is first come,
    // first served): what is written from now on has seen them all.
    let since = std::time::SystemTime::now();

    // The next state file says the API was full and shed the idle connections to make room.
    let written_after = |s: &serde_json::Value, t: std::time::SystemTime| {
        s["updated_at"]
            .as_str()
            .and_then(|u| humantime::parse_rfc3339(u).ok())
            .is_some_and(|u| u > t)
    };
    let api = wait_for(
        Duration::from_secs(15),
        "the state file to say saturated",
        || {
            let s = rig.state()?;
            (written_after(&s, since) && s["api"]["state"] == "saturated").then(|| s["api"].clone())
        },
    );
    assert_eq!(api["max_connections"], MAX_CONNECTIONS, "{api}");
    assert!(api["shed"].as_u64().unwrap() > 0, "{api}");
    // `GET /v1/health` is that file, as `send` and `status` read it.
    let health = rig.rt.block_on(rig.client().health()).unwrap();
    let health = serde_json::to_value(health).unwrap();
    assert!(health["api"]["state"].is_string(), "{health}");

    // Once the load is gone, it says serving again.
    drop(idle);
    let calm = std::time::SystemTime::now();
    wait_for(
        Duration::from_secs(30),
        "the state file to say serving",
        || {
            let s = rig.state()?;
            (written_after(&s, calm) && s["api"]["state"] == "serving").then_some(())
        },
    );
    sigterm(&mut gw);
}

/// Under systemd, `status` shows what the state file says: a saturated API, in its JSON and
/// in its text.
#[test]
fn status_shows_a_saturated_api() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let t = ProfileTest::new("alstatus")
        .config(&format!(
            "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"AL_TOKEN\"\n\
             api-base = \"{}\"\n",
            mock.http_base()
        ))
        .env("AL_TOKEN=al-status-token\n")
        .run();
    let sock = t.m.profile_home("alstatus").join("state/api/agent.sock");
    wait_for(Duration::from_secs(20), "the API socket", || {
        UnixStream::connect(&sock).ok()
    });
    let _idle: Vec<UnixStream> = (0..MAX_CONNECTIONS + 100)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let api = wait_for(Duration::from_secs(20), "status to say saturated", || {
        let json =
            t.m.hermes_ok(&["status", "--json", "--profile", "alstatus"]);
        let report: serde_json::Value = serde_json::from_str(&json).unwrap();
        let api = report["units"][0]["health"]["api"].clone();
        (api["state"] == "saturated").then_some(api)
    });
    assert_eq!(api["max_connections"], MAX_CONNECTIONS, "{api}");
    assert!(api["shed"].as_u64().unwrap() > 0, "{api}");
    let text = t.m.hermes_ok(&["status", "--profile", "alstatus"]);
    assert!(
        text.contains("api        SATURATED: every place taken in the last seconds, "),
        "{text}"
    );
    drop(rt);
}
