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
