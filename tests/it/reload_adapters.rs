//! A reload applied adapter by adapter, against a real gateway process and the mock: a changed
//! table or a renewed token in `.env` restarts that adapter alone (every other connection the
//! mock holds stays open, and no other adapter reconnects); adapters added and removed start
//! and stop, their heartbeats counted or no longer; the token locks follow (an added adapter
//! whose token another gateway holds is a refused reload, and a removed one's lock is free for
//! another gateway at once); a first cron job starts the ticker; a cluster's standby answers
//! a reload. Profile names start with `ra`.

use std::collections::BTreeSet;
use std::process::{Child, Output};
use std::time::Duration;

use serde_json::Value;

use crate::harness::{stderr, stdout, wait_for};
use crate::outbox_rig::{sigterm, Rig};

/// Discord adapters `a0`..: each its own token from `.env` (`RA_A{i}`).
fn adapters(rig: &Rig, names: &[usize]) -> String {
    let base = rig.mock.http_base();
    names
        .iter()
        .map(|i| {
            format!(
                "[[adapter]]\nname = \"a{i}\"\nkind = \"discord\"\ntoken-env = \"RA_A{i}\"\n\
                 api-base = \"{base}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n"
            )
        })
        .collect()
}

fn env_file(rig: &Rig, tokens: &[(usize, &str)]) {
    let text: String = tokens
        .iter()
        .map(|(i, t)| format!("RA_A{i}={t}\n"))
        .collect();
    std::fs::write(rig.profile_home().join(".env"), text).unwrap();
}

fn token(rig: &Rig, i: usize) -> String {
    format!("{}-a{i}", rig.profile)
}

/// A rig whose profile has `dc`, `qq` and the discord adapters `names`, their tokens in `.env`.
fn rig(profile: &str, names: &[usize]) -> Rig {
    let rig = Rig::new(profile, "");
    let toml = format!("{}{}", config(&rig), adapters(&rig, names));
    write_config(&rig, &toml);
    let tokens: Vec<(usize, String)> = names.iter().map(|&i| (i, token(&rig, i))).collect();
    let refs: Vec<(usize, &str)> = tokens.iter().map(|(i, t)| (*i, t.as_str())).collect();
    env_file(&rig, &refs);
    rig
}

fn config(rig: &Rig) -> String {
    std::fs::read_to_string(rig.profile_home().join("gateway.toml")).unwrap()
}

fn write_config(rig: &Rig, text: &str) {
    std::fs::write(rig.profile_home().join("gateway.toml"), text).unwrap();
}

fn reload(rig: &Rig) -> Output {
    rig.hermes()
        .args(["reload", "-p", &rig.profile, "--timeout", "60s"])
        .output()
        .unwrap()
}

/// The adapters the state file of `child` shows, by name: (state, reconnects).
fn components(rig: &Rig, child: &Child) -> Option<Vec<(String, String, u64)>> {
    let s = rig.state()?;
    if s["pid"] != child.id() {
        return None;
    }
    Some(
        s["components"]
            .as_array()?
            .iter()
            .filter(|c| c["kind"] != "cron")
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["state"].as_str().unwrap_or_default().to_owned(),
                    c["reconnects"].as_u64().unwrap_or(0),
                )
            })
            .collect(),
    )
}

/// Wait until exactly `names` are the adapters of `child`, every one connected.
fn wait_connected(rig: &Rig, child: &Child, names: &[&str]) -> Vec<(String, String, u64)> {
    let want: BTreeSet<&str> = names.iter().copied().collect();
    wait_for(
        Duration::from_secs(60),
        &format!("adapters {names:?} connected"),
        || {
            let c = components(rig, child)?;
            let have: BTreeSet<&str> = c.iter().map(|(n, _, _)| n.as_str()).collect();
            (have == want && c.iter().all(|(_, s, _)| s == "connected")).then_some(c.clone())
        },
    )
}

/// The WebSocket connections the mock holds open now.
fn open_connections(rig: &Rig) -> BTreeSet<u64> {
    rig.mock
        .stats()
        .spans
        .iter()
        .filter(|s| s.closed.is_none())
        .map(|s| s.conn)
        .collect()
}

