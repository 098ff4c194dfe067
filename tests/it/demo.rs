//! `hermes-svc demo` end to end: its gateway detects the half-open fault on all seven
//! connections (QQ and Discord resume, Feishu and Slack connect afresh and are pushed again
//! what they had not acked, Telegram, Weixin and Matrix drop a hung poll and poll again),
//! loses nothing, and the demo says so in a few lines.

use std::process::Command;

use crate::harness::BIN;

#[test]
fn the_demo_shows_every_adapter_recover_from_half_open_feishu_included() {
    let out = Command::new(BIN)
        .args(["demo", "--seconds", "1"])
        .env_remove("HERMES_HOME")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("STATUS=10/10 adapters ready"), "{stdout}");
    for adapter in ["qq", "dc", "fs", "sl", "mm", "wc", "dt"] {
        assert!(
            stdout.contains(&format!("{adapter}: half-open detected after")),
            "{adapter}: {stdout}"
        );
    }
    for adapter in ["tg", "wx", "mx"] {
        assert!(
            stdout.contains(&format!("{adapter}: hung poll detected after")),
            "{adapter}: {stdout}"
        );
    }
    assert!(stdout.contains("qq and dc RESUMED"), "{stdout}");
    assert!(stdout.contains("fs: a new long connection"), "{stdout}");
    assert!(
        stdout.contains("sl: a new Socket Mode connection"),
        "{stdout}"
    );
    assert!(stdout.contains("(lost 0, duplicated 0)"), "{stdout}");
    // The conversation: said during the fault, answered in its chat once, nothing twice.
    assert!(
        stdout.contains("the agent's answer \"echo: hello, agent\" reached tg chat 1001"),
        "{stdout}"
    );
    assert!(
        stdout.contains("0 twice; \"hello, agent\": 1 answer)"),
        "{stdout}"
    );
    let acked = stdout
        .lines()
        .find(|l| l.contains("feishu events acked"))
        .unwrap_or_default();
    let counts: Vec<&str> = acked
        .split_whitespace()
        .skip(3)
        .step_by(2)
        .take(2)
        .collect();
    assert!(
        counts.len() == 2 && counts[0] == counts[1] && counts[0] != "0",
        "every Feishu event acked: {acked}"
    );
    assert!(
        stdout.contains("result                            OK"),
        "{stdout}"
    );
    // Three lines more since the conversation: the agent, the greeting and its answer; seven
    // since Slack and Matrix: two detections, Slack's new connection, and their rows in the
    // two status tables; three for each wing since (Mattermost, WeCom, DingTalk): its detection and its
    // two rows. The `STATUS=` lines are not counted: the demo prints each change the
    // gateway reports, and how many there are depends on timing.
    let lines = stdout
        .lines()
        .filter(|l| !l.contains("systemd <- STATUS="))
        .count();
    assert!(lines <= 62, "the demo stays short: {stdout}");
    assert!(!stdout.contains('\x1b'), "plain through a pipe: {stdout:?}");
}

/// scripts/demo shows each command it runs in bold on a terminal, and plain through a pipe or
/// under `NO_COLOR`, as hermes-svc's own output does. Its `step` is run as the script defines
/// it (sourced, the script stops after its definitions), with stdout a pipe, then a pty.
#[test]
fn the_demo_script_is_bold_only_on_a_terminal_without_no_color() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo");
    let piped = Command::new("bash")
        .args(["-c", r#"source "$0" && step echo shown"#, script])
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(
        String::from_utf8_lossy(&piped.stdout),
        "\n$ echo shown\nshown\n"
    );
    let on_tty = |no_color: Option<&str>| {
        let mut cmd = Command::new("script");
        cmd.args([
            "-qec",
            &format!("bash -c 'source \"$0\" && step echo shown' '{script}'"),
            "/dev/null",
        ])
        .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).replace('\r', "")
    };
    assert_eq!(on_tty(None), "\n\x1b[1m$ echo shown\x1b[0m\nshown\n");
    // no-color.org: set and not empty.
    assert_eq!(on_tty(Some("")), "\n\x1b[1m$ echo shown\x1b[0m\nshown\n");
    assert_eq!(on_tty(Some("1")), "\n$ echo shown\nshown\n");
}
