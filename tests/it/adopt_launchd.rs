//! `hermes-svc adopt` under launchd, with the behaving fake `launchctl` (tests/it/launchd_cli.rs)
//! and the plist Hermes 0.19.0's own installer renders (`generate_launchd_plist()`): Hermes's
//! job is booted out before ours is bootstrapped, and `--undo` bootstraps it again with every
//! file as it was.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::hermes_rig::venv;
use crate::launchd_cli::Mac;

#[test]
fn adopt_under_launchd_boots_hermes_out_first_and_undo_brings_it_back() {
    let mac = Mac::new();
    let home = mac.home.path().join(".hermes/profiles/adl");
    fs::create_dir_all(home.join("memories")).unwrap();
    fs::write(
        home.join(".env"),
        "TELEGRAM_BOT_TOKEN=123456:adl-token\nTELEGRAM_ALLOWED_USERS=1001\nOPENAI_API_KEY=sk-adl\n",
    )
    .unwrap();
    fs::set_permissions(home.join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(home.join("config.yaml"), "model:\n  default: fake-model\n").unwrap();
    fs::write(home.join("memories/MEMORY.md"), "tea\n").unwrap();
    let out = std::process::Command::new(venv().join("bin/python"))
        .args([
            "-c",
            "from hermes_cli.gateway import generate_launchd_plist as g; print(g(), end='')",
        ])
        .env("HOME", mac.home.path())
        .env("HERMES_HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let label = "ai.hermes.gateway-adl";
    let theirs = mac.agents().join(format!("{label}.plist"));
    fs::create_dir_all(mac.agents()).unwrap();
    fs::write(&theirs, &out.stdout).unwrap();
    mac.mark(&format!("loaded/{label}"), "");
    let before: Vec<_> = [home.join(".env"), home.join("config.yaml"), theirs.clone()]
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    mac.take_calls();

    let hermes = venv().join("bin/hermes");
    let out = mac.ok(&[
        "adopt",
        "--profile",
        "adl",
        "--agent-exec",
        hermes.to_str().unwrap(),
    ]);
    assert!(out.contains("adopted"), "{out}");
    let calls = mac.take_calls();
    let at = |what: &str| {
        calls
            .iter()
            .position(|c| c.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} in {calls:#?}"))
    };
    assert!(
        at("bootout gui/") < at("bootstrap"),
        "Hermes's job is out before ours is in: {calls:#?}"
    );
    assert!(!mac.loaded(label));
    assert!(mac.loaded("ai.hermes.gateway.adl") && mac.loaded("ai.hermes.agent.adl"));
    assert!(!theirs.exists(), "Hermes's plist moved aside");
    let hermes_env = fs::read_to_string(home.join("agent/hermes/.env")).unwrap();
    assert!(!hermes_env.contains("adl-token") && hermes_env.contains("OPENAI_API_KEY=sk-adl"));
    assert!(home.join("agent/hermes/memories/MEMORY.md").exists());

    let out = mac.ok(&["adopt", "--profile", "adl", "--undo"]);
    assert!(out.contains("undone"), "{out}");
    assert!(mac.loaded(label), "Hermes's job bootstrapped again");
    assert!(!mac.loaded("ai.hermes.gateway.adl") && !mac.loaded("ai.hermes.agent.adl"));
    let after: Vec<_> = [home.join(".env"), home.join("config.yaml"), theirs.clone()]
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    assert_eq!(before, after, "every file as it was");
    assert!(home.join("memories/MEMORY.md").exists());
    assert!(!home.join("gateway.toml").exists() && !home.join("agent/adopt").exists());
}
