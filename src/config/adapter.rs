//! The `[[adapter]]` section: what each adapter speaks and its timing, validated so that a
//! key of another kind, a missing credential variable or a plain URL off loopback is an error
//! naming its line, not a bot that quietly never connects.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::feishu::{self, FeishuDomain};
use super::intents::{DISCORD_INTENTS, QQ_DEFAULT_INTENTS, QQ_INTENTS};
use super::long_poll::{self, PollTiming, RawPoll};
use super::send_frame::SendFrame;
use super::value::{valid_name, Ctx};
use super::{ConfigError, Secret};

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
        /// The frame an outgoing message becomes; without it the adapter cannot send.
        send_frame: Option<SendFrame>,
    },
    /// Feishu or Lark: events over the long connection (`/callback/ws/endpoint`), messages
    /// through the Open API with a `tenant_access_token`.
    Feishu {
        domain: FeishuDomain,
        app_id: String,
        secret_env: String,
        /// The domain's base URL, or `api-base`, without a trailing slash.
        api_base: String,
    },
    /// Telegram's Bot API: updates by `getUpdates` long polling, messages by `sendMessage`.
    Telegram {
        token_env: String,
        api_base: String,
        poll: PollTiming,
        allowed_updates: Vec<String>,
        /// Delete a webhook that blocks `getUpdates` (409), rather than exit 78 naming it.
        delete_webhook: bool,
    },
    /// Weixin through Tencent's iLink bot API: `ilink/bot/getupdates` long polling and
    /// `sendmessage`, with the token `hermes-svc login weixin` stored in `login_file`.
    Weixin {
        api_base: String,
        poll: PollTiming,
        login_file: std::path::PathBuf,
    },
}

