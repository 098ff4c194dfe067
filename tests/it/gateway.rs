//! The gateway process on its own: notify protocol, instance lock, pid file, signals.

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::{scratch_dir, wait_for, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::tls::{Certs, TlsFront};

fn gateway(home: &std::path::Path, profile: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["gateway", "run", "--profile", profile])
        .env("HERMES_HOME", home)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn recv(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("no notify message in time");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn term(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

// Abstract socket addresses exist only on Linux.
#[cfg(target_os = "linux")]
#[test]
fn speaks_sd_notify_on_an_abstract_socket_and_stops_cleanly_on_sigterm() {
    let home = scratch_dir("gw-abstract");
    let name = format!("hsv-test-notify-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            name.as_bytes(),
        )
        .unwrap();
    let sock = UnixDatagram::bind_addr(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let mut child = gateway(home.path(), "solo")
        .env("NOTIFY_SOCKET", format!("@{name}"))
        .env("WATCHDOG_USEC", "200000")
        .spawn()
        .unwrap();
    let ready = recv(&sock);
    assert!(
        ready.contains("READY=1") && ready.contains("STATUS="),
        "{ready}"
    );
    let pid_file = home.path().join("profiles/solo/gateway.pid");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pid_file).unwrap()).unwrap();
    assert_eq!(rec["pid"], child.id());
    assert_eq!(rec["profile"], "solo");
    // Watchdog pings arrive at half the interval.
    assert_eq!(recv(&sock), "WATCHDOG=1");
    assert_eq!(recv(&sock), "WATCHDOG=1");

    term(&child);
    let stopping = wait_for(Duration::from_secs(5), "STOPPING=1", || {
        let m = recv(&sock);
        m.contains("STOPPING=1").then_some(m)
    });
    assert!(stopping.contains("STOPPING=1"));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!pid_file.exists(), "pid file removed on exit");
}

#[test]
fn a_second_instance_of_a_profile_exits_78_naming_the_holder() {
    let home = scratch_dir("gw-lock");
    let dir = scratch_dir("gw-lock-sock");
    let path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut first = gateway(home.path(), "default")
        .env("NOTIFY_SOCKET", &path)
        .spawn()
        .unwrap();
    assert!(recv(&sock).contains("READY=1"));

    let second = gateway(home.path(), "default").output().unwrap();
    assert_eq!(second.status.code(), Some(78));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!(
            "already running: profile default (PID {})",
            first.id()
        )),
        "{err}"
    );
    // The loser never touched the holder's pid file.
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("gateway.pid")).unwrap())
            .unwrap();
    assert_eq!(rec["pid"], first.id());

    term(&first);
    assert_eq!(first.wait().unwrap().code(), Some(0));
    // The kernel released the lock with the process: a new instance starts at once.
    let mut third = gateway(home.path(), "default")
        .env("NOTIFY_SOCKET", &path)
        .spawn()
        .unwrap();
    wait_for(
        Duration::from_secs(10),
        "the third instance READY=1",
        || recv(&sock).contains("READY=1").then_some(()),
    );
    term(&third);
    assert_eq!(third.wait().unwrap().code(), Some(0));
}

