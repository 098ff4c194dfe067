//! `gateway.toml`: the adapters and cron jobs of one profile.
//!
//! Parsing is strict (unknown keys are errors) and every error names the file, the line and
//! the fix, because a typo that is silently ignored is a bot that silently does nothing.
//! Secrets are never in this file: adapters name environment variables, resolved from the
//! profile's `.env` at run time.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::bounded_read::{self, Owner, ReadError};

/// Why a config could not be used. Every variant says which file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read, or was refused (a FIFO, a symlink, too large, someone
    /// else's): the message names the file and the fix.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}:{line}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: adapter {adapter:?}: {message}")]
    Secret {
        path: PathBuf,
        adapter: String,
        message: String,
    },
}

/// The whole configuration of one gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayConfig {
    /// An adapter that has been without a connection this long makes the gateway exit 75 for
    /// a clean restart.
    pub max_outage: Duration,
    /// Without a systemd watchdog, a component stale this long makes the gateway exit 75.
    pub self_watchdog: Duration,
    pub adapters: Vec<AdapterSpec>,
    pub cron: Vec<CronSpec>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_outage: Duration::from_secs(30 * 60),
            self_watchdog: Duration::from_secs(30),
            adapters: vec![],
            cron: vec![],
        }
    }
}

/// Timeouts and backoff of one adapter. The platform's heartbeat interval comes from Hello.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// DNS + TCP + TLS + WebSocket upgrade, each attempt.
    pub connect_timeout: Duration,
    /// From upgrade to Hello, and from Identify/Resume to READY/RESUMED.
    pub hello_timeout: Duration,
    /// How long a heartbeat may wait for its ACK (and a WS ping for its pong). `None`: a
    /// fifth of the heartbeat interval, between 100 ms and 10 s.
    pub ack_timeout: Option<Duration>,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Connected this long resets the backoff.
    pub stable_after: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(10),
            ack_timeout: None,
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            stable_after: Duration::from_secs(60),
        }
    }
}

/// One adapter, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSpec {
    pub name: String,
    pub timing: Timing,
    pub protocol: Protocol,
}

/// What an adapter speaks, with the per-kind settings.
#[derive(Clone, Debug, PartialEq)]
pub enum Protocol {
    QqBot {
        app_id: String,
        secret_env: String,
        api_base: String,
        token_url: String,
        /// Skip `GET {api_base}/gateway` and connect here.
        gateway_url: Option<String>,
        intents: u64,
        shard: [u32; 2],
        /// Probe the socket with WebSocket pings too. Off by default: QQ's own clients never
        /// send them, and nothing public says the platform answers them.
        ws_ping: bool,
    },
    Discord {
        token_env: String,
        api_base: String,
        gateway_url: Option<String>,
        intents: u64,
        ws_ping: bool,
    },
    WebSocket {
        url: String,
        /// Sent as `Authorization: Bearer <token>` when set.
        token_env: Option<String>,
        ping_interval: Duration,
        /// An application-level ping frame (JSON text) sent every `ping_interval`; any inbound
        /// frame counts as its answer.
        app_ping: Option<String>,
    },
}

impl Protocol {
    pub fn kind(&self) -> &'static str {
        match self {
            Protocol::QqBot { .. } => "qqbot",
            Protocol::Discord { .. } => "discord",
            Protocol::WebSocket { .. } => "websocket",
        }
    }
}

/// One cron job, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct CronSpec {
    pub name: String,
    pub schedule: CronSchedule,
    pub command: Vec<String>,
    pub timeout: Duration,
}

/// A cron expression: five fields (minute hour day month weekday), or six with leading
/// seconds. It keeps the text as written, because croner's own copy is upper-cased and has
/// its aliases replaced, and messages should quote what the user wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct CronSchedule {
    text: String,
    cron: croner::Cron,
}

