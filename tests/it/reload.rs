//! `hermes-svc reload` against a real gateway process and the mock platform: a new
//! `allow-users` entry admits its sender's next message with no new connection or identify;
//! a bad edit (a syntax error, a `[gateway]` change) is refused naming the line or the table;
//! the gateway keeps running on its old rules, and the state file says so until a good
//! reload; the cron ticker takes a new job list; a storm of SIGHUPs leaves the gateway running
//! the last configuration written. Adapters reloaded one by one: `reload_adapters.rs`.
//! Profile names start with `rl`.

use std::process::{Child, Output};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::harness::{stderr, stdout, wait_for};
use crate::outbox_rig::{sigterm, Rig};

/// A QQ group message from `member`, addressing the bot.
fn from(rig: &Rig, member: &str, id: &str) {
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        id,
        json!({"author": {"member_openid": member}, "content": format!(" hello {id}"),
               "group_openid": "G1", "id": format!("msg-{id}")}),
    );
}

/// The verdict stored with the QQ message `id`: `admitted:RULE` or `refused:RULE`.
fn verdict(rig: &Rig, id: &str) -> String {
    let event = wait_for(Duration::from_secs(30), &format!("message {id}"), || {
        rig.events("qq")
            .into_iter()
            .find(|e| e.to_string().contains(&format!("msg-{id}")))
    });
    let access = &event["access"];
    let side = if access["admitted"] == true {
        "admitted"
    } else {
        "refused"
    };
    format!("{side}:{}", access["rule"].as_str().unwrap_or("?"))
}

fn reload(rig: &Rig) -> Output {
    rig.hermes()
        .args(["reload", "-p", &rig.profile, "--timeout", "60s"])
        .output()
        .unwrap()
}

fn config(rig: &Rig) -> String {
    std::fs::read_to_string(rig.profile_home().join("gateway.toml")).unwrap()
}

fn write_config(rig: &Rig, text: &str) {
    std::fs::write(rig.profile_home().join("gateway.toml"), text).unwrap();
}

/// Both adapters of this life of the gateway connected.
fn start(rig: &Rig) -> Child {
    let gw = rig.gateway("");
    rig.wait_adapter(&gw, "qq");
    rig.wait_adapter(&gw, "dc");
    gw
}

fn last_reload(rig: &Rig) -> Value {
    rig.state().map(|s| s["reload"].clone()).unwrap_or_default()
}

#[test]
fn a_new_allowed_sender_is_admitted_after_a_reload_with_no_reconnect() {
    let rig = Rig::new("rlaccess", "[access]\nallow-users = [\"M0\"]\n");
    let mut gw = start(&rig);
    from(&rig, "M1", "before");
    assert_eq!(verdict(&rig, "before"), "refused:unknown-sender");
    let before = rig.mock.stats();

    write_config(&rig, &config(&rig).replace("[\"M0\"]", "[\"M0\", \"M1\"]"));
    let out = reload(&rig);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("access rules applied"),
        "{}",
        stdout(&out)
    );

    from(&rig, "M1", "after");
    assert_eq!(verdict(&rig, "after"), "admitted:allow-users");
    let after = rig.mock.stats();
    assert_eq!(after.connections, before.connections, "no new connection");
    assert_eq!(after.identifies, before.identifies, "no new identify");
    assert_eq!(last_reload(&rig)["outcome"], "applied");
    sigterm(&mut gw);
}

#[test]
fn a_bad_edit_is_refused_with_its_line_or_adapter_and_the_old_rules_stay() {
    let rig = Rig::new("rlbad", "[access]\nallow-users = [\"M1\"]\n");
    let mut gw = start(&rig);
    let good = config(&rig);

    // A syntax error: refused with the file and line, exit 78, the gateway running on.
    let line = good.lines().count() + 1;
    write_config(&rig, &format!("{good}allow-users = oops\n"));
    let out = reload(&rig);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("gateway.toml:{line}")),
        "{}",
        stderr(&out)
    );
    assert!(gw.try_wait().unwrap().is_none(), "the gateway runs on");
    let refused = last_reload(&rig);
    assert_eq!(refused["outcome"], "refused", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("gateway.toml:{line}")),
        "{refused}"
    );
    from(&rig, "M1", "kept");
    assert_eq!(verdict(&rig, "kept"), "admitted:allow-users");

    // [gateway]: refused naming it and the restart that applies it, no adapter touched.
    let before = rig.mock.stats();
    write_config(&rig, &format!("[gateway]\nmax-outage = \"1h\"\n\n{good}"));
    let out = reload(&rig);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("[gateway] changed"), "{err}");
    assert!(err.contains("a restart applies it"), "{err}");

    // The good file again: applied, and the refusal is gone from the state file.
    write_config(&rig, &good);
    let out = reload(&rig);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(last_reload(&rig)["outcome"], "applied");
    let after = rig.mock.stats();
    assert_eq!(
        after.identifies, before.identifies,
        "no adapter was touched"
    );
    sigterm(&mut gw);
}

