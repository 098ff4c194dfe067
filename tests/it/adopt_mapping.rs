//! adopt's mapping of a Hermes home written as Hermes's own setup writes one: the gateway
//! configuration it makes is one the real binary loads (doctor finds no error in it), the
//! secrets land where the gateway reads them, and nothing Hermes keeps holds an adopted one.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use hermes_svc::adopt::{cron, mapping, pairing};
use hermes_svc::hermes_home;

use crate::harness::{scratch_dir, stderr, stdout, BIN};
use crate::hermes_rig::venv;

const ENV: &str = "\
# Hermes's .env, as `hermes setup` and hand edits leave it
OPENROUTER_API_KEY=sk-or-v1-model-key
TELEGRAM_BOT_TOKEN=7000000001:AAtelegram-secret
TELEGRAM_ALLOWED_USERS=111111111,222222222
TELEGRAM_HOME_CHANNEL=-1001234567890
export DISCORD_BOT_TOKEN=\"discord.secret.token\"
DISCORD_ALLOWED_USERS=123456789012345678
DISCORD_HOME_CHANNEL=234567890123456789
SLACK_BOT_TOKEN=xoxb-slack-secret
SLACK_APP_TOKEN=xapp-slack-secret
SLACK_ALLOWED_USERS=U0123ABCD
WEIXIN_TOKEN=weixin-secret-token
WEIXIN_ACCOUNT_ID=b0f5@im.bot
WEIXIN_BASE_URL=https://ilinkai.weixin.qq.com
WEIXIN_ALLOWED_USERS=o9cq80zL8rVhWxG4@im.wechat
FEISHU_APP_ID=cli_a1b2c3d4e5f6a7b8
MATRIX_HOMESERVER=https://matrix.example.org
MATRIX_USER_ID=@hermes:example.org
WHATSAPP_ENABLED=true
GATEWAY_ALLOWED_USERS=999999999
";

const CONFIG: &str = "\
model:
  provider: custom
  default: m
FEISHU_APP_SECRET: feishu-secret-value
platforms:
  matrix:
    enabled: true
    token: matrix-secret-token
";

const SECRETS: &[&str] = &[
    "AAtelegram-secret",
    "discord.secret.token",
    "xoxb-slack-secret",
    "xapp-slack-secret",
    "weixin-secret-token",
    "feishu-secret-value",
    "matrix-secret-token",
];

fn write(path: &Path, bytes: &[u8], mode: u32) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path.parent().unwrap())
        .unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_mapped_hermes_home_is_a_profile_the_gateway_loads() {
    let dir = scratch_dir("adopt-map");
    let hermes = dir.path().join("hermes-home");
    write(&hermes.join(".env"), ENV.as_bytes(), 0o600);
    write(&hermes.join("config.yaml"), CONFIG.as_bytes(), 0o600);

    let m = mapping::map(&hermes_home::read(&hermes).unwrap());
    assert_eq!(m.refusal(), None);
    let mut kinds: Vec<_> = m.adopted.iter().map(|a| a.kind).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["discord", "feishu", "matrix", "slack", "telegram", "weixin"]
    );
    assert_eq!(m.left.len(), 1, "{:?}", m.left);
    assert_eq!(m.left[0].0, "whatsapp");
    let tg = m.adopted.iter().find(|a| a.kind == "telegram").unwrap();
    assert_eq!(tg.home_target.as_deref(), Some("chat:-1001234567890"));

    // What Hermes keeps holds no adopted secret; the gateway's halves hold them all.
    let kept = format!("{}{}", m.hermes_env, m.hermes_config.as_deref().unwrap());
    let gateway = format!(
        "{}{}",
        m.gateway_env,
        String::from_utf8_lossy(&m.files[0].1)
    );
    for s in SECRETS {
        assert!(!kept.contains(s), "{s} left with Hermes");
        assert!(gateway.contains(s), "{s} not given to the gateway");
    }
    assert!(m
        .hermes_env
        .contains("OPENROUTER_API_KEY=sk-or-v1-model-key\n"));
    assert!(m.hermes_env.contains("WHATSAPP_ENABLED=true\n"));

    // The profile, written as adopt's effects will, and checked by the real binary.
    let hermes_home = dir.path().join("svc");
    let profile = hermes_home.join("profiles/adoptmap");
    write(
        &profile.join("gateway.toml"),
        m.gateway_toml.as_bytes(),
        0o600,
    );
    write(&profile.join(".env"), m.gateway_env.as_bytes(), 0o600);
    for (path, bytes, mode) in &m.files {
        write(&profile.join(path), bytes, *mode);
    }
    let xdg = dir.path().join("xdg");
    std::fs::DirBuilder::new().mode(0o700).create(&xdg).unwrap();
    let doctor = || {
        Command::new(BIN)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.path())
            .env("HERMES_HOME", &hermes_home)
            .env("XDG_RUNTIME_DIR", &xdg)
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}/nowhere", xdg.display()),
            )
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/nonexistent/adopt-bus",
            )
            .args(["doctor", "--profile", "adoptmap", "--json"])
            .output()
            .unwrap()
    };
    let about_config = |out: &std::process::Output| -> Vec<serde_json::Value> {
        let report: serde_json::Value = serde_json::from_str(&stdout(out))
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(out), stderr(out)));
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| ["HSV012", "HSV015", "HSV021"].contains(&f["id"].as_str().unwrap_or("")))
            .cloned()
            .collect()
    };
    let out = doctor();
    let found = about_config(&out);
    assert!(found.is_empty(), "{found:#?}\n{}", m.gateway_toml);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    for s in SECRETS {
        assert!(!text.contains(s), "doctor printed {s}");
    }
    // The check is real: the same file with one key misspelt is a finding.
    let broken = m.gateway_toml.replace("token-env", "tokn-env");
    write(&profile.join("gateway.toml"), broken.as_bytes(), 0o600);
    let found = about_config(&doctor());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["id"], "HSV015");
}

