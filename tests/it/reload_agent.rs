//! A reload that changes `[agent]`: the agent link starts again on the new section while every
//! adapter keeps its connection, with the real Hermes agent behind the OpenAI bridge; an edit
//! the link could not start on is refused before anything stops, and the running link goes on
//! answering. Profile names start with `rg`.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{free_port, stderr, stdout, wait_for, BIN};
use crate::hermes_rig::{signal, stop, Rig};
use nix::sys::signal::Signal;

const ALLOWED: i64 = 1001;

fn agent(port: u16, timeout: &str, key_env: &str) -> String {
    format!(
        "[access]\nallow-users = [\"{ALLOWED}\"]\n\n\
         [agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:{port}/v1\"\n\
         key-env = \"{key_env}\"\nturn-timeout = \"{timeout}\"\n"
    )
}

fn reload(rig: &Rig) -> Output {
    std::process::Command::new(BIN)
        .args(["reload", "-p", &rig.profile, "--timeout", "60s"])
        .env("HERMES_HOME", rig.home.path())
        .output()
        .unwrap()
}

/// Each adapter's reconnect count, from the state file.
fn reconnects(rig: &Rig) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    state["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] != "cron")
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            (name, c["reconnects"].as_u64().unwrap_or(0))
        })
        .collect()
}

/// Swap the `[access]`/`[agent]` head of gateway.toml for `head`, keeping the adapters.
fn set_head(rig: &Rig, old: &str, head: &str) {
    let path = rig.profile_home().join("gateway.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(old), "{text}");
    std::fs::write(&path, text.replacen(old, head, 1)).unwrap();
}

#[test]
fn a_changed_agent_section_starts_the_link_again_and_no_adapter_reconnects() {
    let api = free_port();
    let first = agent(api, "60s", "HA_API_KEY");
    let rig = Rig::new("rgagent", &first);
    let mut hermes = rig.hermes_api(api);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    rig.mock.telegram_emit_text(ALLOWED, "before the reload");
    assert_eq!(rig.wait_post("echo: before the reload").len(), 1);
    let before = reconnects(&rig);

    let second = agent(api, "90s", "HA_API_KEY");
    set_head(&rig, &first, &second);
    let out = reload(&rig);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("agent started again"),
        "{}",
        stdout(&out)
    );
    rig.mock.telegram_emit_text(ALLOWED, "after the reload");
    assert_eq!(rig.wait_post("echo: after the reload").len(), 1);
    assert_eq!(reconnects(&rig), before, "no adapter reconnected");

    // A key the link cannot start with: refused, named, and the running link still answers.
    set_head(&rig, &second, &agent(api, "90s", "RG_NO_SUCH_KEY"));
    let out = reload(&rig);
    assert_eq!(
        out.status.code(),
        Some(78),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains("RG_NO_SUCH_KEY"), "{}", stderr(&out));
    rig.mock.telegram_emit_text(ALLOWED, "after the refusal");
    assert_eq!(rig.wait_post("echo: after the refusal").len(), 1);
    let state = wait_for(Duration::from_secs(10), "the refusal in status", || {
        let text = std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?;
        let s: Value = serde_json::from_str(&text).ok()?;
        (s["reload"]["outcome"] == "refused").then_some(s)
    });
    assert!(
        state["reload"]["reason"]
            .as_str()
            .unwrap()
            .contains("RG_NO_SUCH_KEY"),
        "{state}"
    );
    assert_eq!(reconnects(&rig), before, "no adapter reconnected");
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}