/// How many of `before` the mock has seen closed by now.
fn closed_of(rig: &Rig, before: &BTreeSet<u64>) -> usize {
    before.len() - before.intersection(&open_connections(rig)).count()
}

/// Each adapter's reconnect count, but `except`'s.
fn reconnects_but(c: &[(String, String, u64)], except: &[&str]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = c
        .iter()
        .filter(|(n, _, _)| !except.contains(&n.as_str()))
        .map(|(n, _, r)| (n.clone(), *r))
        .collect();
    v.sort();
    v
}

fn applied(out: &Output) -> String {
    assert!(out.status.success(), "{}{}", stdout(out), stderr(out));
    stdout(out)
}

#[test]
fn a_changed_table_or_a_renewed_token_restarts_that_adapter_alone() {
    let rig = rig("rachange", &[0, 1, 2, 3, 4, 5]);
    let mut gw = rig.gateway("");
    let all = ["dc", "qq", "a0", "a1", "a2", "a3", "a4", "a5"];
    let start = wait_connected(&rig, &gw, &all);
    let before = open_connections(&rig);
    assert_eq!(before.len(), all.len(), "one connection per adapter");

    // a3's own table: a3 reconnects; every other socket stays open, nobody else reconnects.
    let toml = config(&rig);
    let a3 = adapters(&rig, &[3]);
    let changed = toml.replace(
        &a3,
        &a3.replace("backoff-max = \"1s\"", "backoff-max = \"2s\""),
    );
    write_config(&rig, &changed);
    let said = applied(&reload(&rig));
    assert!(
        said.contains("adapter a3 restarted (its table changed)"),
        "{said}"
    );
    let after = wait_connected(&rig, &gw, &all);
    wait_for(
        Duration::from_secs(30),
        "a3's old connection to close",
        || (closed_of(&rig, &before) >= 1).then_some(()),
    );
    assert_eq!(closed_of(&rig, &before), 1, "only a3's connection closed");
    assert_eq!(
        reconnects_but(&start, &["a3"]),
        reconnects_but(&after, &["a3"])
    );

    // A renewed token for a1 in .env: a1 alone reconnects.
    let before = open_connections(&rig);
    let tokens: Vec<(usize, String)> = (0..6)
        .map(|i| {
            (
                i,
                if i == 1 {
                    "renewed".into()
                } else {
                    token(&rig, i)
                },
            )
        })
        .collect();
    let refs: Vec<(usize, &str)> = tokens.iter().map(|(i, t)| (*i, t.as_str())).collect();
    env_file(&rig, &refs);
    let said = applied(&reload(&rig));
    assert!(
        said.contains("adapter a1 restarted (its credential changed)"),
        "{said}"
    );
    assert!(!said.contains("a3"), "{said}");
    let later = wait_connected(&rig, &gw, &all);
    wait_for(
        Duration::from_secs(30),
        "a1's old connection to close",
        || (closed_of(&rig, &before) >= 1).then_some(()),
    );
    assert_eq!(closed_of(&rig, &before), 1, "only a1's connection closed");
    assert_eq!(
        reconnects_but(&after, &["a1", "a3"]),
        reconnects_but(&later, &["a1", "a3"])
    );
    // The same file again: nothing to do, nothing touched.
    let before = open_connections(&rig);
    let said = applied(&reload(&rig));
    assert!(said.contains("nothing changed"), "{said}");
    assert_eq!(closed_of(&rig, &before), 0);
    sigterm(&mut gw);
}

