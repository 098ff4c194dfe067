//! Issue 49's acceptance at its own scale: 1,000 Discord adapters under a real systemd user
//! manager, against the mock. `systemctl reload` of one changed table restarts that adapter
//! alone: every other connection the mock holds stays open and no other adapter identifies
//! again; an adapter added and one removed start and stop alone; a bad edit is refused naming
//! its line, with all 1,000 running on. What is counted is what the mock saw, never timing.
//! The figure (how long a reload takes) is the benchmark's: `cargo bench --bench gateway --
//! reload`.

use std::collections::BTreeSet;
use std::time::Duration;

use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use serde_json::Value;

use crate::harness::{stderr, wait_for};

const N: usize = 1000;

/// Discord adapters `a{i}` for each `i` of `names`, each its own token; `a{changed}` with a
/// longer `backoff-max`.
fn tables(base: &str, names: impl Iterator<Item = usize>, changed: Option<usize>) -> String {
    names
        .map(|i| {
            let max = if Some(i) == changed { "3s" } else { "2s" };
            format!(
                "[[adapter]]\nname = \"a{i}\"\nkind = \"discord\"\ntoken-env = \"RT_{i}\"\n\
                 api-base = \"{base}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"{max}\"\n\n"
            )
        })
        .collect()
}

/// The connections the mock holds open.
fn open(mock: &MockPlatform) -> BTreeSet<u64> {
    let spans = mock.stats().spans;
    spans
        .iter()
        .filter(|s| s.closed.is_none())
        .map(|s| s.conn)
        .collect()
}

/// Wait until the mock holds `n` open connections, each identified, after `least`
/// Identifies at least: the Identifies then.
fn settled(mock: &MockPlatform, n: usize, least: u64, what: &str) -> u64 {
    wait_for(Duration::from_secs(300), what, || {
        let s = mock.stats();
        let open = s.spans.iter().filter(|s| s.closed.is_none()).count();
        let all = s.identifies + s.resumes >= s.connections;
        (open == n && all && s.identifies >= least).then_some(s.identifies)
    })
}

#[test]
fn one_changed_adapter_among_a_thousand_reloads_alone_on_a_real_user_manager() {
    let rt = crate::mock_runtime::mock_runtime();
    // Heartbeats a minute apart: a thousand sessions in a debug build on a busy machine must
    // not miss one and reconnect for a reason of their own while the test counts.
    let mock = crate::mock_runtime::start_mock(
        &rt,
        MockConfig {
            heartbeat_interval: Duration::from_secs(60),
            ..MockConfig::default()
        },
    );
    let base = mock.http_base();
    let env: String = (0..=N).map(|i| format!("RT_{i}=rt-token-{i}\n")).collect();
    let running = crate::profile_builder::ProfileTest::new("rathousand")
        .config(&tables(&base, 0..N, None))
        .env(&env)
        .run();
    let (m, unit) = (&running.m, &running.profile.unit);
    let home = &running.profile.home;
    let write = |toml: String| {
        let path = home.join("gateway.toml");
        std::fs::write(home.join("gateway.toml.new"), toml).unwrap();
        std::fs::rename(home.join("gateway.toml.new"), path).unwrap();
    };
    let reason = || -> String {
        let text = std::fs::read_to_string(home.join("state/gateway.json")).unwrap();
        let state: Value = serde_json::from_str(&text).unwrap();
        state["reload"]["reason"]
            .as_str()
            .unwrap_or_default()
            .into()
    };
    let identified = settled(&mock, N, N as u64, "all 1,000 adapters connected");
    let before = open(&mock);

    // One table changed among 1,000: that adapter alone reconnects.
    write(tables(&base, 0..N, Some(500)));
    let out = m.systemctl(&["reload", unit]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reason(), "adapter a500 restarted (its table changed)");
    let after_one = settled(&mock, N, identified + 1, "a500 back");
    let now = open(&mock);
    assert_eq!(before.difference(&now).count(), 1, "one connection closed");
    assert_eq!(after_one, identified + 1, "one Identify: a500's alone");

    // One added, one removed.
    write(tables(&base, 1..=N, Some(500)));
    let out = m.systemctl(&["reload", unit]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = reason();
    assert!(
        said.contains("adapter a1000 started") && said.contains("adapter a0 stopped"),
        "{said}"
    );
    let after_two = settled(&mock, N, after_one + 1, "a1000 connected and a0 gone");
    let later = open(&mock);
    assert_eq!(now.difference(&later).count(), 1, "a0's connection closed");
    assert_eq!(after_two, after_one + 1, "one Identify: a1000's alone");

    // A bad edit: refused naming its line; all 1,000 run on, untouched.
    let good = tables(&base, 1..=N, Some(500));
    let line = good.lines().count() + 1;
    write(format!("{good}oops = \n"));
    let out = m.hermes(&["reload", "-p", "rathousand"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("gateway.toml:{line}")),
        "{}",
        stderr(&out)
    );
    assert_eq!(open(&mock), later, "no connection opened or closed");
    assert_eq!(mock.stats().identifies, after_two, "no Identify");
    let props = m.show(unit);
    assert_eq!(crate::unit_props::main_pid(&props), running.pid);
    assert_eq!(crate::unit_props::n_restarts(&props), 0);
}
