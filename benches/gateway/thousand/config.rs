//! One configuration's gateway side: the adapter kind, and the `gateway.toml` and `.env`
//! that give a profile `n` adapters of it.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    QqBot,
    Discord,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::QqBot => "qqbot",
            Kind::Discord => "discord",
        }
    }
}

/// `gateway.toml` and `.env` for `n` adapters of one kind, each with its own credential (the
/// session start limit spaces Identify calls 5 s apart per credential), discovering the gateway
/// and (QQ) fetching tokens from `base`, as a real start does. `HSV_BENCH_WS_PING=true|false`
/// overrides the kind's `ws-ping` default (off for qqbot, on for discord), to measure its cost.
pub(super) fn many_adapters(kind: Kind, n: usize, base: &str) -> (String, String) {
    let mut toml = String::new();
    let mut env = String::new();
    let ws_ping = std::env::var("HSV_BENCH_WS_PING")
        .ok()
        .filter(|v| v == "true" || v == "false")
        .map(|v| format!("ws-ping = {v}\n"))
        .unwrap_or_default();
    for i in 0..n {
        match kind {
            Kind::QqBot => toml.push_str(&format!(
                "[[adapter]]\nname = \"a{i}\"\nkind = \"qqbot\"\napp-id = \"{}\"\nsecret-env = \"QQ_SECRET\"\napi-base = \"{base}\"\ntoken-url = \"{base}/app/getAppAccessToken\"\n",
                102_000_000 + i
            )),
            Kind::Discord => {
                toml.push_str(&format!(
                    "[[adapter]]\nname = \"a{i}\"\nkind = \"discord\"\ntoken-env = \"TOKEN_{i}\"\napi-base = \"{base}\"\n"
                ));
                env.push_str(&format!("TOKEN_{i}=bench-token-{i}\n"));
            }
        }
        toml.push_str(&ws_ping);
    }
    if kind == Kind::QqBot {
        env.push_str("QQ_SECRET=bench-secret\n");
    }
    (toml, env)
}
