//! Untrusted text never reaches the reader's terminal raw: a platform's event kinds and ids
//! in `events`, and the strings of a crafted state file in `status`. Control characters are
//! shown as escapes in text output, while `--json` keeps the exact values.
//!
//! The platform is the loopback mock, run as an "evil server" that sends dispatches with
//! escape sequences in their type and id; the gateway and the commands are the real binary.
//! Profile names start with `ht` so they never collide with units of other tests.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_svc::mock_platform::MockConfig;

use crate::harness::{scratch_dir, stderr, stdout, wait_for, Manager, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};

/// ED (clear the screen), an OSC that sets the window title, a CR that lets the rest of a
/// line overwrite its start, and a right-to-left override.
const CLEAR: &str = "\x1b[2J";
const TITLE: &str = "\x1b]0;pwned\x07";
const EVIL_KIND: &str = "MESSAGE_CREATE\x1b[2J\x1b]0;pwned\x07";
const EVIL_ID: &str = "ev-1\r2024-01-01T00:00:00.000Z dc FAKE_EVENT x \u{202e}gpj.exe";

/// Bytes a terminal would act on: ESC, BEL, CR, the C1 CSI and the RTL override.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| matches!(c, '\x1b' | '\x07' | '\r' | '\u{9b}' | '\u{202e}'))
        .collect()
}

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

#[test]
fn escape_sequences_from_a_platform_never_reach_events_text_output_raw() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let home = scratch_dir("ht-events");
    let locks = scratch_dir("ht-events-locks");
    let profile_home = home.path().join("profiles/htevents");
    std::fs::create_dir_all(&profile_home).unwrap();
    std::fs::write(
        profile_home.join("gateway.toml"),
        format!(
            "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"HT_TOKEN\"\napi-base = \"{}\"\n",
            mock.http_base()
        ),
    )
    .unwrap();
    let _gateway = Gateway(
        Command::new(BIN)
            .args(["gateway", "run", "--profile", "htevents"])
            .env("HERMES_HOME", home.path())
            .env("HERMES_LOCK_DIR", locks.path())
            .env("HT_TOKEN", "ht-token")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(Duration::from_secs(20), "the gateway to identify", || {
        (mock.stats().identifies >= 1).then_some(())
    });
    mock.emit_dispatch(
        EVIL_KIND,
        EVIL_ID,
        serde_json::json!({"content": format!("hi{CLEAR}\u{9b}31m\x7f\u{202e}"), "n": 1}),
    );
    let spool = profile_home.join("inbox/events.jsonl");
    wait_for(Duration::from_secs(20), "the event in the spool", || {
        std::fs::read_to_string(&spool)
            .ok()
            .filter(|t| t.contains("FAKE_EVENT"))
    });

    let events = |json: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["events", "--profile", "htevents"])
            .env("HERMES_HOME", home.path());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "events: {}", stderr(&out));
        stdout(&out)
    };

    let text = events(false);
    assert_eq!(
        raw_controls(&text),
        Vec::<char>::new(),
        "raw controls in:\n{text:?}"
    );
    assert_eq!(text.lines().count(), 1, "a CR or LF forged a line:\n{text}");
    for shown in [
        "MESSAGE_CREATE\\x1b[2J\\x1b]0;pwned\\x07",
        "ev-1\\r2024-01-01T00:00:00.000Z dc FAKE_EVENT x \\u{202e}gpj.exe",
        // In `data`, JSON already escapes ESC; DEL, C1 and the override are ours to show.
        "hi\\u001b[2J\\u{9b}31m\\x7f\\u{202e}",
    ] {
        assert!(text.contains(shown), "{shown:?} not in:\n{text}");
    }

    // --json stays exact: the stored line, every value as the platform sent it, and no
    // control character outside a JSON escape.
    let json = events(true);
    assert!(!json.contains(['\x1b', '\x07', '\r']), "{json:?}");
    let event: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
    assert_eq!(event["kind"], EVIL_KIND);
    assert_eq!(event["id"], EVIL_ID);
    assert_eq!(
        event["data"]["content"],
        format!("hi{CLEAR}\u{9b}31m\x7f\u{202e}")
    );
    drop(rt);
}

/// A state file with escape sequences in every string `status` prints.
fn crafted_state(pid: u32, updated_at: &str) -> String {
    serde_json::json!({
        "updated_at": format!("{updated_at}{TITLE}"),
        "pid": pid,
        "profile": "htstatus",
        "stale_after_ms": 16000,
        "summary": format!("1/1 adapters ready{CLEAR}"),
        "components": [{
            "name": format!("dc{CLEAR}"),
            "kind": "discord\r",
            "state": format!("retrying{TITLE}"),
            "fresh": true,
            "last_beat_age_ms": 10,
            "deadline_ms": 60000,
            "reconnects": 1,
            "attempts": 2,
            "last_error": format!("closed with code 4000: \x1b[1;32mall good\x1b[0m\r\u{202e}"),
            "outage_ms": null
        }]
    })
    .to_string()
}

