//! `send` and `events --follow` as a person runs them: the real binary against the API
//! served in this process.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::Value;

use crate::api_rig::{ApiRig, PROFILE, TG_MAX_TEXT};
use crate::harness::BIN;

fn hsv(rig: &ApiRig, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("HERMES_HOME", rig.home.path())
        .env_remove("HERMES_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn send_prints_the_id_and_state_and_names_the_fix_when_refused_or_not_running() {
    let mut rig = ApiRig::start();
    let to = ["send", "--profile", PROFILE, "--to", "qq:group:G1"];
    let out = hsv(&rig, &[&to[..], &["hello"]].concat(), None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first = text(&out.stdout);
    assert!(
        first.starts_with('m') && first.ends_with(" queued\n") && first.matches(' ').count() == 1,
        "{first:?}"
    );

    // From stdin (one trailing newline dropped), with a key and as JSON; twice.
    let keyed = [
        &to[..],
        &["--idempotency-key", "k-7", "--at-least-once", "--json"],
    ]
    .concat();
    let out = hsv(&rig, &keyed, Some("from stdin\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let message: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(message["text"], "from stdin");
    assert_eq!(message["policy"], "at-least-once");
    assert_eq!(message["idempotency_key"], "k-7");
    let again = hsv(&rig, &keyed[..keyed.len() - 1], Some("from stdin\n"));
    assert_eq!(
        text(&again.stdout),
        format!(
            "{} queued (already queued with this idempotency key; not queued again)\n",
            message["id"].as_str().unwrap()
        )
    );
    assert_eq!(rig.queued(), 2);

    // Refused by the gateway: exit 2, the gateway's words, nothing queued.
    let out = hsv(
        &rig,
        &["send", "--profile", PROFILE, "--to", "irc:#x", "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("no adapter named \"irc\" can send (adapters that can: dc, qq, tg)"),
        "{}",
        text(&out.stderr)
    );
    // Refused before asking: exit 2 too.
    let out = hsv(
        &rig,
        &["send", "--profile", PROFILE, "--to", "qq", "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("ADAPTER:TARGET"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(rig.queued(), 2);

    rig.stop();
    let out = hsv(&rig, &[&to[..], &["hello"]].concat(), None);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "the gateway for profile agent is not running (no API socket at {}); start it with hermes-svc start --profile agent",
        rig.socket().display()
    );
    assert!(text(&out.stderr).contains(&want), "{}", text(&out.stderr));
}

/// The longest text a platform takes, 65,536 characters of four bytes each, is read from
/// stdin whole and queued.
#[test]
fn send_takes_the_longest_text_a_platform_takes_from_stdin() {
    let rig = ApiRig::start();
    let long = "\u{1f600}".repeat(TG_MAX_TEXT);
    let out = hsv(
        &rig,
        &["send", "--profile", PROFILE, "--to", "tg:123456", "--json"],
        Some(&long),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let message: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        message["text"].as_str().unwrap().chars().count(),
        TG_MAX_TEXT
    );
    assert_eq!(rig.queued(), 1);
}

/// `events --follow --json`, with its stdout as a channel of lines.
fn follow(rig: &ApiRig) -> (Child, Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["events", "--profile", PROFILE, "--follow", "--json"])
        .env("HERMES_HOME", rig.home.path())
        .env_remove("HERMES_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn next_line(rx: &Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(15))
        .expect("a line from events --follow")
}

fn stored_lines(rig: &ApiRig) -> Vec<String> {
    std::fs::read_to_string(rig.spool.dir().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn events_follow_reads_through_the_api_when_it_answers() {
    // The API serves a spool outside the profile's inbox: what is printed came through it.
    let rig = ApiRig::start_with(|p| p.home().join("elsewhere"));
    rig.append("a");
    let (mut child, rx) = follow(&rig);
    let first = next_line(&rx);
    rig.append("b");
    let second = next_line(&rx);
    // Exactly the stored lines, as the file follow prints them.
    assert_eq!(vec![first, second], stored_lines(&rig));
    assert!(!rig.profile.home().join("inbox").exists());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn events_follow_goes_on_from_the_files_when_the_gateway_stops() {
    let mut rig = ApiRig::start();
    rig.append("a");
    let (mut child, rx) = follow(&rig);
    let first = next_line(&rx);
    rig.stop();
    rig.append("b");
    rig.append("c");
    let rest = vec![next_line(&rx), next_line(&rx)];
    assert_eq!([vec![first], rest].concat(), stored_lines(&rig));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        text(&out.stderr).contains("following the spool files"),
        "{}",
        text(&out.stderr)
    );
}
