//! The gateway's journal, read for real: a system-scope profile in a booted container
//! (system_manager.rs) with journald, its gateway against the loopback mock platform. Its lines
//! carry `HERMES_PROFILE`, `HERMES_COMPONENT`, `HERMES_ADAPTER`, `HERMES_CODE` and the right
//! `PRIORITY`; `hermes-svc logs` prints them, filters them by adapter and follows them.
//!
//! The tests of this file share one container while they run (a boot is about 2 s) and use
//! profile names of their own, starting with `j`; the mock platform is each test's own, so
//! a fault one test injects reaches only its gateway.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_svc::mock_platform::{Fault, MockConfig, MockPlatform};
use serde_json::Value;

use crate::harness::{scratch_dir, stderr, stdout, wait_for, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::system_manager::{child_named, SystemManager, CONTAINER_BIN};

/// The account the system units run as, created once per container.
const USER: &str = "hsvlogs";

/// The shared container, with [`USER`] in it.
fn container() -> Arc<SystemManager> {
    static SETUP: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let sm = SystemManager::shared();
    if !sm.run(&["id", "-u", USER]).status.success() {
        sm.run_ok(&["useradd", "--create-home", USER]);
    }
    sm
}

/// A mock whose heartbeats are quick, so that a silent connection is found dead in a second.
fn mock(rt: &tokio::runtime::Runtime) -> MockPlatform {
    start_mock(
        rt,
        MockConfig {
            heartbeat_interval: Duration::from_millis(500),
            ..MockConfig::default()
        },
    )
}

/// Write `profile`'s gateway.toml (a discord adapter per name, each with its own token) and
/// .env in the container, install it in system scope and wait until it is active. Returns
/// the tokens, which no journal line may show.
fn install(
    sm: &SystemManager,
    mock: &MockPlatform,
    profile: &str,
    adapters: &[&str],
) -> Vec<String> {
    let home = format!("/home/{USER}/.hermes/profiles/{profile}");
    let (mut toml, mut env, mut tokens) = (String::new(), String::new(), vec![]);
    for name in adapters {
        let var = format!("J_{}_TOKEN", name.to_uppercase());
        let token = format!("secret-{profile}-{name}-0123456789");
        toml.push_str(&format!(
            "[[adapter]]\nname = \"{name}\"\nkind = \"discord\"\ntoken-env = \"{var}\"\n\
             api-base = \"{}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n",
            mock.http_base()
        ));
        env.push_str(&format!("{var}={token}\n"));
        tokens.push(token);
    }
    sm.run_ok(&["install", "-d", "-o", USER, "-m", "0700", &home]);
    sm.write_file(&format!("{home}/gateway.toml"), &toml, USER, 0o644);
    sm.write_file(&format!("{home}/.env"), &env, USER, 0o600);
    sm.run_ok(&[
        "chown",
        "-R",
        &format!("{USER}:"),
        &format!("/home/{USER}/.hermes"),
    ]);
    sm.run_ok(&[
        CONTAINER_BIN,
        "install",
        "--profile",
        profile,
        "--system",
        "--run-as",
        USER,
    ]);
    sm.wait_active(&unit(profile));
    tokens
}

/// Wait until the mock holds `n` live connections.
fn connected(mock: &MockPlatform, n: u64, what: &str) {
    wait_for(Duration::from_secs(15), what, || {
        (mock.stats().live_connections == n).then_some(())
    });
}

fn unit(profile: &str) -> String {
    format!("hermes-gateway-{profile}.service")
}

/// Every entry of `unit`'s journal, as journalctl's JSON.
fn journal(sm: &SystemManager, unit: &str) -> Vec<Value> {
    let out = sm.run_ok(&[
        "journalctl",
        "--unit",
        unit,
        "--output",
        "json",
        "--no-pager",
    ]);
    json_lines(&out)
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The value of `field` in `entry` as one string (a field given twice would be an array).
fn field<'a>(entry: &'a Value, name: &str) -> Option<&'a str> {
    entry.get(name).and_then(Value::as_str)
}

fn message(entry: &Value) -> &str {
    field(entry, "MESSAGE").unwrap_or_default()
}

/// Wait until `unit`'s journal holds an entry whose message starts with `start`.
fn wait_for_entry(sm: &SystemManager, unit: &str, start: &str) -> Value {
    wait_for(
        Duration::from_secs(20),
        &format!("a journal entry {start:?} of {unit}"),
        || {
            journal(sm, unit)
                .into_iter()
                .find(|e| message(e).starts_with(start))
        },
    )
}