#[test]
fn status_shows_a_crafted_state_file_with_its_controls_escaped() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "htstatus", "--no-start"]);
    let state_dir = m.profile_home("htstatus").join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    std::fs::write(
        state_dir.join("gateway.json"),
        crafted_state(4242, "2024-01-01T00:00:00.000Z"),
    )
    .unwrap();

    let text = m.hermes_ok(&["status", "--profile", "htstatus"]);
    assert_eq!(
        raw_controls(&text),
        Vec::<char>::new(),
        "raw controls in:\n{text:?}"
    );
    for shown in [
        "dc\\x1b[2J",
        "discord\\r",
        "retrying\\x1b]0;pwned\\x07",
        "\\x1b[1;32mall good\\x1b[0m\\r\\u{202e}",
        "2024-01-01T00:00:00.000Z\\x1b]0;pwned\\x07",
    ] {
        assert!(text.contains(shown), "{shown:?} not in:\n{text}");
    }

    // JSON stays exact: serde escapes the controls, the values round-trip.
    let json = m.hermes_ok(&["status", "--profile", "htstatus", "--json"]);
    assert!(!json.contains(['\x1b', '\x07', '\r']), "{json:?}");
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let health = &report["units"][0]["health"];
    assert_eq!(health["components"][0]["name"], format!("dc{CLEAR}"));
    assert_eq!(health["components"][0]["kind"], "discord\r");
}

/// A plain-text log line's message and fields, if it is a record of its own: a time, a
/// level, then the rest.
fn record(line: &str) -> Option<&str> {
    let (time, rest) = line.split_once(' ')?;
    let (level, message) = rest.trim_start().split_once(' ')?;
    let known = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level);
    (time.starts_with("20") && time.ends_with('Z') && known).then_some(message)
}

/// What a hostile Bot API says on every `getUpdates`: ED, an OSC title, BEL, a CR, and a
/// newline followed by a whole forged line that names an adapter this gateway does not have.
const FORGED: &str = "2026-12-01T09:00:00.000001Z  INFO gateway ready adapter=qq";

/// A Bot API that answers every request with HTTP 500 and `description` as its words.
fn hostile_bot_api(description: String) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let body =
        serde_json::json!({"ok": false, "error_code": 500, "description": description}).to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let length = String::from_utf8_lossy(&head)
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            let mut rest = vec![0u8; length];
            let _ = stream.read_exact(&mut rest);
            let _ = write!(
                stream,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

/// The plain-text log (a foreground run's stderr, launchd's `gateway.err.log`) holds each
/// record on one line whatever the platform said: its controls as escapes, its newline unable
/// to forge a line, its `adapter=qq` unable to pass for the field, on disk and through `logs`.
#[test]
fn a_platforms_text_cannot_forge_a_log_line_or_drive_the_terminal() {
    let home = scratch_dir("ht-log");
    let locks = scratch_dir("ht-log-locks");
    let profile_home = home.path().join("profiles/htlog");
    std::fs::create_dir_all(profile_home.join("logs")).unwrap();
    let api = hostile_bot_api(format!("Bad{CLEAR}{TITLE}\rhidden\n{FORGED}"));
    std::fs::write(
        profile_home.join("gateway.toml"),
        format!(
            "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"HT_TG_TOKEN\"\n\
             api-base = \"http://{api}\"\npoll-timeout = \"1s\"\npoll-grace = \"1s\"\n\
             backoff-min = \"100ms\"\nbackoff-max = \"200ms\"\n"
        ),
    )
    .unwrap();
    let log_path = profile_home.join("logs/gateway.err.log");
    let log_file = std::fs::File::create(&log_path).unwrap();
    let _gateway = Gateway(
        Command::new(BIN)
            .args(["gateway", "run", "--profile", "htlog"])
            .env("HERMES_HOME", home.path())
            .env("HERMES_LOCK_DIR", locks.path())
            .env("HT_TG_TOKEN", "123456:ht-token")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("JOURNAL_STREAM")
            .env_remove("HERMES_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap(),
    );
    let log = wait_for(
        Duration::from_secs(20),
        "two failed polls in the log",
        || {
            let text = std::fs::read_to_string(&log_path).ok()?;
            (text.matches("poll failed").count() >= 2).then_some(text)
        },
    );
    assert!(
        !log.chars().any(|c| c.is_control() && c != '\n'),
        "raw controls in:\n{log:?}"
    );
    for line in log.lines() {
        assert!(
            record(line).is_some(),
            "a line that is not a record of its own: {line:?}\nin:\n{log}"
        );
        assert!(!line.starts_with(FORGED), "a forged line: {line}");
    }
    let ready = log
        .lines()
        .filter_map(record)
        .filter(|m| m.starts_with("gateway ready"))
        .count();
    assert_eq!(ready, 1, "one real `gateway ready` line:\n{log}");
    let failed = log.lines().find(|l| l.contains("poll failed")).unwrap();
    assert!(
        failed.contains(
            "Bad\\x1b[2J\\x1b]0;pwned\\x07\\rhidden\\n2026-12-01T09:00:00.000001Z  INFO gateway ready adapter=qq\""
        ),
        "{failed}"
    );

    // `logs` under launchd prints that file: nothing raw, and `--adapter qq` finds no line,
    // since no adapter qq logged one.
    let logs = |adapter: &str| {
        let out = Command::new(BIN)
            .args(["logs", "-p", "htlog", "--adapter", adapter])
            .env("HERMES_HOME", home.path())
            .env("HERMES_SERVICE_MANAGER", "launchd")
            .output()
            .unwrap();
        assert!(out.status.success(), "logs: {}", stderr(&out));
        stdout(&out)
    };
    assert_eq!(logs("qq"), "", "a forged adapter=qq passed for the field");
    let tg = logs("tg");
    assert!(tg.matches("poll failed").count() >= 2, "{tg}");
    assert!(!tg.chars().any(|c| c.is_control() && c != '\n'), "{tg:?}");
}
