//! adopt's mapping of a Hermes home written as Hermes's own setup writes one: the gateway
//! configuration it makes is one the real binary loads (doctor finds no error in it), the
//! secrets land where the gateway reads them, and nothing Hermes keeps holds an adopted one.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use hermes_svc::adopt::{hermes_home, mapping};

use crate::harness::{scratch_dir, stderr, stdout, BIN};

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
