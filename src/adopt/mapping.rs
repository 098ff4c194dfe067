//! What a Hermes home's platforms become in the profile's gateway: one `[[adapter]]` per
//! platform a wing serves (each wing's `hermes.rs` says how, `Platform::from_hermes`), the
//! access rules, the two `.env` halves, Hermes's `config.yaml` without the credentials, and
//! what stays with Hermes or cannot move (docs/adopt-mapping.md).
//!
//! Adapters are named after their kind, which is also Hermes's name for the platform
//! (`telegram`, `discord`, `slack`, `matrix`, `feishu`, `qqbot`, `weixin`): one adapter per
//! platform, and a Relay chat id `telegram/chat:42` says where it came from.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::hermes_home::dotenv::{self, Place};
use crate::hermes_home::HermesHome;

use crate::hermes_home::wing::{global_users, unknown_dm};
pub use crate::hermes_home::wing::{Access, Wing};

/// The gateway's configuration and files for a Hermes home: the contract `adopt`'s plan
/// consumes. Secrets only in `gateway_env`, `hermes_env` and `files`.
pub struct Mapping {
    /// One per adopted platform, the adapter named after its kind.
    pub adopted: Vec<Adopted>,
    /// Hermes platforms no wing serves, and why: they stay with Hermes.
    pub left: Vec<(String, String)>,
    /// What cannot move as configured, and why (a platform, `proxy`, `gateway.toml`): any
    /// entry makes the whole adopt refuse ([`Mapping::refusal`]); nothing is half-moved.
    pub refused: Vec<(String, String)>,
    /// The whole `gateway.toml`; parses with the gateway's own reader.
    pub gateway_toml: String,
    /// The profile's `.env` after adopt: the adopted platforms' credential lines.
    pub gateway_env: String,
    /// Hermes's `.env` for its new home: every other line, bytes kept.
    pub hermes_env: String,
    /// Hermes's `config.yaml` without the adopted credentials' lines; `None`: unchanged.
    pub hermes_config: Option<String>,
    /// Files for the profile home: relative path, bytes, mode (Weixin's login).
    pub files: Vec<(PathBuf, Vec<u8>, u32)>,
    /// The proxy to give the gateway (`HTTPS_PROXY`), when Hermes had one.
    pub proxy: Option<String>,
    /// What the user should know; never a secret.
    pub notes: Vec<String>,
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("adopted", &self.adopted)
            .field("left", &self.left)
            .field("refused", &self.refused)
            .field("gateway_toml", &self.gateway_toml)
            .field(
                "files",
                &self.files.iter().map(|f| &f.0).collect::<Vec<_>>(),
            )
            .field("proxy", &self.proxy)
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

impl Mapping {
    /// Why adopt must not go on, when something cannot move: every reason, one a line.
    pub fn refusal(&self) -> Option<String> {
        (!self.refused.is_empty()).then(|| {
            self.refused
                .iter()
                .map(|(what, why)| format!("{what}: {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// `Platform::KIND`.
    pub kind: &'static str,
    /// Hermes's name for the platform.
    pub hermes_platform: &'static str,
    pub adapter: String,
    /// Every variable of the platform that leaves Hermes's `.env` (credentials and settings).
    pub variables: Vec<String>,
    /// Hermes's home channel as the wing's target text (`chat:-100123`).
    pub home_target: Option<String>,
}

/// The platforms Hermes serves and no wing does, with the variables that switch each on
/// (hermes-agent 0.19.0 `gateway/config.py`, the plugins; docs/research/adopt.md §7).
const LEFT: &[(&str, &[&str])] = &[
    (
        "whatsapp",
        &["WHATSAPP_ENABLED", "WHATSAPP_CLOUD_ACCESS_TOKEN"],
    ),
    ("signal", &["SIGNAL_HTTP_URL", "SIGNAL_ACCOUNT"]),
    ("mattermost", &["MATTERMOST_TOKEN"]),
    ("homeassistant", &["HASS_TOKEN"]),
    ("email", &["EMAIL_PASSWORD", "EMAIL_ADDRESS"]),
    ("sms", &["TWILIO_AUTH_TOKEN"]),
    ("dingtalk", &["DINGTALK_CLIENT_SECRET"]),
    ("wecom_callback", &["WECOM_CALLBACK_CORP_SECRET"]),
    ("bluebubbles", &["BLUEBUBBLES_PASSWORD"]),
    ("yuanbao", &["YUANBAO_APP_SECRET"]),
    ("api_server", &["API_SERVER_KEY"]),
    ("webhook", &["WEBHOOK_SECRET"]),
    ("google_chat", &["GOOGLE_CHAT_SERVICE_ACCOUNT_JSON"]),
    ("irc", &["IRC_SERVER"]),
    ("line", &["LINE_CHANNEL_ACCESS_TOKEN"]),
    ("ntfy", &["NTFY_TOKEN"]),
    ("photon", &["PHOTON_PROJECT_SECRET"]),
    ("simplex", &["SIMPLEX_WS_URL"]),
    (
        "teams",
        &["TEAMS_CLIENT_SECRET", "TEAMS_INCOMING_WEBHOOK_URL"],
    ),
];

/// Map Hermes's home `home` to the gateway's configuration.
pub fn map(home: &HermesHome) -> Mapping {
    let mut m = Mapping {
        adopted: vec![],
        left: vec![],
        refused: vec![],
        gateway_toml: String::new(),
        gateway_env: String::new(),
        hermes_env: home.env.text().to_owned(),
        hermes_config: None,
        files: vec![],
        proxy: None,
        notes: vec![],
    };
    let global_proxy = global_proxy(home, &mut m);
    let mut wings = vec![];
    for (kind, made) in crate::platform::from_hermes(home) {
        match made.and_then(|w| check(home, w, global_proxy.as_deref(), &mut m.proxy)) {
            Ok(w) => wings.push((kind, w)),
            Err(why) => m.refused.push((kind.to_owned(), why)),
        }
    }
    for (platform, vars) in LEFT {
        let on = |v: &&str| {
            let value = home.var(v).ok().flatten();
            value.is_some_and(|x| !v.ends_with("_ENABLED") || crate::hermes_home::truthy(&x))
        };
        if vars.iter().any(on) {
            m.left.push(((*platform).to_owned(), format!("no hermes-svc adapter serves {platform}: Hermes keeps running it, with its settings in its own .env")));
        }
    }
    if let Err(why) = split_files(home, &wings, &mut m) {
        m.refused.push(("files".to_owned(), why));
    }
    m.gateway_toml = render(home, &wings);
    let parsed = crate::config::parse::<crate::platform::Protocol>(
        Path::new("gateway.toml"),
        &m.gateway_toml,
    );
    if let Err(e) = parsed {
        m.refused.push((
            "gateway.toml".to_owned(),
            format!("the gateway would refuse the gateway.toml made from Hermes's settings ({e}); correct the Hermes setting it came from and run adopt again"),
        ));
    }
    for (kind, w) in wings {
        let variables = variables(home, &w);
        for v in variables.iter().filter(|v| !w.used.contains(*v)) {
            m.notes.push(format!("{v} ({kind}) has no hermes-svc equivalent; it leaves Hermes's .env and is not carried over"));
        }
        m.notes.extend(w.notes);
        m.files.extend(w.files);
        m.adopted.push(Adopted {
            kind,
            hermes_platform: w.hermes_platform,
            adapter: kind.to_owned(),
            variables,
            home_target: w.home_target,
        });
    }
    m
}

/// The `.env` variables of the platform that leave Hermes's `.env`: its prefix's.
fn variables(home: &HermesHome, w: &Wing) -> Vec<String> {
    let mut out: Vec<String> = home
        .env
        .bindings
        .iter()
        .filter_map(|b| b.key.clone())
        .filter(|k| w.prefixes.iter().any(|p| k.starts_with(p)))
        .collect();
    out.extend(w.env_credentials.iter().cloned());
    out.sort();
    out.dedup();
    out
}

/// The global proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, any case), refused when the
/// gateway cannot take it as a drop-in setting.
fn global_proxy(home: &HermesHome, m: &mut Mapping) -> Option<String> {
    let names = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ];
    let (name, url) = names.iter().find_map(|n| Some((*n, home.var(n).ok()??)))?;
    match proxy_problem(&url) {
        Some(why) => {
            m.refused
                .push(("proxy".to_owned(), format!("{name}: {why}")));
            None
        }
        None => {
            m.proxy = Some(url.clone());
            Some(url)
        }
    }
}

/// Why the gateway cannot take `url` as its `HTTPS_PROXY` setting, if it cannot.
fn proxy_problem(url: &str) -> Option<&'static str> {
    let scheme = url
        .split_once("://")
        .map_or("", |(s, _)| s)
        .to_ascii_lowercase();
    if scheme.starts_with("socks") {
        return Some("a SOCKS proxy, which the gateway does not speak (docs/adapters.md); give Hermes an HTTP proxy, or remove it, and run adopt again");
    }
    let authority = url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .split('/')
        .next()
        .unwrap_or("");
    if authority.contains('@') {
        return Some("the proxy URL holds a password, which would land in a unit drop-in anyone can read; put the proxy in the profile's .env by hand (it is then a secret) and remove it from Hermes's settings, then run adopt again");
    }
    None
}

/// A wing's result held against the whole home: legacy `gateway.json` blocks, proxies.
fn check(
    home: &HermesHome,
    w: Wing,
    global: Option<&str>,
    chosen: &mut Option<String>,
) -> Result<Wing, String> {
    let p = w.hermes_platform;
    if home
        .gateway_json
        .as_ref()
        .is_some_and(|j| !j["platforms"][p].is_null())
    {
        return Err(format!("gateway.json has a platforms.{p} block, which adopt does not move; put its settings in config.yaml or .env and run adopt again"));
    }
    if let Some((var, url)) = &w.proxy {
        if let Some(why) = proxy_problem(url) {
            return Err(format!("{var}: {why}"));
        }
        match (global, chosen.as_deref()) {
            (Some(g), _) if g != url => return Err(format!("{var} differs from the global proxy, and the gateway has one proxy for all its adapters; make them the same (or remove {var}) and run adopt again")),
            (None, Some(c)) if c != url => return Err(format!("{var} differs from another platform's proxy, and the gateway has one proxy for all its adapters")),
            _ => *chosen = Some(url.clone()),
        }
    }
    Ok(w)
}

/// The two `.env`s and `config.yaml`: the credentials to the gateway, the adopted platforms'
/// settings out of Hermes's, every other byte kept.
fn split_files(home: &HermesHome, wings: &[(&str, Wing)], m: &mut Mapping) -> Result<(), String> {
    let to_gateway: BTreeSet<&str> = wings
        .iter()
        .flat_map(|(_, w)| w.env_credentials.iter().map(String::as_str))
        .collect();
    let dropped: BTreeSet<String> = wings.iter().flat_map(|(_, w)| variables(home, w)).collect();
    let (mut gateway, hermes) = home
        .env
        .split(|k| {
            if to_gateway.contains(k) {
                Place::Gateway
            } else if dropped.contains(k) {
                Place::Drop
            } else {
                Place::Hermes
            }
        })
        .map_err(|e| e.to_string())?;
    for (_, w) in wings {
        for (var, value) in &w.config_credentials {
            let line = dotenv::plain(var, value.expose()).map_err(|_| {
                format!("config.yaml: {var}'s value cannot be a plain {var}=VALUE line of the gateway's .env (a backslash, a leading quote, spaces at its ends); move it to .env as a plain value and run adopt again")
            })?;
            gateway.push_str(&line);
        }
    }
    m.gateway_env = gateway;
    m.hermes_env = hermes;
    let lines: Vec<usize> = wings
        .iter()
        .flat_map(|(_, w)| w.config_lines.iter().copied())
        .collect();
    if let (Some(config), false) = (&home.config, lines.is_empty()) {
        m.hermes_config = Some(crate::hermes_home::config_yaml::without_lines(
            &config.text,
            &lines,
        ));
    }
    Ok(())
}

/// `gateway.toml`: the profile's `[access]` from Hermes's global settings, the adapters with
/// their own rules, and the Relay to Hermes.
fn render(home: &HermesHome, wings: &[(&str, Wing)]) -> String {
    let mut out = String::from("# Written by `hermes-svc adopt` from Hermes's settings (docs/adopt.md).\n\n[agent]\nkind = \"hermes-relay\"\n# Hermes's own names and ids for each chat, so conversations its gateway held go on.\nplatform-ids = true\n");
    let users = global_users(home).unwrap_or_default();
    let everyone = users.iter().any(|u| u == "*")
        || home
            .var("GATEWAY_ALLOW_ALL_USERS")
            .ok()
            .flatten()
            .is_some_and(|v| crate::hermes_home::truthy(&v));
    let global = Access {
        allow_users: (!users.is_empty() && !everyone).then_some(users),
        allow_all: everyone.then_some(true),
        unknown_dm: [
            &["unauthorized_dm_behavior"][..],
            &["gateway", "unauthorized_dm_behavior"],
        ]
        .into_iter()
        .find_map(|p| home.entry(p))
        .and_then(|e| e.scalar())
        .as_deref()
        .and_then(unknown_dm),
        ..Access::default()
    };
    if global != Access::default() {
        out.push_str("\n[access]\n");
        access_keys(&mut out, &global);
    }
    for (kind, w) in wings {
        let _ = write!(
            out,
            "\n[[adapter]]\nname = {}\nkind = {}\n",
            toml::Value::from(*kind),
            toml::Value::from(*kind)
        );
        for (key, value) in &w.keys {
            let _ = writeln!(out, "{key} = {value}");
        }
        if w.access != Access::default() {
            out.push_str("\n[adapter.access]\n");
            access_keys(&mut out, &w.access);
        }
    }
    out
}

fn access_keys(out: &mut String, a: &Access) {
    let list = |l: &Vec<String>| {
        toml::Value::Array(l.iter().map(|s| toml::Value::from(s.as_str())).collect())
    };
    if let Some(l) = &a.allow_users {
        let _ = writeln!(out, "allow-users = {}", list(l));
    }
    if let Some(l) = &a.allow_chats {
        let _ = writeln!(out, "allow-chats = {}", list(l));
    }
    for (key, v) in [
        ("allow-all", a.allow_all),
        ("require-mention", a.require_mention),
        ("allow-bots", a.allow_bots),
    ] {
        if let Some(v) = v {
            let _ = writeln!(out, "{key} = {v}");
        }
    }
    if let Some(dm) = a.unknown_dm {
        let _ = writeln!(out, "unknown-dm = {}", toml::Value::from(dm));
    }
}

#[cfg(test)]
mod tests;
