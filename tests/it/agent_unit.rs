//! The agent unit (`install --agent hermes`) under a real systemd user manager, with the real
//! Hermes (hermes-agent 0.19.0) in it: installed beside the gateway, started after the gateway's
//! Relay listens, answering through it; stopped with the gateway (Hermes's exit 1 on SIGTERM is
//! a clean stop); restarted on 75 and left down on 78; holding no platform credential even when
//! one is in the manager's environment, so the platform sees one session per credential, and
//! staying in its own home whatever `hermes profile use` made sticky; gone with `uninstall`. Profile names start with `au`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hermes_svc::mock_platform::MockConfig;
use serde_json::json;

use crate::doctor::{doctor, findings};
use crate::harness::free_port;
use crate::harness::{scratch_dir, wait_for, Manager};
use crate::hermes_rig::{config_yaml, start_model, venv, Proc};
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::profile_builder::ProfileTest;
use crate::unit_props::n_restarts;

const PROFILE: &str = "auhermes";
/// The gateway's token, under the very name Hermes's own Discord adapter reads.
const TOKEN: &str = "au-discord-t0ken-77c1";

fn u64_prop(m: &Manager, unit: &str, name: &str) -> u64 {
    m.prop(unit, name).parse().unwrap_or(0)
}

#[test]
fn the_agent_unit_runs_hermes_beside_the_gateway_and_hermes_holds_no_platform() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let scratch = scratch_dir("au-model");
    let (model, model_port) = start_model(&scratch.path().join("model.log"));
    // Killed when the test ends, however it ends.
    let _model = Proc(model);
    let port = free_port();
    let toml = format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"DISCORD_BOT_TOKEN\"\n\
         api-base = \"{}\"\n\n{}[agent]\nkind = \"hermes-relay\"\nport = {port}\n",
        mock.http_base(),
        crate::hermes_rig::OPEN
    );
    let hermes = venv().join("bin/hermes");
    let m = &Manager::boot();
    // A platform credential every unit of this manager inherits: the agent must not pass it on.
    let out = m.systemctl(&["set-environment", &format!("DISCORD_BOT_TOKEN={TOKEN}")]);
    assert!(out.status.success(), "{out:?}");
    let profile = ProfileTest::new(PROFILE)
        .config(&toml)
        .env("")
        .install_args(&[
            "--agent",
            "hermes",
            "--agent-exec",
            hermes.to_str().unwrap(),
        ])
        .write(m);
    let agent_home = profile.home.join("agent/hermes");
    fs::create_dir_all(&agent_home).unwrap();
    fs::write(agent_home.join("config.yaml"), config_yaml(model_port)).unwrap();
    // A sticky `hermes profile use auhermes`, in the Hermes root of the profile homes and in
    // the agent's home (Hermes's root for a home outside `~/.hermes`): Hermes must follow
    // neither into the gateway's home, where the platform tokens are.
    let profiles = profile.home.parent().unwrap();
    assert!(profiles.ends_with("profiles"), "{profiles:?}");
    for root in [profiles.parent().unwrap(), agent_home.as_path()] {
        fs::write(root.join("active_profile"), PROFILE).unwrap();
    }
    let gateway = profile.unit.clone();
    let agent = format!("hermes-agent-{PROFILE}.service");
    let agent_log = m.capture_logs(&agent);
    let locks = scratch_dir("au-locks");
    profile.install_ok(m, locks.path());

    // Installed beside the gateway, bound to it, and started after its listener.
    m.wait_active(&gateway);
    m.wait_active(&agent);
    for (name, want) in [
        ("After", &gateway),
        ("PartOf", &gateway),
        ("Requires", &gateway),
    ] {
        assert!(m.prop(&agent, name).contains(want.as_str()), "{name}");
    }
    assert!(
        m.prop(&gateway, "Wants").contains(&agent),
        "starting the gateway starts the agent"
    );
    let ready = u64_prop(m, &gateway, "ActiveEnterTimestampMonotonic");
    let started = u64_prop(m, &agent, "ExecMainStartTimestampMonotonic");
    assert!(
        ready > 0 && started >= ready,
        "the agent started ({started}) after the gateway was ready ({ready})"
    );
    let state = profile.home.join("state/gateway.json");
    let connected = || {
        let s: serde_json::Value = serde_json::from_str(&fs::read_to_string(&state).ok()?).ok()?;
        (s["agent"]["connected"] == true).then_some(())
    };
    wait_for(Duration::from_secs(60), "Hermes to dial the Relay", || {
        connected().or_else(|| {
            assert!(
                m.prop(&agent, "ActiveState") != "failed",
                "the agent failed:\n{}",
                fs::read_to_string(&agent_log).unwrap_or_default()
            );
            None
        })
    });

    // A message is answered once, in its channel; one Discord session for the one token.
    mock.emit_dispatch(
        "MESSAGE_CREATE",
        "au-1",
        json!({"id": "9001", "channel_id": "2001", "guild_id": "3001",
               "author": {"id": "4001", "username": "ann"}, "content": "hello unit"}),
    );
    let answers = wait_for(Duration::from_secs(60), "Hermes's answer", || {
        let posts: Vec<_> = mock
            .posts()
            .into_iter()
            .filter(|p| p.content.contains("echo: hello unit"))
            .collect();
        (!posts.is_empty()).then_some(posts)
    });
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].target_id, "2001");
    assert_eq!(answers[0].reply_to.as_deref(), Some("9001"));
    assert_eq!(mock.stats().identifies, 1, "one session for the token");
    let hermes_state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(agent_home.join("gateway_state.json")).unwrap())
            .unwrap();
    assert!(
        !profile.home.join("gateway_state.json").exists(),
        "Hermes stayed in its own home, whatever active_profile says"
    );
    let platforms: Vec<&String> = hermes_state["platforms"]
        .as_object()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    assert!(
        platforms.iter().all(|p| p.as_str() == "relay"),
        "Hermes connects only its Relay: {platforms:?}"
    );
    let environ = fs::read(format!("/proc/{}/environ", m.main_pid(&agent))).unwrap();
    assert!(
        !String::from_utf8_lossy(&environ).contains(TOKEN),
        "the token is not in Hermes's environment"
    );
    for text in [
        fs::read_to_string(m.unit_dir().join(&agent)).unwrap(),
        String::from_utf8_lossy(&m.systemctl(&["show", &agent]).stdout).into_owned(),
    ] {
        let secret = fs::read_to_string(profile.home.join("agent/relay-secret")).unwrap();
        assert!(
            !text.contains(secret.trim()),
            "the relay secret is not shown"
        );
    }

    // doctor: a Hermes that connects only its Relay is no finding (HSV024's near miss).
    let hsv024 = |m: &Manager| -> Vec<serde_json::Value> {
        findings(&doctor(m, &["--json"]))
            .into_iter()
            .filter(|f| f["id"] == "HSV024")
            .collect()
    };
    assert_eq!(hsv024(m), Vec::<serde_json::Value>::new());

    // Stopped with the gateway: SIGTERM ends Hermes with 1, a clean stop.
    m.hermes_ok(&["stop", "--profile", PROFILE]);
    wait_for(Duration::from_secs(60), "the agent to stop", || {
        (m.prop(&agent, "ActiveState") == "inactive").then_some(())
    });
    assert_eq!(m.prop(&agent, "Result"), "success");
    m.hermes_ok(&["start", "--profile", PROFILE]);
    m.wait_active(&agent);

    // A platform token in Hermes's own .env: refused with 78, which is not restarted.
    fs::write(
        agent_home.join(".env"),
        format!("DISCORD_BOT_TOKEN={TOKEN}\n"),
    )
    .unwrap();
    let before = n_restarts(&m.show(&agent));
    let out = m.systemctl(&["restart", &agent]);
    assert!(out.status.success(), "{out:?}");
    wait_for(Duration::from_secs(30), "the agent to refuse", || {
        (m.prop(&agent, "ActiveState") == "failed").then_some(())
    });
    assert_eq!(m.prop(&agent, "ExecMainStatus"), "78");
    assert_eq!(n_restarts(&m.show(&agent)), before, "78 is not restarted");
    let log = fs::read_to_string(&agent_log).unwrap_or_default();
    assert!(
        log.contains("DISCORD_BOT_TOKEN") && log.contains("agent/hermes/.env"),
        "the refusal names the key and the file:\n{log}"
    );
    assert!(!log.contains(TOKEN), "never the value");
    let found = hsv024(m);
    assert_eq!(found.len(), 1, "{found:?}");
    let text = found[0].to_string();
    assert!(
        text.contains("DISCORD_BOT_TOKEN") && text.contains("adapter dc") && !text.contains(TOKEN),
        "{text}"
    );
    fs::remove_file(agent_home.join(".env")).unwrap();

    // The same token in Hermes's config.yaml, as a platform block's token and as a top-level
    // key (Hermes bridges top-level scalars into its environment): refused the same way.
    let config = fs::read_to_string(agent_home.join("config.yaml")).unwrap();
    for (extra, key) in [
        (
            format!("platforms:\n  discord:\n    enabled: true\n    token: \"{TOKEN}\"\n"),
            "platforms.discord.token",
        ),
        (format!("DISCORD_BOT_TOKEN: {TOKEN}\n"), "DISCORD_BOT_TOKEN"),
    ] {
        fs::write(agent_home.join("config.yaml"), format!("{config}{extra}")).unwrap();
        let _ = fs::remove_file(&agent_log);
        let out = m.systemctl(&["restart", &agent]);
        assert!(out.status.success(), "{out:?}");
        wait_for(Duration::from_secs(30), "the agent to refuse", || {
            (m.prop(&agent, "ActiveState") == "failed").then_some(())
        });
        assert_eq!(m.prop(&agent, "ExecMainStatus"), "78");
        let log = fs::read_to_string(&agent_log).unwrap_or_default();
        assert!(
            log.contains(key) && log.contains("agent/hermes/config.yaml") && !log.contains(TOKEN),
            "the refusal names the key and the file, never the value:\n{log}"
        );
        let found = hsv024(m);
        assert_eq!(found.len(), 1, "{found:?}");
        let text = found[0].to_string();
        assert!(
            text.contains(key) && text.contains("config.yaml") && !text.contains(TOKEN),
            "{text}"
        );
    }
    fs::write(agent_home.join("config.yaml"), config).unwrap();

    // A Hermes that exits 75 is restarted: a stand-in program, since Hermes exits 75 only when
    // a person asks it to restart.
    let stand_in = scratch.path().join("hermes-75");
    fs::write(&stand_in, "#!/bin/sh\nexit 75\n").unwrap();
    fs::set_permissions(&stand_in, fs::Permissions::from_mode(0o755)).unwrap();
    let lock_env = format!("HERMES_LOCK_DIR={}", locks.path().display());
    m.hermes_ok(&[
        "install",
        "--profile",
        PROFILE,
        "--env",
        &lock_env,
        "--agent",
        "hermes",
        "--agent-exec",
        stand_in.to_str().unwrap(),
    ]);
    wait_for(
        Duration::from_secs(30),
        "exit 75 to wait for its restart",
        || {
            let p = m.show(&agent);
            (p["SubState"] == "auto-restart" && p["ExecMainStatus"] == "75").then_some(())
        },
    );
    wait_for(Duration::from_secs(30), "the restart after 75", || {
        (n_restarts(&m.show(&agent)) > before).then_some(())
    });

    // Uninstall takes both units away.
    m.hermes_ok(&["uninstall", "--profile", PROFILE]);
    assert!(!m.unit_dir().join(&agent).exists());
    assert!(!m.unit_dir().join(&gateway).exists());
}