#[test]
fn the_gateway_logs_to_the_journal_with_its_profile_component_adapter_and_priority() {
    let rt = mock_runtime();
    let mock = mock(&rt);
    let sm = container();
    let profile = "jfields";
    let tokens = install(&sm, &mock, profile, &["dc"]);
    let unit = unit(profile);

    let ready = wait_for_entry(&sm, &unit, "gateway ready");
    assert_eq!(field(&ready, "HERMES_PROFILE"), Some(profile), "{ready}");
    assert_eq!(
        field(&ready, "HERMES_COMPONENT"),
        Some("runtime"),
        "{ready}"
    );
    assert_eq!(field(&ready, "PRIORITY"), Some("6"), "info is 6: {ready}");
    assert_eq!(field(&ready, "HERMES_ADAPTER"), None, "{ready}");
    assert_eq!(
        field(&ready, "SYSLOG_IDENTIFIER"),
        Some("hermes-svc"),
        "{ready}"
    );

    // The platform closes the connection: an info line of the adapter, with the close code.
    mock.set_fault(Fault::Close(4000));
    let closed = wait_for_entry(&sm, &unit, "connection closed");
    for (name, want) in [
        ("HERMES_PROFILE", profile),
        ("HERMES_COMPONENT", "adapter"),
        ("HERMES_ADAPTER", "dc"),
        ("HERMES_CODE", "4000"),
        ("PRIORITY", "6"),
    ] {
        assert_eq!(field(&closed, name), Some(want), "{name}: {closed}");
    }

    // Silence on the connection: found dead, a warning (4).
    connected(&mock, 1, "the adapter reconnected");
    mock.set_fault(Fault::Silent);
    let dead = wait_for_entry(&sm, &unit, "connection is dead");
    for (name, want) in [
        ("HERMES_PROFILE", profile),
        ("HERMES_COMPONENT", "adapter"),
        ("HERMES_ADAPTER", "dc"),
        ("PRIORITY", "4"),
    ] {
        assert_eq!(field(&dead, name), Some(want), "{name}: {dead}");
    }

    // The lines come through the native protocol, not as text on stderr (which would read
    // "INFO gateway ready ..."), and no line shows a token.
    let all = sm.run_ok(&[
        "journalctl",
        "--unit",
        &unit,
        "--output",
        "json",
        "--no-pager",
    ]);
    for token in &tokens {
        assert!(!all.contains(token.as_str()), "a token in the journal");
    }
    assert!(
        !json_lines(&all)
            .iter()
            .any(|e| message(e).contains(" INFO ") || message(e).contains(" WARN ")),
        "plain-text lines in the journal:\n{all}"
    );
}

#[test]
fn logs_prints_the_profiles_journal_as_json_and_filters_by_adapter() {
    let rt = mock_runtime();
    let mock = mock(&rt);
    let sm = container();
    let profile = "jlogs";
    install(&sm, &mock, profile, &["dca", "dcb"]);
    let unit = unit(profile);
    wait_for_entry(&sm, &unit, "gateway ready");
    connected(&mock, 2, "both adapters connected");
    mock.set_fault(Fault::Close(4000));

    let adapters_closed = |args: &[&str]| -> Vec<Value> {
        let mut argv = vec![CONTAINER_BIN, "logs", "-p", profile, "--system", "--json"];
        argv.extend_from_slice(args);
        let out = sm.run(&argv);
        assert!(out.status.success(), "{argv:?}: {}", stderr(&out));
        json_lines(&stdout(&out))
    };
    let both = wait_for(
        Duration::from_secs(20),
        "both adapters' close lines",
        || {
            let entries = adapters_closed(&[]);
            let closed: Vec<&str> = entries
                .iter()
                .filter(|e| message(e) == "connection closed")
                .filter_map(|e| field(e, "HERMES_ADAPTER"))
                .collect();
            (closed.contains(&"dca") && closed.contains(&"dcb")).then_some(entries)
        },
    );
    // The unit's own lines, and the manager's about it ("Started ..."), and nobody else's.
    let others: Vec<&Value> = both
        .iter()
        .filter(|e| {
            field(e, "_SYSTEMD_UNIT") != Some(unit.as_str())
                && field(e, "UNIT") != Some(unit.as_str())
        })
        .collect();
    assert!(others.is_empty(), "not the profile's unit: {others:?}");
    assert!(both
        .iter()
        .all(|e| field(e, "HERMES_PROFILE").is_none_or(|p| p == profile)));
    assert!(both.iter().any(|e| message(e) == "gateway ready"));

    let only_b = adapters_closed(&["--adapter", "dcb"]);
    assert!(
        only_b.iter().any(|e| message(e) == "connection closed"),
        "{only_b:?}"
    );
    assert!(
        only_b
            .iter()
            .all(|e| field(e, "HERMES_ADAPTER") == Some("dcb")),
        "--adapter dcb let another line through: {only_b:?}"
    );
}