#[test]
fn runs_without_a_notify_socket() {
    let home = scratch_dir("gw-plain");
    let mut child = gateway(home.path(), "plain").spawn().unwrap();
    let pid_file = home.path().join("profiles/plain/gateway.pid");
    wait_for(Duration::from_secs(10), "the pid file", || {
        pid_file.exists().then_some(())
    });
    term(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A wedged component (here the cron ticker, through the debug build's fault hook) will not
/// drain, so SIGTERM gives it up at once instead of waiting out the 20 s drain limit, and the
/// gateway still exits 0 and removes its pid file.
#[test]
fn a_stale_component_does_not_hold_up_a_stop() {
    let home = scratch_dir("gw-stale-stop");
    let profile_home = home.path().join("profiles/stalestop");
    std::fs::create_dir_all(&profile_home).unwrap();
    std::fs::write(
        profile_home.join("gateway.toml"),
        "[[cron]]\nname = \"yearly\"\nschedule = \"0 0 1 1 *\"\ncommand = [\"/bin/true\"]\n",
    )
    .unwrap();
    let mut child = gateway(home.path(), "stalestop")
        .env("HERMES_TEST_FAULT", "wedge:cron")
        .spawn()
        .unwrap();
    let state = profile_home.join("state/gateway.json");
    wait_for(Duration::from_secs(20), "cron to go stale", || {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&state).ok()?).ok()?;
        (s["components"][0]["fresh"] == false).then_some(())
    });
    term(&child);
    // Well inside the 20 s the drain would otherwise wait for the wedged ticker.
    let status = wait_for(Duration::from_secs(10), "the gateway to exit", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0));
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(log.contains("stale: not waiting for it to drain"), "{log}");
    assert!(!profile_home.join("gateway.pid").exists());
}

/// The WebSocket trusts what the system trusts, as the HTTPS requests do: a private CA that
/// `SSL_CERT_FILE` names is accepted (the adapter connects over wss://), and without it the
/// same certificate is refused with a certificate error, not connected.
#[test]
fn wss_is_verified_against_the_system_trust_store() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = mock_runtime();
    let mock = start_mock(&rt, hermes_svc::mock_platform::MockConfig::default());
    let dir = scratch_dir("gw-tls-ca");
    let certs = Certs::issue(dir.path(), "DNS:localhost");
    let port = rt.block_on(async {
        let front = TlsFront::bind(&certs, ([127, 0, 0, 1], 0).into()).await;
        let port = front.addr().port();
        front.forward_to(mock.addr());
        port
    });
    mock.set_advertised_ws_url(format!("wss://localhost:{port}/ws"));
    let ca = certs.ca;
    let base = mock.http_base();

    // Run a gateway until its adapter's state satisfies `done`; return that state.
    let run = |profile: &str,
               trust: Option<&std::path::Path>,
               done: &dyn Fn(&serde_json::Value) -> bool| {
        let home = scratch_dir(profile);
        let profile_home = home.path().join("profiles").join(profile);
        std::fs::create_dir_all(&profile_home).unwrap();
        std::fs::write(
            profile_home.join("gateway.toml"),
            format!(
                "[[adapter]]\nname = \"qq\"\nkind = \"qqbot\"\napp-id = \"1\"\n\
                 secret-env = \"GW_TLS_SECRET\"\napi-base = \"{base}\"\n\
                 token-url = \"{base}/app/getAppAccessToken\"\n\
                 connect-timeout = \"2s\"\nbackoff-min = \"100ms\"\nbackoff-max = \"500ms\"\n"
            ),
        )
        .unwrap();
        let mut cmd = gateway(home.path(), profile);
        cmd.env("GW_TLS_SECRET", "s")
            .env("HERMES_LOCK_DIR", home.path().join("locks"))
            .env_remove("SSL_CERT_DIR");
        match trust {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        let mut child = cmd.spawn().unwrap();
        let state = profile_home.join("state/gateway.json");
        let qq = wait_for(
            Duration::from_secs(20),
            "the adapter to connect or fail",
            || {
                let s: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&state).ok()?).ok()?;
                let qq = s["components"]
                    .as_array()?
                    .iter()
                    .find(|c| c["name"] == "qq")?
                    .clone();
                done(&qq).then_some(qq)
            },
        );
        term(&child);
        child.wait().unwrap();
        qq
    };
    run("tlsok", Some(&ca), &|qq| qq["state"] == "connected");
    let untrusted = run("tlsno", None, &|qq| !qq["last_error"].is_null());
    assert_ne!(untrusted["state"], "connected", "{untrusted}");
    let error = untrusted["last_error"].as_str().unwrap_or_default();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
}