impl Protocol {
    pub fn kind(&self) -> &'static str {
        match self {
            Protocol::QqBot { .. } => "qqbot",
            Protocol::Discord { .. } => "discord",
            Protocol::WebSocket { .. } => "websocket",
            Protocol::Feishu { .. } => "feishu",
            Protocol::Telegram { .. } => "telegram",
            Protocol::Weixin { .. } => "weixin",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawAdapter {
    pub(super) name: Spanned<String>,
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
    send_frame: Option<Spanned<String>>,
    domain: Option<Spanned<String>>,
    poll_timeout: Option<Spanned<String>>,
    poll_grace: Option<Spanned<String>>,
    allowed_updates: Option<Spanned<Vec<String>>>,
    delete_webhook: Option<bool>,
    connect_timeout: Option<Spanned<String>>,
    hello_timeout: Option<Spanned<String>>,
    ack_timeout: Option<Spanned<String>>,
    backoff_min: Option<Spanned<String>>,
    backoff_max: Option<Spanned<String>>,
    stable_after: Option<Spanned<String>>,
}

const QQ_API_BASE: &str = "https://api.sgroup.qq.com";
const QQ_TOKEN_URL: &str = "https://bots.qq.com/app/getAppAccessToken";
const DISCORD_API_BASE: &str = "https://discord.com/api/v10";

pub(super) fn adapter(
    ctx: &Ctx,
    spanned: &Spanned<RawAdapter>,
) -> Result<AdapterSpec, ConfigError> {
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
        format!("adapter {name:?} (kind {kind}): missing {key}; add {key} = {example}")
    };
    let required = |value: &Option<String>, key: &str, example: &str| match value {
        Some(v) => Ok(v.clone()),
        None => ctx.err::<String>(span.clone(), missing(key, example)),
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
        ("send-frame", a.send_frame.is_some()),
        ("domain", a.domain.is_some()),
        ("poll-timeout", a.poll_timeout.is_some()),
        ("poll-grace", a.poll_grace.is_some()),
        ("allowed-updates", a.allowed_updates.is_some()),
        ("delete-webhook", a.delete_webhook.is_some()),
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
        "websocket" => &[
            "url",
            "token-env",
            "ping-interval",
            "app-ping",
            "send-frame",
        ],
        "feishu" => &["domain", "app-id", "secret-env", "api-base"],
        "telegram" => &[
            "token-env",
            "api-base",
            "poll-timeout",
            "poll-grace",
            "allowed-updates",
            "delete-webhook",
        ],
        "weixin" => &["api-base", "poll-timeout", "poll-grace"],
        other => {
            return ctx.err(
                a.kind.span(),
                format!(
                    "adapter {name:?}: unknown kind {other:?}; use qqbot, discord, feishu, \
                     telegram, weixin or websocket"
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
        if crate::systemd::escape::env_name(env).is_err() {
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
    let raw_poll = RawPoll {
        poll_timeout: &a.poll_timeout,
        poll_grace: &a.poll_grace,
    };
    let protocol = match kind {
        "qqbot" => Protocol::QqBot {
            app_id: qq_app_id(
                ctx,
                span.clone(),
                &name,
                required(&a.app_id, "app-id", "\"<your bot's AppID>\"")?,
            )?,
            secret_env: required(
                &a.secret_env,
                "secret-env",
                "\"QQ_BOT_SECRET\" (a variable in the profile's .env)",
            )?,
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
            token_env: required(
                &a.token_env,
                "token-env",
                "\"DISCORD_BOT_TOKEN\" (a variable in the profile's .env)",
            )?,
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
        "feishu" => {
            let domain = feishu::domain(ctx, &name, &a.domain)?;
            Protocol::Feishu {
                domain,
                app_id: feishu::app_id(ctx, span.clone(), &name, &a.app_id)?,
                secret_env: required(
                    &a.secret_env,
                    "secret-env",
                    "\"FEISHU_APP_SECRET\" (a variable in the profile's .env holding the App \
                     Secret)",
                )?,
                api_base: opt_url("api-base", &a.api_base, "https://", "http://")?.map_or_else(
                    || domain.base().to_owned(),
                    |u| u.trim_end_matches('/').to_owned(),
                ),
            }
        }
        "telegram" => Protocol::Telegram {
            token_env: required(
                &a.token_env,
                "token-env",
                "\"TELEGRAM_BOT_TOKEN\" (a variable in the profile's .env holding the token \
                 @BotFather gave)",
            )?,
            api_base: opt_url("api-base", &a.api_base, "https://", "http://")?.map_or_else(
                || long_poll::TELEGRAM_API_BASE.to_owned(),
                |u| u.trim_end_matches('/').to_owned(),
            ),
            poll: long_poll::timing(ctx, &name, raw_poll, long_poll::TELEGRAM_POLL_TIMEOUT)?,
            allowed_updates: long_poll::allowed_updates(ctx, &name, &a.allowed_updates)?,
            delete_webhook: a.delete_webhook.unwrap_or(false),
        },
        "weixin" => Protocol::Weixin {
            api_base: opt_url("api-base", &a.api_base, "https://", "http://")?.map_or_else(
                || long_poll::WEIXIN_API_BASE.to_owned(),
                |u| u.trim_end_matches('/').to_owned(),
            ),
            poll: long_poll::timing(ctx, &name, raw_poll, long_poll::WEIXIN_POLL_TIMEOUT)?,
            login_file: long_poll::weixin_login_file(ctx.path, &name),
        },
        _ => Protocol::WebSocket {
            url: match &a.url {
                Some(u) => ctx.url("url", u, "wss://", "ws://")?,
                None => return ctx.err(span.clone(), missing("url", "\"wss://example.com/ws\"")),
            },
            token_env: a.token_env.clone(),
            ping_interval: ctx.opt_duration(
                "ping-interval",
                &a.ping_interval,
                Duration::from_secs(15),
            )?,
            app_ping: a.app_ping.clone(),
            send_frame: match &a.send_frame {
                Some(raw) => Some(SendFrame::parse(raw.get_ref()).or_else(|e| {
                    ctx.err(raw.span(), format!("adapter {name:?}: send-frame {e}"))
                })?),
                None => None,
            },
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

/// A QQ bot's AppID is a number (102000000): one that holds anything else, a newline above
/// all, would go into every token request and identity hash as it is.
fn qq_app_id(
    ctx: &Ctx,
    span: std::ops::Range<usize>,
    name: &str,
    id: String,
) -> Result<String, ConfigError> {
    if (1..=32).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(id);
    }
    ctx.err(
        span,
        format!(
            "adapter {name:?}: app-id ({} characters, not shown) is not a QQ AppID, which is a \
             number; copy the AppID from the bot's page on q.qq.com",
            id.chars().count()
        ),
    )
}

impl AdapterSpec {
    /// The env var holding this adapter's credential, if it has one.
    pub(crate) fn credential_env(&self) -> Option<&str> {
        match &self.protocol {
            Protocol::QqBot { secret_env, .. } => Some(secret_env),
            Protocol::Discord { token_env, .. } => Some(token_env),
            Protocol::WebSocket { token_env, .. } => token_env.as_deref(),
            Protocol::Feishu { secret_env, .. } => Some(secret_env),
            Protocol::Telegram { token_env, .. } => Some(token_env),
            Protocol::Weixin { .. } => None,
        }
    }

    /// Read the credential: first the manager's credential of that name
    /// (`$CREDENTIALS_DIRECTORY/NAME`, from `install --credential`), then the environment
    /// (which the unit fills from `.env`, and a foreground run from `.env` too).
    pub(crate) fn credential(
        &self,
        config_path: &Path,
        env_file: &Path,
    ) -> Result<Option<Secret>, ConfigError> {
        if let Protocol::Weixin { login_file, .. } = &self.protocol {
            return match super::WeixinLogin::read(login_file) {
                Ok(login) => Ok(Some(login.token())),
                Err(e) => Err(ConfigError::Secret {
                    path: config_path.to_owned(),
                    adapter: self.name.clone(),
                    message: crate::error_chain::one_line(&e),
                }),
            };
        }
        let Some(var) = self.credential_env() else {
            return Ok(None);
        };
        if let Some(secret) =
            super::secret::from_credentials(var).map_err(|message| ConfigError::Secret {
                path: config_path.to_owned(),
                adapter: self.name.clone(),
                message,
            })?
        {
            return Ok(Some(secret));
        }
        match std::env::var(var) {
            Ok(v) if !v.is_empty() => Ok(Some(Secret::new(v))),
            _ => Err(ConfigError::Secret {
                path: config_path.to_owned(),
                adapter: self.name.clone(),
                message: match std::env::var_os("CREDENTIALS_DIRECTORY") {
                    Some(dir) => format!(
                        "{var} is not set, and the service manager passed no credential of that \
                         name (in {}); add {var}=... to {} (mode 0600), or install with \
                         --credential {var}=PATH",
                        std::path::Path::new(&dir).display(),
                        env_file.display()
                    ),
                    None => format!(
                        "{var} is not set; add {var}=... to {} (mode 0600)",
                        env_file.display()
                    ),
                },
            }),
        }
    }

    /// The identity two gateways must not share: the platform plus the bot's credential.
    /// Only its hash ever leaves the process. A Feishu app's events go to whichever
    /// connection the platform picks, so its identity is the app id alone: two profiles with
    /// one app, whatever secret each holds, would each lose the events the other took.
    pub(crate) fn identity(&self, secret: Option<&Secret>) -> String {
        let s = secret.map(Secret::expose).unwrap_or("");
        match &self.protocol {
            Protocol::QqBot { app_id, .. } => format!("qqbot:{app_id}:{s}"),
            Protocol::Discord { .. } => format!("discord:{s}"),
            Protocol::WebSocket { url, .. } => format!("websocket:{url}:{s}"),
            Protocol::Feishu { app_id, .. } => format!("feishu:{app_id}"),
            Protocol::Telegram { .. } => format!("telegram:{s}"),
            Protocol::Weixin { .. } => format!("weixin:{s}"),
        }
    }
}