/// Hermes's own Python, in a Hermes home `home`: what it prints.
fn hermes_python(home: &Path, script: &str) -> String {
    let out = Command::new(venv().join("bin/python"))
        .env("HOME", home.parent().unwrap())
        .env("HERMES_HOME", home)
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The real Hermes makes the pairings and cron jobs; adopt carries them; the gateway's
/// `pairing approve` takes the code Hermes sent, and Hermes's own scheduler reads the
/// rewritten jobs as deliveries through the Relay.
#[test]
fn hermess_own_pairings_and_cron_jobs_carry_over() {
    let dir = scratch_dir("adopt-carry");
    let hermes = dir.path().join("hermes-home");
    write(
        &hermes.join(".env"),
        b"TELEGRAM_BOT_TOKEN=7000000001:AAsecret\nTELEGRAM_HOME_CHANNEL=-1001234567890\n",
        0o600,
    );
    let made = hermes_python(
        &hermes,
        r#"
import json
from gateway.pairing import PairingStore
from cron.jobs import create_job
s = PairingStore()
code = s.generate_code("telegram", "777", "Zed")
s.approve_code("telegram", s.generate_code("telegram", "778", "Amy"))
create_job(prompt="home", schedule="every 1h", deliver="telegram")
create_job(prompt="origin", schedule="every 2h", origin={"platform": "telegram", "chat_id": "-100555", "chat_type": "group"})
create_job(prompt="local", schedule="every 3h", deliver="local")
print(json.dumps({"code": code}))
"#,
    );
    let code = serde_json::from_str::<serde_json::Value>(&made).unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();

    let home = hermes_home::read(&hermes).unwrap();
    let m = mapping::map(&home);
    assert_eq!(m.refusal(), None);
    let now = hermes_svc::access::pairing::now();
    let carried = pairing::carried(&home.pairing_files, &[("telegram", "telegram")], now);
    assert_eq!(carried.pending.len(), 1, "{carried:?}");

    let svc = dir.path().join("svc");
    let profile = svc.join("profiles/carry");
    write(
        &profile.join("gateway.toml"),
        m.gateway_toml.as_bytes(),
        0o600,
    );
    write(&profile.join(".env"), m.gateway_env.as_bytes(), 0o600);
    let store = hermes_svc::access::pairing::Store::new(&profile.join("access"));
    assert!(!pairing::merge(&store, &carried).unwrap().is_empty());
    assert!(
        pairing::merge(&store, &carried).unwrap().is_empty(),
        "a re-run adds nothing"
    );
    let pairing_cmd = |args: &[&str]| {
        Command::new(BIN)
            .env("HOME", dir.path())
            .env("HERMES_HOME", &svc)
            .arg("pairing")
            .args(args)
            .output()
            .unwrap()
    };
    let out = pairing_cmd(&["approve", "-p", "carry", &code]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let out = pairing_cmd(&["list", "-p", "carry", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut approved: Vec<_> = list["approved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["adapter"].as_str().unwrap(),
                a["sender"].as_str().unwrap(),
            )
        })
        .collect();
    approved.sort_unstable();
    assert_eq!(approved, [("telegram", "777"), ("telegram", "778")]);

    let jobs = home.cron_jobs.as_deref().unwrap();
    let rewrite = cron::rewrite(jobs, &m.adopted).unwrap();
    assert_eq!(rewrite.changes.len(), 2, "{:?}", rewrite.changes);
    write(
        &hermes.join("cron/jobs.json"),
        rewrite.text.as_bytes(),
        0o600,
    );
    let targets = hermes_python(
        &hermes,
        r#"
import json
from cron.jobs import load_jobs
from cron.scheduler import _resolve_delivery_targets
print(json.dumps([[t["platform"], t["chat_id"]] for j in load_jobs() for t in _resolve_delivery_targets(j)]))
"#,
    );
    let targets: Vec<(String, String)> = serde_json::from_str(&targets).unwrap();
    assert_eq!(
        targets,
        [
            (
                "relay".to_owned(),
                "telegram/chat:-1001234567890".to_owned()
            ),
            ("relay".to_owned(), "telegram/chat:-100555".to_owned()),
        ]
    );
    let (back, kept) = cron::restore(&rewrite.text, &rewrite.changes).unwrap();
    assert_eq!((back.as_str(), kept.len()), (jobs, 0));
}