impl CronSchedule {
    pub fn parse(text: &str) -> Result<Self, croner::errors::CronError> {
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(text)?;
        Ok(Self {
            text: text.to_owned(),
            cron,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn cron(&self) -> &croner::Cron {
        &self.cron
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A resolved credential. Its `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

// ---- raw, as written in the file ----

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawFile {
    #[serde(default)]
    gateway: RawGateway,
    #[serde(default)]
    adapter: Vec<Spanned<RawAdapter>>,
    #[serde(default)]
    cron: Vec<Spanned<RawCron>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawGateway {
    max_outage: Option<Spanned<String>>,
    watchdog: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawAdapter {
    name: Spanned<String>,
    kind: Spanned<String>,
    app_id: Option<String>,
    secret_env: Option<String>,
    token_env: Option<String>,
    api_base: Option<Spanned<String>>,
    token_url: Option<Spanned<String>>,
    gateway_url: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    intents: Option<Spanned<Vec<String>>>,
    shard: Option<[u32; 2]>,
    ws_ping: Option<bool>,
    ping_interval: Option<Spanned<String>>,
    app_ping: Option<String>,
    connect_timeout: Option<Spanned<String>>,
    hello_timeout: Option<Spanned<String>>,
    ack_timeout: Option<Spanned<String>>,
    backoff_min: Option<Spanned<String>>,
    backoff_max: Option<Spanned<String>>,
    stable_after: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCron {
    name: Spanned<String>,
    schedule: Spanned<String>,
    command: Spanned<Vec<String>>,
    timeout: Option<Spanned<String>>,
}

const QQ_API_BASE: &str = "https://api.sgroup.qq.com";
const QQ_TOKEN_URL: &str = "https://bots.qq.com/app/getAppAccessToken";
const DISCORD_API_BASE: &str = "https://discord.com/api/v10";

/// An intent by name (kebab-case of the platform's constant), its bit, and what a bot needs
/// before the platform grants it (`None`: every bot has it).
type Intent = (&'static str, u64, Option<&'static str>);

/// QQ Bot: tencent-connect/bot-docs, `docs/develop/api-v2/dev-prepare/interface-framework/event-emit.md`
/// ("事件订阅 Intents"): a new bot has guilds, guild-members and public-guild-messages; two
/// intents are for private-domain bots only; the rest are granted on application.
/// group-and-c2c-event is not in the documented defaults, but new bots are seen to reach
/// READY with it, and a group or C2C bot cannot work without it.
const QQ_INTENTS: &[Intent] = &[
    ("guilds", 1 << 0, None),
    ("guild-members", 1 << 1, None),
    ("guild-messages", 1 << 9, Some(PRIVATE)),
    ("guild-message-reactions", 1 << 10, Some(APPLY)),
    ("direct-message", 1 << 12, Some(APPLY)),
    ("group-and-c2c-event", 1 << 25, None),
    ("interaction", 1 << 26, Some(APPLY)),
    ("message-audit", 1 << 27, Some(APPLY)),
    ("forums-event", 1 << 28, Some(PRIVATE)),
    ("audio-action", 1 << 29, Some(APPLY)),
    ("public-guild-messages", 1 << 30, None),
];
const PRIVATE: &str = "a private-domain bot";
const APPLY: &str = "an application on the QQ open platform";

/// What a new QQ bot can subscribe to without asking: @-messages in guilds, and group and
/// C2C messages.
const QQ_DEFAULT_INTENTS: &[&str] = &["public-guild-messages", "group-and-c2c-event"];

/// Discord: discord-api-docs, `docs/events/Gateway.md` ("List of Intents"; privileged intents
/// must be enabled in the developer portal).
const DISCORD_INTENTS: &[Intent] = &[
    ("guilds", 1 << 0, None),
    (
        "guild-members",
        1 << 1,
        Some("the privileged intent enabled in the developer portal"),
    ),
    ("guild-moderation", 1 << 2, None),
    ("guild-messages", 1 << 9, None),
    ("guild-message-reactions", 1 << 10, None),
    ("direct-messages", 1 << 12, None),
    ("direct-message-reactions", 1 << 13, None),
    (
        "message-content",
        1 << 15,
        Some("the privileged intent enabled in the developer portal"),
    ),
];

/// The configured QQ intents that the platform grants only on request, with what each needs:
/// what a 4014 ("intent not permitted") most likely refers to.
pub fn qq_gated_intents(bits: u64) -> Vec<String> {
    QQ_INTENTS
        .iter()
        .filter(|(_, bit, _)| bits & bit != 0)
        .filter_map(|(name, _, needs)| needs.map(|n| format!("{name} (needs {n})")))
        .collect()
}

/// The longest duration any key takes. The gateway adds and doubles these (deadlines, backoff,
/// timeouts) and adds them to the clock; far beyond any useful setting, and far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    }

    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> Result<T, ConfigError> {
        Err(ConfigError::Invalid {
            path: self.path.to_owned(),
            line: self.line(span.start),
            message: message.into(),
        })
    }

    fn duration(&self, key: &str, raw: &Spanned<String>) -> Result<Duration, ConfigError> {
        match humantime::parse_duration(raw.get_ref()) {
            Ok(d) if d > MAX_DURATION => self.err(
                raw.span(),
                format!(
                    "{key} = {:?} is too long; the most any duration may be is 365 days",
                    raw.get_ref()
                ),
            ),
            Ok(d) if !d.is_zero() => Ok(d),
            _ => self.err(
                raw.span(),
                format!(
                    "{key} = {:?} is not a duration; write it like \"30s\", \"5m\" or \"1h 30m\"",
                    raw.get_ref()
                ),
            ),
        }
    }

    fn opt_duration(
        &self,
        key: &str,
        raw: &Option<Spanned<String>>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        raw.as_ref().map_or(Ok(default), |r| self.duration(key, r))
    }

    /// `https://`/`wss://` anywhere; `http://`/`ws://` only to loopback (tests, sandboxes).
    fn url(
        &self,
        key: &str,
        raw: &Spanned<String>,
        secure: &str,
        plain: &str,
    ) -> Result<String, ConfigError> {
        let url = raw.get_ref();
        let loopback = |rest: &str| {
            let host = rest.split(['/', '?']).next().unwrap_or("");
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            let host = if host.starts_with('[') {
                host.split(']').next().map(|h| &h[1..]).unwrap_or("")
            } else {
                host.split(':').next().unwrap_or("")
            };
            host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        };
        if url.strip_prefix(secure).is_some_and(|r| !r.is_empty()) {
            return Ok(url.clone());
        }
        if let Some(rest) = url.strip_prefix(plain) {
            if loopback(rest) {
                return Ok(url.clone());
            }
            return self.err(
                raw.span(),
                format!("{key} = {url:?}: {plain} is allowed only to loopback; use {secure}"),
            );
        }
        self.err(
            raw.span(),
            format!("{key} = {url:?}: must start with {secure}"),
        )
    }

    fn intents(
        &self,
        raw: &Option<Spanned<Vec<String>>>,
        table: &[Intent],
        default: &[&str],
    ) -> Result<u64, ConfigError> {
        let names: Vec<String> = match raw {
            Some(r) => r.get_ref().clone(),
            None => default.iter().map(|s| s.to_string()).collect(),
        };
        let mut bits = 0;
        for name in &names {
            match table.iter().find(|(n, _, _)| n == name) {
                Some((_, b, _)) => bits |= b,
                None => {
                    let known: Vec<_> = table.iter().map(|(n, _, _)| *n).collect();
                    return self.err(
                        raw.as_ref().map_or(0..0, |r| r.span()),
                        format!("unknown intent {name:?}; known: {}", known.join(", ")),
                    );
                }
            }
        }
        Ok(bits)
    }
}

/// Load `path` for the gateway, which acts on it: the file must belong to the user the
/// gateway runs as, or to root. A missing file is a valid, empty configuration (no adapters,
/// no cron).
pub fn load(path: &Path) -> Result<GatewayConfig, ConfigError> {
    load_with(path, Owner::SelfOrRoot)
}

/// Load `path`, accepting files of `owner`. The read is bounded ([`bounded_read`]): a FIFO,
/// a symlink or a file over [`bounded_read::LIMIT`] is an error at once, never a hang or a
/// gigabyte of memory.
pub fn load_with(path: &Path, owner: Owner) -> Result<GatewayConfig, ConfigError> {
    match bounded_read::read_to_string(path, bounded_read::LIMIT, owner)? {
        Some(text) => parse(path, &text),
        None => Ok(GatewayConfig::default()),
    }
}

/// Parse and validate `text`, read from `path` (used in messages).
pub fn parse(path: &Path, text: &str) -> Result<GatewayConfig, ConfigError> {
    let ctx = Ctx { path, text };
    let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Invalid {
        path: path.to_owned(),
        line: e.span().map_or(1, |s| ctx.line(s.start)),
        message: e.message().trim().replace('\n', " "),
    })?;
    let defaults = GatewayConfig::default();
    let mut config = GatewayConfig {
        max_outage: ctx.opt_duration("max-outage", &raw.gateway.max_outage, defaults.max_outage)?,
        self_watchdog: ctx.opt_duration(
            "watchdog",
            &raw.gateway.watchdog,
            defaults.self_watchdog,
        )?,
        adapters: vec![],
        cron: vec![],
    };
    let mut names = BTreeSet::new();
    for a in &raw.adapter {
        let spec = adapter(&ctx, a)?;
        if !names.insert(spec.name.clone()) {
            return ctx.err(
                a.get_ref().name.span(),
                format!(
                    "adapter name {:?} is used twice; names must be unique in a profile",
                    spec.name
                ),
            );
        }
        config.adapters.push(spec);
    }
    let mut cron_names = BTreeSet::new();
    for c in &raw.cron {
        let spec = cron(&ctx, c)?;
        if !cron_names.insert(spec.name.clone()) {
            return ctx.err(
                c.get_ref().name.span(),
                format!("cron name {:?} is used twice", spec.name),
            );
        }
        config.cron.push(spec);
    }
    Ok(config)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn adapter(ctx: &Ctx, spanned: &Spanned<RawAdapter>) -> Result<AdapterSpec, ConfigError> {
    let a = spanned.get_ref();
    let span = spanned.span();
    let name = a.name.get_ref().clone();
    if !valid_name(&name) {
        return ctx.err(
            a.name.span(),
            format!("adapter name {name:?}: use 1-32 characters of a-z, 0-9, '-' and '_'"),
        );
    }
    let kind = a.kind.get_ref().as_str();
    let missing = |key: &str, example: &str| {
        ctx.err::<AdapterSpec>(
            span.clone(),
            format!("adapter {name:?} (kind {kind}): missing {key}; add {key} = {example}"),
        )
    };
    // Keys that belong to other kinds are errors, not silently ignored.
    let present: Vec<(&str, bool)> = vec![
        ("app-id", a.app_id.is_some()),
        ("secret-env", a.secret_env.is_some()),
        ("token-env", a.token_env.is_some()),
        ("api-base", a.api_base.is_some()),
        ("token-url", a.token_url.is_some()),
        ("gateway-url", a.gateway_url.is_some()),
        ("url", a.url.is_some()),
        ("intents", a.intents.is_some()),
        ("shard", a.shard.is_some()),
        ("ws-ping", a.ws_ping.is_some()),
        ("ping-interval", a.ping_interval.is_some()),
        ("app-ping", a.app_ping.is_some()),
    ];
    let allowed: &[&str] = match kind {
        "qqbot" => &[
            "app-id",
            "secret-env",
            "api-base",
            "token-url",
            "gateway-url",
            "intents",
            "shard",
            "ws-ping",
        ],
        "discord" => &["token-env", "api-base", "gateway-url", "intents", "ws-ping"],
        "websocket" => &["url", "token-env", "ping-interval", "app-ping"],
        other => {
            return ctx.err(
                a.kind.span(),
                format!(
                    "adapter {name:?}: unknown kind {other:?}; use qqbot, discord or websocket"
                ),
            )
        }
    };
    if let Some((key, _)) = present.iter().find(|(k, p)| *p && !allowed.contains(k)) {
        return ctx.err(
            span,
            format!("adapter {name:?}: {key} does not apply to kind {kind}; remove it"),
        );
    }
    for (key, env) in [("secret-env", &a.secret_env), ("token-env", &a.token_env)] {
        let Some(env) = env else { continue };
        // The value is not echoed: what lands here by mistake is most often the secret itself.
        if crate::escape::env_name(env).is_err() {
            return ctx.err(
                span,
                format!(
                    "adapter {name:?}: {key} must name a variable in the profile's .env (like \"BOT_SECRET\"), not hold the secret itself; the value given ({} characters, not shown) is not a variable name",
                    env.chars().count()
                ),
            );
        }
    }
    let d = Timing::default();
    let timing = Timing {
        connect_timeout: ctx.opt_duration(
            "connect-timeout",
            &a.connect_timeout,
            d.connect_timeout,
        )?,
        hello_timeout: ctx.opt_duration("hello-timeout", &a.hello_timeout, d.hello_timeout)?,
        ack_timeout: a
            .ack_timeout
            .as_ref()
            .map(|r| ctx.duration("ack-timeout", r))
            .transpose()?,
        backoff_min: ctx.opt_duration("backoff-min", &a.backoff_min, d.backoff_min)?,
        backoff_max: ctx.opt_duration("backoff-max", &a.backoff_max, d.backoff_max)?,
        stable_after: ctx.opt_duration("stable-after", &a.stable_after, d.stable_after)?,
    };
    if timing.backoff_max < timing.backoff_min {
        return ctx.err(
            span,
            format!("adapter {name:?}: backoff-max is shorter than backoff-min"),
        );
    }
    let opt_url = |key: &str, raw: &Option<Spanned<String>>, secure: &str, plain: &str| {
        raw.as_ref()
            .map(|r| ctx.url(key, r, secure, plain))
            .transpose()
    };
    let protocol = match kind {
        "qqbot" => Protocol::QqBot {
            app_id: match &a.app_id {
                Some(id) => id.clone(),
                None => return missing("app-id", "\"<your bot's AppID>\""),
            },
            secret_env: match &a.secret_env {
                Some(s) => s.clone(),
                None => {
                    return missing(
                        "secret-env",
                        "\"QQ_BOT_SECRET\" (a variable in the profile's .env)",
                    )
                }
            },
            api_base: opt_url("api-base", &a.api_base, "https://", "http://")?
                .unwrap_or_else(|| QQ_API_BASE.into()),
            token_url: opt_url("token-url", &a.token_url, "https://", "http://")?
                .unwrap_or_else(|| QQ_TOKEN_URL.into()),
            gateway_url: opt_url("gateway-url", &a.gateway_url, "wss://", "ws://")?,
            intents: ctx.intents(&a.intents, QQ_INTENTS, QQ_DEFAULT_INTENTS)?,
            shard: a.shard.unwrap_or([0, 1]),
            ws_ping: a.ws_ping.unwrap_or(false),
        },
        "discord" => Protocol::Discord {
            token_env: match &a.token_env {
                Some(s) => s.clone(),
                None => {
                    return missing(
                        "token-env",
                        "\"DISCORD_BOT_TOKEN\" (a variable in the profile's .env)",
                    )
                }
            },
            api_base: opt_url("api-base", &a.api_base, "https://", "http://")?
                .unwrap_or_else(|| DISCORD_API_BASE.into()),
            gateway_url: opt_url("gateway-url", &a.gateway_url, "wss://", "ws://")?,
            intents: ctx.intents(
                &a.intents,
                DISCORD_INTENTS,
                &["guild-messages", "direct-messages"],
            )?,
            ws_ping: a.ws_ping.unwrap_or(true),
        },
        _ => Protocol::WebSocket {
            url: match &a.url {
                Some(u) => ctx.url("url", u, "wss://", "ws://")?,
                None => return missing("url", "\"wss://example.com/ws\""),
            },
            token_env: a.token_env.clone(),
            ping_interval: ctx.opt_duration(
                "ping-interval",
                &a.ping_interval,
                Duration::from_secs(15),
            )?,
            app_ping: a.app_ping.clone(),
        },
    };
    if let Protocol::WebSocket {
        app_ping: Some(p), ..
    } = &protocol
    {
        if serde_json::from_str::<serde_json::Value>(p).is_err() {
            return ctx.err(
                span,
                format!(
                    "adapter {name:?}: app-ping must be a JSON text, like '{{\"op\":\"ping\"}}'"
                ),
            );
        }
    }
    Ok(AdapterSpec {
        name,
        timing,
        protocol,
    })
}

fn cron(ctx: &Ctx, spanned: &Spanned<RawCron>) -> Result<CronSpec, ConfigError> {
    let c = spanned.get_ref();
    let name = c.name.get_ref().clone();
    if !valid_name(&name) {
        return ctx.err(
            c.name.span(),
            format!("cron name {name:?}: use 1-32 characters of a-z, 0-9, '-' and '_'"),
        );
    }
    let text = c.schedule.get_ref().trim();
    let schedule = match CronSchedule::parse(text) {
        Ok(s) => s,
        Err(e) => {
            return ctx.err(
                c.schedule.span(),
                format!(
                    "cron {name:?}: schedule {text:?}: {e}; use five fields like \"0 9 * * *\""
                ),
            )
        }
    };
    let command = c.command.get_ref().clone();
    if command.is_empty() || command[0].is_empty() {
        return ctx.err(
            c.command.span(),
            format!("cron {name:?}: command must name a program, like [\"/usr/bin/env\", \"python3\", \"job.py\"]"),
        );
    }
    Ok(CronSpec {
        name,
        schedule,
        command,
        timeout: ctx.opt_duration("timeout", &c.timeout, Duration::from_secs(300))?,
    })
}

impl AdapterSpec {
    /// The env var holding this adapter's credential, if it has one.
    pub fn credential_env(&self) -> Option<&str> {
        match &self.protocol {
            Protocol::QqBot { secret_env, .. } => Some(secret_env),
            Protocol::Discord { token_env, .. } => Some(token_env),
            Protocol::WebSocket { token_env, .. } => token_env.as_deref(),
        }
    }

    /// Read the credential from the environment (which the unit fills from `.env`).
    pub fn credential(
        &self,
        config_path: &Path,
        env_file: &Path,
    ) -> Result<Option<Secret>, ConfigError> {
        let Some(var) = self.credential_env() else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(v) if !v.is_empty() => Ok(Some(Secret(v))),
            _ => Err(ConfigError::Secret {
                path: config_path.to_owned(),
                adapter: self.name.clone(),
                message: format!(
                    "{var} is not set; add {var}=... to {} (mode 0600)",
                    env_file.display()
                ),
            }),
        }
    }

    /// The identity two gateways must not share: the platform plus the bot's credential.
    /// Only its hash ever leaves the process.
    pub fn identity(&self, secret: Option<&Secret>) -> String {
        let s = secret.map(Secret::expose).unwrap_or("");
        match &self.protocol {
            Protocol::QqBot { app_id, .. } => format!("qqbot:{app_id}:{s}"),
            Protocol::Discord { .. } => format!("discord:{s}"),
            Protocol::WebSocket { url, .. } => format!("websocket:{url}:{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
[gateway]
max-outage = "30m"

[[adapter]]
name = "qq"
kind = "qqbot"
app-id = "102000000"
secret-env = "QQ_BOT_SECRET"
api-base = "http://127.0.0.1:9000"
token-url = "http://127.0.0.1:9000/app/getAppAccessToken"
intents = ["public-guild-messages", "direct-message"]

[[adapter]]
name = "dc"
kind = "discord"
token-env = "DISCORD_BOT_TOKEN"

[[adapter]]
name = "custom"
kind = "websocket"
url = "wss://example.com/ws"
ping-interval = "15s"

[[cron]]
name = "daily"
schedule = "0 9 * * *"
command = ["/usr/bin/env", "python3", "tracker.py"]
timeout = "5m"
"#;

    fn parse_str(text: &str) -> Result<GatewayConfig, ConfigError> {
        parse(Path::new("/p/gateway.toml"), text)
    }

    #[test]
    fn the_documented_example_parses() {
        let c = parse_str(FULL).unwrap();
        assert_eq!(c.max_outage, Duration::from_secs(1800));
        assert_eq!(c.adapters.len(), 3);
        assert_eq!(c.adapters[0].protocol.kind(), "qqbot");
        match &c.adapters[0].protocol {
            Protocol::QqBot { intents, .. } => assert_eq!(*intents, (1 << 30) | (1 << 12)),
            p => panic!("{p:?}"),
        }
        assert_eq!(c.cron[0].timeout, Duration::from_secs(300));
    }

    #[test]
    fn errors_name_file_line_and_fix() {
        let cases = [
            ("[gateway]\nmax-outgae = \"1m\"\n", "gateway.toml:2", "unknown field `max-outgae`"),
            ("[[adapter]]\nname = \"a\"\nkind = \"qqbot\"\nsecret-env = \"S\"\n", "gateway.toml:1", "add app-id"),
            ("[[adapter]]\nname = \"a\"\nkind = \"irc\"\n", "gateway.toml:3", "use qqbot, discord or websocket"),
            ("[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"ws://example.com\"\n", "gateway.toml:4", "only to loopback"),
            ("[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\nping-interval = \"often\"\n", "gateway.toml:5", "not a duration"),
            ("[[adapter]]\nname = \"a\"\nkind = \"discord\"\ntoken-env = \"T\"\napp-id = \"1\"\n", "gateway.toml:1", "app-id does not apply"),
            ("[[cron]]\nname = \"c\"\nschedule = \"61 * * * *\"\ncommand = [\"/bin/true\"]\n", "gateway.toml:3", "schedule"),
            ("[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\n[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://y\"\n", "gateway.toml:6", "used twice"),
        ];
        for (text, at, what) in cases {
            let e = parse_str(text).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(what), "{text:?} gave: {e}");
        }
    }

    #[test]
    fn a_duration_past_a_year_is_an_error_not_a_crash() {
        // Found while writing the config_parse fuzz target (fuzz/), which computes the
        // adapter's retry deadline as the gateway does at start: this config parsed, and the
        // gateway then panicked adding the durations ("overflow when adding durations").
        let text = "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"wss://x\"\nconnect-timeout = \"500000000000y\"\nhello-timeout = \"500000000000y\"\n";
        let e = parse_str(text).unwrap_err().to_string();
        assert!(
            e.contains("gateway.toml:5") && e.contains("365 days"),
            "{e}"
        );
        let text = "[gateway]\nmax-outage = \"365d\"\nwatchdog = \"366d\"\n";
        let e = parse_str(text).unwrap_err().to_string();
        assert!(e.contains("gateway.toml:3"), "{e}");
    }

    #[test]
    fn loopback_plain_urls_are_allowed() {
        let text =
            "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"ws://127.0.0.1:8080/ws\"\n";
        assert!(parse_str(text).is_ok());
        let text =
            "[[adapter]]\nname = \"a\"\nkind = \"websocket\"\nurl = \"ws://[::1]:8080/ws\"\n";
        assert!(parse_str(text).is_ok());
    }

    #[test]
    fn missing_file_is_an_empty_config() {
        let c = load(Path::new("/nonexistent/gateway.toml")).unwrap();
        assert!(c.adapters.is_empty() && c.cron.is_empty());
    }

    #[test]
    fn secrets_do_not_debug_print() {
        assert_eq!(format!("{:?}", Secret("hunter2".into())), "Secret(..)");
    }
}