#[test]
fn adapters_added_and_removed_start_and_stop_and_their_locks_follow() {
    let rig = rig("raaddrm", &[0, 1, 2]);
    let mut gw = rig.gateway("");
    wait_connected(&rig, &gw, &["dc", "qq", "a0", "a1", "a2"]);

    // Another profile in the same home holds the token a3 is about to use.
    let other = "raother";
    let other_home = rig.home.path().join("profiles").join(other);
    std::fs::create_dir_all(&other_home).unwrap();
    std::fs::write(
        other_home.join("gateway.toml"),
        adapters(&rig, &[3]).replace("name = \"a3\"", "name = \"held\""),
    )
    .unwrap();
    let held = "raaddrm-shared-token";
    std::fs::write(other_home.join(".env"), format!("RA_A3={held}\n")).unwrap();
    let spawn_other = || {
        rig.hermes()
            .args(["gateway", "run", "--profile", other])
            .env("HERMES_LOCK_DIR", rig.home.path().join("locks"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut holder = spawn_other();
    let holder_state = other_home.join("state/gateway.json");
    wait_for(
        Duration::from_secs(60),
        "the other gateway's adapter",
        || {
            let s: Value =
                serde_json::from_str(&std::fs::read_to_string(&holder_state).ok()?).ok()?;
            (s["summary"].as_str()?.starts_with("1/1 adapters ready")).then_some(())
        },
    );

    // a2 removed, a3 added with the held token: refused, nothing touched.
    let base = config(&rig).replace(&adapters(&rig, &[2]), "");
    write_config(&rig, &format!("{base}{}", adapters(&rig, &[3])));
    let mut tokens = vec![
        (0, token(&rig, 0)),
        (1, token(&rig, 1)),
        (2, token(&rig, 2)),
    ];
    tokens.push((3, held.to_owned()));
    let refs: Vec<(usize, &str)> = tokens.iter().map(|(i, t)| (*i, t.as_str())).collect();
    env_file(&rig, &refs);
    let before = open_connections(&rig);
    let out = reload(&rig);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("token for adapter a3 already held by"),
        "{err}"
    );
    assert!(err.contains(other), "names the holder's profile: {err}");
    assert_eq!(closed_of(&rig, &before), 0, "nothing was touched");
    wait_connected(&rig, &gw, &["dc", "qq", "a0", "a1", "a2"]);

    // Once the other gateway is gone: a3 starts with its lock, a2 stops.
    sigterm(&mut holder);
    let before = wait_for(
        Duration::from_secs(30),
        "the other gateway's connection to close",
        || {
            let open = open_connections(&rig);
            (open.len() == 5).then_some(open)
        },
    );
    let said = applied(&reload(&rig));
    assert!(said.contains("adapter a3 started"), "{said}");
    assert!(said.contains("adapter a2 stopped"), "{said}");
    wait_connected(&rig, &gw, &["dc", "qq", "a0", "a1", "a3"]);
    wait_for(Duration::from_secs(30), "a2's connection to close", || {
        (closed_of(&rig, &before) >= 1).then_some(())
    });
    assert_eq!(closed_of(&rig, &before), 1, "only a2's connection closed");
    let summary = rig.state().unwrap()["summary"].as_str().unwrap().to_owned();
    assert!(summary.starts_with("5/5 adapters ready"), "{summary}");

    // a3 holds the token now: the other gateway is refused, as at any start.
    let mut refused = spawn_other();
    let status = wait_for(Duration::from_secs(30), "the other gateway to exit", || {
        refused.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(78));

    // a3 removed: its lock is free for the other gateway at once.
    write_config(&rig, &base);
    let said = applied(&reload(&rig));
    assert!(said.contains("adapter a3 stopped"), "{said}");
    let mut holder = spawn_other();
    wait_for(
        Duration::from_secs(60),
        "the other gateway to take the token",
        || {
            let s: Value =
                serde_json::from_str(&std::fs::read_to_string(&holder_state).ok()?).ok()?;
            (s["pid"] == holder.id() && s["summary"].as_str()?.starts_with("1/1 adapters ready"))
                .then_some(())
        },
    );
    sigterm(&mut holder);
    wait_connected(&rig, &gw, &["dc", "qq", "a0", "a1"]);
    sigterm(&mut gw);
}

#[test]
fn a_new_adapter_without_its_token_is_named_and_a_first_cron_job_starts_the_ticker() {
    let rig = rig("ranew", &[0]);
    let mut gw = rig.gateway("");
    wait_connected(&rig, &gw, &["dc", "qq", "a0"]);
    write_config(&rig, &format!("{}{}", config(&rig), adapters(&rig, &[7])));
    let out = reload(&rig);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("adapter a7 is new in this reload and has no credential"),
        "{err}"
    );
    assert!(err.contains("RA_A7 is not set"), "{err}");
    write_config(&rig, &config(&rig).replace(&adapters(&rig, &[7]), ""));

    // The gateway started with no cron job, so no ticker: the first job starts one.
    let marker = rig.profile_home().join("first-job.txt");
    let job = format!(
        "[[cron]]\nname = \"first\"\nschedule = \"* * * * * *\"\n\
         command = [\"/bin/sh\", \"-c\", \"echo run >> {}\"]\n",
        marker.display()
    );
    write_config(&rig, &format!("{}{job}", config(&rig)));
    let said = applied(&reload(&rig));
    assert!(said.contains("1 cron jobs applied"), "{said}");
    wait_for(Duration::from_secs(30), "the first job to run", || {
        marker.exists().then_some(())
    });
    let s = rig.state().unwrap();
    assert!(
        s["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "cron"),
        "{s}"
    );
    sigterm(&mut gw);
}

/// A cluster's standby (its etcd unreachable here, so it stays one) answers a reload: it takes
/// the new configuration, starting nothing, and refuses what it cannot take.
#[test]
fn a_standby_answers_a_reload() {
    let rig = Rig::new("rastandby", "");
    let certs = crate::tls::Certs::issue(&rig.home.path().join("certs"), "DNS:localhost");
    let cluster = format!(
        "\n[cluster]\nendpoints = [\"https://127.0.0.1:9\"]\nca = {:?}\nnode = \"ra-node\"\n",
        certs.ca.display().to_string()
    );
    let alone = config(&rig);
    let base = format!("{alone}{cluster}");
    write_config(&rig, &base);
    let mut gw = rig.gateway("");
    wait_for(Duration::from_secs(60), "the standby's state file", || {
        let s = rig.state()?;
        (s["pid"] == gw.id() && s["cluster"]["role"] == "standby").then_some(())
    });
    write_config(&rig, &format!("{base}\n[access]\nallow-users = [\"M1\"]\n"));
    let said = applied(&reload(&rig));
    assert!(said.contains("access rules applied"), "{said}");
    // A new [cluster]: the standby campaigns again with it.
    let renamed = base.replace("ra-node", "ra-other");
    write_config(&rig, &renamed);
    let said = applied(&reload(&rig));
    assert!(said.contains("the campaign starts again"), "{said}");
    wait_for(Duration::from_secs(30), "the standby's new name", || {
        let s = rig.state()?;
        (s["cluster"]["node"] == "ra-other" && s["cluster"]["role"] == "standby").then_some(())
    });
    // One it cannot read, and one without [cluster]: refused, naming why.
    let missing = rig.home.path().join("no-such-ca.pem");
    let ca = format!("{:?}", certs.ca.display().to_string());
    write_config(
        &rig,
        &renamed.replace(&ca, &format!("{:?}", missing.display().to_string())),
    );
    let out = reload(&rig);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[cluster] not applied: [cluster] ca = ")
            && stderr(&out).contains("no-such-ca.pem"),
        "{}",
        stderr(&out)
    );
    write_config(&rig, &alone);
    let out = reload(&rig);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[cluster] removed"),
        "{}",
        stderr(&out)
    );
    assert!(gw.try_wait().unwrap().is_none(), "the standby runs on");
    assert_eq!(
        rig.mock.stats().connections,
        0,
        "a standby connects nothing"
    );
    sigterm(&mut gw);
}

/// Under a real user manager, whose unit fills the environment from `.env` once at start:
/// `systemctl reload` restarts the adapter whose table changed and the one whose token was
/// renewed in `.env`, keeps the third one's connection, and the unit's main process.
#[test]
fn systemctl_reload_restarts_only_the_changed_adapters_on_a_real_user_manager() {
    let rt = crate::mock_runtime::mock_runtime();
    let mock =
        crate::mock_runtime::start_mock(&rt, hermes_svc::mock_platform::MockConfig::default());
    let table = |name: &str, max: &str| {
        format!(
            "[[adapter]]\nname = \"{name}\"\nkind = \"discord\"\ntoken-env = \"RA_{name}\"\n\
             api-base = \"{}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"{max}\"\n\n",
            mock.http_base()
        )
    };
    let toml = format!(
        "{}{}{}",
        table("d1", "1s"),
        table("d2", "1s"),
        table("d3", "1s")
    );
    let env = "RA_d1=ra-sd-1\nRA_d2=ra-sd-2\nRA_d3=ra-sd-3\n";
    let running = crate::profile_builder::ProfileTest::new("rasystemd")
        .config(&toml)
        .env(env)
        .run();
    let (m, unit) = (&running.m, &running.profile.unit);
    let state = running.profile.home.join("state/gateway.json");
    let connected = || {
        wait_for(Duration::from_secs(60), "d1, d2 and d3 connected", || {
            let s: Value = serde_json::from_str(&std::fs::read_to_string(&state).ok()?).ok()?;
            let c = s["components"].as_array()?;
            (c.len() == 3 && c.iter().all(|c| c["state"] == "connected")).then_some(())
        })
    };
    connected();
    let open = || -> BTreeSet<u64> {
        let spans = mock.stats().spans;
        spans
            .iter()
            .filter(|s| s.closed.is_none())
            .map(|s| s.conn)
            .collect()
    };
    let before = open();
    assert_eq!(before.len(), 3);

    let home = &running.profile.home;
    let edited = format!(
        "{}{}{}",
        table("d1", "1s"),
        table("d2", "2s"),
        table("d3", "1s")
    );
    std::fs::write(home.join("gateway.toml"), edited).unwrap();
    std::fs::write(home.join(".env"), env.replace("ra-sd-1", "ra-sd-1-renewed")).unwrap();
    let out = m.systemctl(&["reload", unit]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let reason = s["reload"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.contains("adapter d2 restarted (its table changed)"),
        "{reason}"
    );
    assert!(
        reason.contains("adapter d1 restarted (its credential changed)"),
        "{reason}"
    );
    assert!(!reason.contains("d3"), "{reason}");
    connected();
    wait_for(
        Duration::from_secs(30),
        "d1's and d2's old connections to close",
        || (before.difference(&open()).count() >= 2).then_some(()),
    );
    assert_eq!(
        before.difference(&open()).count(),
        2,
        "d3's connection stays open"
    );

    let props = m.show(unit);
    assert_eq!(
        crate::unit_props::main_pid(&props),
        running.pid,
        "the same process"
    );
    assert_eq!(crate::unit_props::n_restarts(&props), 0);
}

/// An adapter a reload adds is known to every reader of the events from its first message: the
/// local API serves its events with their normalised `message` (and the agent bridge, through
/// the same shared table, takes them).
#[test]
fn an_added_adapters_events_are_read_as_messages_after_the_reload() {
    let rig = rig("raread", &[0]);
    let mut gw = rig.gateway("");
    wait_connected(&rig, &gw, &["dc", "qq", "a0"]);
    write_config(&rig, &format!("{}{}", config(&rig), adapters(&rig, &[1])));
    env_file(&rig, &[(0, &token(&rig, 0)), (1, &token(&rig, 1))]);
    let out = reload(&rig);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_connected(&rig, &gw, &["dc", "qq", "a0", "a1"]);

    rig.mock.emit_dispatch(
        "MESSAGE_CREATE",
        "raread-1",
        serde_json::json!({"id": "7001", "channel_id": "2001", "guild_id": "3001",
               "author": {"id": "4001", "username": "ann"}, "content": "hello a1"}),
    );
    let socket = rig.profile_home().join("state/api/agent.sock");
    let message = wait_for(Duration::from_secs(30), "a1's event in the API", || {
        let page = crate::api_rig::http(&socket, "GET", "/v1/events?limit=100", None).json();
        page["events"]
            .as_array()?
            .iter()
            .find(|e| e["adapter"] == "a1")
            .map(|e| e["message"].clone())
    });
    assert_eq!(message["text"], "hello a1", "{message}");
    sigterm(&mut gw);
}
