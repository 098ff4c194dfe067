//! Unit tests for the overrides file: set, unset, parse, render, and the merge into an agent.

use super::*;
use crate::profile::ProfileName;

fn file() -> PathBuf {
    PathBuf::from("/h/profiles/coder/launchd-overrides.toml")
}

fn agent() -> LaunchAgent {
    LaunchAgent::new(
        Profile::new(ProfileName::parse("coder").unwrap(), "/h".into()).unwrap(),
        "/usr/local/bin/hermes-svc".into(),
    )
}

#[test]
fn the_file_sits_in_the_profile_home() {
    assert_eq!(Overrides::path(&agent().profile), file());
}

#[test]
fn set_unset_and_round_trip() {
    let mut o = Overrides::default();
    assert!(o.set("RestartSec", "20s").unwrap());
    assert!(!o.set("RestartSec", "20").unwrap(), "unchanged");
    assert!(o.set("WatchdogSec", "60").unwrap());
    assert!(o.set("HTTPS_PROXY", "http://p:8080").unwrap());
    assert!(o
        .set("WEIRD", "& < > \" ' \\ $HOME %h é 日本 # not a comment")
        .unwrap());
    assert!(!o.set("HTTPS_PROXY", "http://p:8080").unwrap());
    let text = o.render();
    assert!(
        text.contains("\n[service]\nWatchdogSec = 60\nRestartSec = 20\n"),
        "{text}"
    );
    assert_eq!(Overrides::parse(&text, &file()).unwrap(), o);

    assert!(o.unset("RestartSec").unwrap());
    assert!(!o.unset("RestartSec").unwrap());
    assert!(o.unset("WEIRD").unwrap());
    assert!(!o.unset("NEVER_SET").unwrap());
    assert!(o.unset("not a name").is_err());
    assert_eq!(Overrides::parse(&o.render(), &file()).unwrap(), o);
}

#[test]
fn an_empty_file_is_only_comments_and_parses_empty() {
    let text = Overrides::default().render();
    assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
    assert!(Overrides::parse(&text, &file()).unwrap().is_empty());
    assert!(Overrides::parse("", &file()).unwrap().is_empty());
}

#[test]
fn set_refuses_what_the_plist_must_not_hold() {
    let mut o = Overrides::default();
    for (key, value, needle) in [
        ("RestartSec", "0", "from 1 to"),
        ("RestartSec", "soon", "from 1 to"),
        ("WatchdogSec", "86401", "from 1 to"),
        ("HERMES_HOME", "/x", "install with HERMES_HOME"),
        ("HERMES_SERVICE_MANAGER", "systemd", "exit codes"),
        ("HERMES_WATCHDOG_SEC", "5", "set WatchdogSec"),
        ("NOTIFY_SOCKET", "/run/x", "systemd"),
        ("XPC_SERVICE_NAME", "x", "launchd sets it"),
        ("CHAT_BOT_TOKEN", "123:abc", ".env"),
        ("openai_api_key", "sk-x", ".env"),
        ("DB_PASSWORD", "x", ".env"),
        ("1X", "x", "valid variable name"),
        ("X", "a\nb", "property list cannot hold"),
    ] {
        let err = o.set(key, value).unwrap_err().to_string();
        assert!(err.starts_with(key), "{key}: {err}");
        assert!(err.contains(needle), "{key}={value:?}: {err}");
    }
    assert!(o.is_empty());
}

#[test]
fn a_bad_file_names_the_file_the_key_and_the_fix() {
    for (text, needles) in [
        (
            "[service]\nRestartSec = \"10\"\n",
            &["[service] RestartSec", "without quotes"][..],
        ),
        (
            "[service]\nRestartSec = 0\n",
            &["[service] RestartSec", "from 1 to"],
        ),
        (
            "[service]\nNice = 5\n",
            &["[service] Nice", "RestartSec or WatchdogSec"],
        ),
        ("[env]\nBOT_TOKEN = \"x\"\n", &["[env] BOT_TOKEN", ".env"]),
        ("[env]\nX = 5\n", &["[env] X", "double quotes"]),
        ("[env]\nX = \"a\\u0000b\"\n", &["[env] X", "remove it"]),
        ("[units]\nX = 1\n", &["units", "[service] and [env]"]),
        ("service = 1\n", &["service", "must be a section"]),
        (
            "[env\n",
            &["not valid TOML", "remove it and set the values again"],
        ),
    ] {
        let err = Overrides::parse(text, &file()).unwrap_err().to_string();
        assert!(err.starts_with(&file().display().to_string()), "{err}");
        for n in needles {
            assert!(err.contains(n), "{text:?}: {err}");
        }
    }
}

#[test]
fn load_treats_a_missing_file_as_empty_and_save_writes_it_whole() {
    let dir = std::env::temp_dir().join(format!("hsv-overrides-{}", std::process::id()));
    let path = dir.join(OVERRIDES_FILE);
    assert!(Overrides::load(&path).unwrap().is_empty());
    let mut o = Overrides::default();
    o.set("HTTPS_PROXY", "http://p:8080").unwrap();
    o.save(&path).unwrap();
    assert_eq!(Overrides::load(&path).unwrap(), o);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::write(&path, "[env\n").unwrap();
    let err = Overrides::load(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn apply_merges_into_the_agent() {
    let mut o = Overrides::default();
    o.set("RestartSec", "3").unwrap();
    o.set("WatchdogSec", "45").unwrap();
    o.set("HTTPS_PROXY", "http://p:8080").unwrap();
    let mut a = agent();
    let base = a.clone();
    Overrides::default().apply(&mut a);
    assert_eq!(a, base, "nothing set, nothing changed");
    o.apply(&mut a);
    assert_eq!(a.throttle_interval, 3);
    assert_eq!(a.watchdog_sec, Some(45));
    assert_eq!(a.env["HTTPS_PROXY"], "http://p:8080");
    let text = a.render().unwrap();
    assert!(
        text.contains("<key>ThrottleInterval</key>\n\t<integer>3</integer>"),
        "{text}"
    );
    assert!(
        text.contains("<key>HERMES_WATCHDOG_SEC</key>\n\t\t<string>45</string>"),
        "{text}"
    );
}
