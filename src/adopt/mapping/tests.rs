use super::*;

fn home(files: &[(&str, &str)]) -> (tempfile::TempDir, HermesHome) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let home = crate::hermes_home::read(dir.path()).unwrap();
    (dir, home)
}

const ENV: &str = "# model\nOPENROUTER_API_KEY=sk-or-secret\nexport TELEGRAM_BOT_TOKEN=\"123:tg-secret\"\nTELEGRAM_ALLOWED_USERS=111,222\nTELEGRAM_HOME_CHANNEL=-1001\nTELEGRAM_REACTIONS=true\n\nDISCORD_BOT_TOKEN=dc-secret\nDISCORD_ALLOWED_USERS=333\nWHATSAPP_ENABLED=true\nGATEWAY_ALLOWED_USERS=999\nHTTPS_PROXY=http://proxy.lan:3128\n";

const YAML: &str = "model:\n  default: m\nFEISHU_APP_SECRET: fs-secret\nFEISHU_APP_ID: cli_a1\nplatforms:\n  matrix:\n    enabled: true\n    token: mx-secret\n    extra:\n      homeserver: https://matrix.example.org\n      user_id: \"@bot:example.org\"\n";

#[test]
fn a_hermes_home_becomes_one_gateway_config_and_two_env_halves() {
    let (_d, h) = home(&[(".env", ENV), ("config.yaml", YAML)]);
    let m = map(&h);
    assert!(m.refused.is_empty(), "{:?}", m.refused);
    let kinds: Vec<_> = m.adopted.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, ["discord", "feishu", "matrix", "telegram"]);
    assert_eq!(
        m.left.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
        ["whatsapp"]
    );
    let config =
        crate::config::parse::<crate::platform::Protocol>(Path::new("g.toml"), &m.gateway_toml)
            .unwrap_or_else(|e| panic!("{e}\n{}", m.gateway_toml));
    assert_eq!(config.adapters.len(), 4);
    assert_eq!(
        m.gateway_env,
        "TELEGRAM_BOT_TOKEN=123:tg-secret\nDISCORD_BOT_TOKEN=dc-secret\nFEISHU_APP_SECRET=fs-secret\nMATRIX_ACCESS_TOKEN=mx-secret\n"
    );
    assert_eq!(
        m.hermes_env,
        "# model\nOPENROUTER_API_KEY=sk-or-secret\n\nWHATSAPP_ENABLED=true\nGATEWAY_ALLOWED_USERS=999\nHTTPS_PROXY=http://proxy.lan:3128\n"
    );
    let yaml = m.hermes_config.as_deref().unwrap();
    assert!(
        !yaml.contains("secret") && !yaml.contains("FEISHU_APP_ID") && yaml.contains("homeserver"),
        "{yaml}"
    );
    assert_eq!(m.proxy.as_deref(), Some("http://proxy.lan:3128"));
    let tg = m.adopted.iter().find(|a| a.kind == "telegram").unwrap();
    assert_eq!(tg.adapter, "telegram");
    assert_eq!(tg.home_target.as_deref(), Some("chat:-1001"));
    assert!(tg.variables.contains(&"TELEGRAM_REACTIONS".to_owned()));
    assert!(m.notes.iter().any(|n| n.starts_with("TELEGRAM_REACTIONS")));
    assert!(
        m.gateway_toml
            .contains("allow-users = [\"111\", \"222\", \"999\"]"),
        "{}",
        m.gateway_toml
    );
    assert!(
        m.gateway_toml.contains("[access]\nallow-users = [\"999\"]"),
        "{}",
        m.gateway_toml
    );
    let shown = format!("{m:?}{}", m.notes.join(""));
    for secret in [
        "tg-secret",
        "dc-secret",
        "fs-secret",
        "mx-secret",
        "sk-or-secret",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

#[test]
fn what_cannot_move_refuses_the_adopt_and_says_why() {
    for (env, what, why) in [
        (
            "TELEGRAM_BOT_TOKEN=1:a\nHTTPS_PROXY=socks5://h:1\n",
            "proxy",
            "SOCKS",
        ),
        (
            "TELEGRAM_BOT_TOKEN=1:a\nHTTPS_PROXY=http://u:pw@h:1\n",
            "proxy",
            "password",
        ),
        (
            "TELEGRAM_BOT_TOKEN=1:a\nHTTPS_PROXY=http://a:1\nTELEGRAM_PROXY=http://b:1\n",
            "telegram",
            "differs",
        ),
        ("TELEGRAM_BOT_TOKEN=${TG}\n", "telegram", "interpolation"),
        ("TELEGRAM_BOT_TOKEN=\"a\\\\b\"\n", "files", "backslash"),
    ] {
        let (_d, h) = home(&[(".env", env)]);
        let m = map(&h);
        let refusal = m.refusal().unwrap_or_default();
        assert!(
            m.refused.iter().any(|(w, r)| w == what && r.contains(why)),
            "{env}: {refusal}"
        );
        assert!(!refusal.contains("pw@"), "{refusal}");
    }
    let (_d, h) = home(&[
        (".env", "DISCORD_BOT_TOKEN=x\n"),
        (
            "gateway.json",
            r#"{"platforms": {"discord": {"token": "y"}}}"#,
        ),
    ]);
    assert!(map(&h).refusal().unwrap().contains("gateway.json"));
}

#[test]
fn a_home_with_no_platform_adopts_nothing_and_keeps_every_byte() {
    let env = "OPENAI_API_KEY=x\n  # odd \"line\n";
    let (_d, h) = home(&[(".env", env), ("config.yaml", "model: {}\n")]);
    let m = map(&h);
    assert!(m.adopted.is_empty() && m.refused.is_empty());
    assert_eq!(m.hermes_env, env);
    assert_eq!(m.gateway_env, "");
    assert!(m.hermes_config.is_none());
    crate::config::parse::<crate::platform::Protocol>(Path::new("g.toml"), &m.gateway_toml)
        .unwrap();
}