#[test]
fn a_storm_of_sighups_leaves_the_gateway_on_the_last_configuration() {
    let rig = Rig::new("rlstorm", "[access]\nallow-users = [\"M0\"]\n");
    let mut gw = start(&rig);
    let base = config(&rig);
    let pid = Pid::from_raw(gw.id() as i32);
    // Each version written whole (a rename, as a careful editor saves): a reload reads
    // whatever the file is at that moment, and a half-written one would be applied as such.
    let replace = |text: &str| {
        let tmp = rig.profile_home().join("gateway.toml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, rig.profile_home().join("gateway.toml")).unwrap();
    };
    for i in 0..100 {
        replace(&base.replace("[\"M0\"]", &format!("[\"M{}\"]", i % 7)));
        kill(pid, Signal::SIGHUP).unwrap();
    }
    // The last word: M9 alone. `reload` waits for a reload that began after it was written.
    replace(&base.replace("[\"M0\"]", "[\"M9\"]"));
    let out = reload(&rig);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(gw.try_wait().unwrap().is_none(), "the gateway runs on");
    from(&rig, "M9", "last");
    assert_eq!(verdict(&rig, "last"), "admitted:allow-users");
    from(&rig, "M6", "earlier");
    assert_eq!(verdict(&rig, "earlier"), "refused:unknown-sender");
    sigterm(&mut gw);
}

fn lines(rig: &Rig, file: &str) -> usize {
    std::fs::read_to_string(rig.profile_home().join(file))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn the_cron_ticker_takes_the_new_job_list() {
    let job = |name: &str, file: &str| {
        format!(
            "[[cron]]\nname = \"{name}\"\nschedule = \"* * * * * *\"\n\
             command = [\"/bin/sh\", \"-c\", \"echo run >> {file}\"]\n"
        )
    };
    let rig = Rig::new("rlcron", &job("tick", "tick.txt"));
    let mut gw = start(&rig);
    wait_for(Duration::from_secs(30), "the first job to run", || {
        (lines(&rig, "tick.txt") > 0).then_some(())
    });
    let before = rig.mock.stats();
    write_config(
        &rig,
        &config(&rig).replace(&job("tick", "tick.txt"), &job("tock", "tock.txt")),
    );
    let out = reload(&rig);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("1 cron jobs applied"),
        "{}",
        stdout(&out)
    );
    // The new job runs twice, and the old one, every second before, no longer runs meanwhile.
    wait_for(Duration::from_secs(30), "the new job to run", || {
        (lines(&rig, "tock.txt") >= 1).then_some(())
    });
    let ticks = lines(&rig, "tick.txt");
    wait_for(Duration::from_secs(30), "the new job to run again", || {
        (lines(&rig, "tock.txt") >= 3).then_some(())
    });
    assert_eq!(lines(&rig, "tick.txt"), ticks, "the removed job ran on");
    assert_eq!(rig.mock.stats().identifies, before.identifies);
    sigterm(&mut gw);
}

/// `systemctl --user reload` on a real user manager runs `ExecReload=` (`hermes-svc reload`)
/// and returns with its result: applied with the unit's main process and connection kept,
/// refused (a failed reload job) with the gateway running on and the state file saying why.
#[test]
fn systemctl_reload_applies_or_refuses_on_a_real_user_manager() {
    let rt = crate::mock_runtime::mock_runtime();
    let mock =
        crate::mock_runtime::start_mock(&rt, hermes_svc::mock_platform::MockConfig::default());
    let toml = format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"RL_TOKEN\"\n\
         api-base = \"{}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n\
         [access]\nallow-users = [\"1\"]\n",
        mock.http_base()
    );
    let running = crate::profile_builder::ProfileTest::new("rlsystemd")
        .config(&toml)
        .env("RL_TOKEN=rl-systemd-token\n")
        .run();
    let (m, unit) = (&running.m, &running.profile.unit);
    let state = running.profile.home.join("state/gateway.json");
    let reload_of = || -> Value {
        let text = std::fs::read_to_string(&state).unwrap_or_default();
        serde_json::from_str::<Value>(&text).unwrap_or_default()["reload"].clone()
    };
    wait_for(Duration::from_secs(30), "the adapter to connect", || {
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&state).ok()?).ok()?;
        let dc = s["components"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "dc")?
            .clone();
        (dc["state"] == "connected").then_some(())
    });
    let identifies = mock.stats().identifies;
    let home = &running.profile.home;

    std::fs::write(
        home.join("gateway.toml"),
        toml.replace("[\"1\"]", "[\"1\", \"2\"]"),
    )
    .unwrap();
    let out = m.systemctl(&["reload", unit]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reload_of()["outcome"], "applied", "{}", reload_of());

    std::fs::write(home.join("gateway.toml"), format!("{toml}[[[\n")).unwrap();
    let out = m.systemctl(&["reload", unit]);
    assert!(!out.status.success(), "a refused reload fails the job");
    let refused = reload_of();
    assert_eq!(refused["outcome"], "refused", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("gateway.toml:"),
        "{refused}"
    );

    let status = stdout(&m.hermes(&["status", "--profile", "rlsystemd"]));
    assert!(status.contains("REFUSED"), "{status}");
    assert!(status.contains("gateway.toml:"), "{status}");
    let doctor = stdout(&m.hermes(&["doctor", "--json"]));
    assert!(doctor.contains("HSV032"), "{doctor}");

    let props = m.show(unit);
    assert_eq!(crate::unit_props::get(&props, "ActiveState"), "active");
    assert_eq!(
        crate::unit_props::main_pid(&props),
        running.pid,
        "the same process"
    );
    assert_eq!(crate::unit_props::n_restarts(&props), 0);
    assert_eq!(mock.stats().identifies, identifies, "no new identify");
}