#[test]
fn logs_follow_prints_a_new_line_of_the_live_gateway() {
    let rt = mock_runtime();
    let mock = mock(&rt);
    let sm = container();
    let profile = "jfollow";
    install(&sm, &mock, profile, &["dc"]);
    let unit = unit(profile);
    wait_for_entry(&sm, &unit, "gateway ready");
    connected(&mock, 1, "the adapter connected");

    let mut follow = sm
        .command(CONTAINER_BIN)
        .args(["logs", "-p", profile, "--system", "-f"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // journalctl shows the last lines first: once "gateway ready" is there, it follows.
    let seen = |what: &str, rx: &mpsc::Receiver<String>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut lines = vec![];
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) if line.contains(what) => return line,
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        panic!(
            "no {what:?} from logs -f within 20 s; it printed:\n{}",
            lines.join("\n")
        );
    };
    let ready = seen("gateway ready", &rx);
    assert!(
        ready.contains(" INFO gateway ready component=runtime"),
        "{ready}"
    );
    // nsenter forks into the container's PID namespace: under it is `logs`, and under that
    // its journalctl.
    let (logs, journalctl) = wait_for(Duration::from_secs(5), "logs -f and its journalctl", || {
        let logs = child_named(follow.id(), "hermes-svc")?;
        Some((logs, child_named(logs, "journalctl")?))
    });
    mock.set_fault(Fault::Close(4000));
    // The text shows the line's fields, as the plain-text log would.
    let line = seen("connection closed", &rx);
    assert!(
        line.contains(" INFO connection closed component=adapter ")
            && line.contains(" adapter=dc ")
            && line.contains(" code=4000 "),
        "{line}"
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(logs as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = follow.wait().unwrap();
    assert!(!status.success(), "logs -f ends only when stopped");
    // Its journalctl does not outlive it.
    wait_for(Duration::from_secs(10), "journalctl to leave", || {
        (!std::path::Path::new(&format!("/proc/{journalctl}")).exists()).then_some(())
    });
}

/// Bad input exits 2 before journalctl runs, as every command's does.
#[test]
fn logs_refuses_a_bad_profile_or_adapter_name_with_exit_2() {
    for args in [
        &["logs", "-p", "../etc", "--system"][..],
        &["logs", "-p", "Bad Name"],
        &["logs", "-p", "ok", "--adapter", "x y"],
        &["logs", "-p", "ok", "--since", ""],
    ] {
        let out = Command::new(BIN)
            .args(args)
            .env("PATH", "/nonexistent")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).trim().is_empty(), "{args:?}: no message");
    }
}

/// Under launchd, `logs` reads the agent's own files: the gateway's log (StandardErrorPath)
/// and its stdout, `--adapter` keeps that adapter's lines, `-f` prints what is appended, and
/// the flags that need a journal exit 2.
#[test]
fn logs_under_launchd_prints_and_follows_the_agents_log_files() {
    let home = scratch_dir("logs-launchd");
    let logs = home.path().join("profiles/jlaunchd/logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(
        logs.join("gateway.err.log"),
        "2026-12-01T09:00:00.000001Z  INFO gateway ready profile=jlaunchd\n\
         2026-12-01T09:00:01.000001Z  INFO connection closed adapter=dca code=4000\n\
         2026-12-01T09:00:02.000001Z  INFO connection closed adapter=dcb code=4000\n",
    )
    .unwrap();
    std::fs::write(logs.join("gateway.out.log"), "printed\n").unwrap();
    let logs_cmd = |args: &[&str]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["logs", "-p", "jlaunchd"])
            .args(args)
            .env("HERMES_HOME", home.path())
            .env("HERMES_SERVICE_MANAGER", "launchd");
        cmd
    };
    let all = logs_cmd(&[]).output().unwrap();
    assert!(all.status.success(), "{}", stderr(&all));
    assert_eq!(stdout(&all).lines().count(), 4, "{}", stdout(&all));
    assert!(stdout(&all).ends_with("printed\n"));
    let only_b = logs_cmd(&["--adapter", "dcb"]).output().unwrap();
    assert_eq!(
        stdout(&only_b),
        "2026-12-01T09:00:02.000001Z  INFO connection closed adapter=dcb code=4000\n"
    );
    for flag in [&["--json"][..], &["--since", "today"], &["--system"]] {
        let out = logs_cmd(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {}", stderr(&out));
    }

    let mut follow = logs_cmd(&["-f", "--adapter", "dca"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.contains("adapter=dca"), "{first}");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(logs.join("gateway.err.log"))
        .unwrap();
    std::io::Write::write_all(
        &mut file,
        b"2026-12-01T09:00:03.000001Z  INFO connection closed adapter=dcb code=4000\n\
          2026-12-01T09:00:04.000001Z  WARN connection is dead; resuming adapter=dca\n",
    )
    .unwrap();
    let next = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        next.contains("WARN connection is dead; resuming adapter=dca"),
        "{next}"
    );
    follow.kill().unwrap();
    follow.wait().unwrap();
}
