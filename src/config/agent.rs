//! The `[agent]` section: the agent behind the gateway, and how its messages reach it.
//!
//! Two ways, both spoken by the Hermes agent: `hermes-relay`, where the gateway serves the
//! connector side of Hermes's Relay on a loopback port and Hermes dials in; and `openai`, where
//! the gateway calls an OpenAI-compatible `POST /v1/chat/completions` (Hermes's API server, or
//! any other) once per message. Without the section, events wait in the spool for whatever
//! reads the local API.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::value::Ctx;
use super::{AdapterSpec, ConfigError, Platforms};

/// The agent and the bridge to it.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSpec {
    pub bridge: Bridge,
    /// The longest a turn may take: after it, the turn is given up and the chat's next message
    /// goes to the agent.
    pub turn_timeout: Duration,
    /// doctor warns when the agent has taken no message for this long while some wait.
    pub idle_alarm: Duration,
    /// `hermes-relay`: speak each platform's own name and ids to Hermes, as its own adapter for
    /// the platform did, so that a chat Hermes's own gateway held goes on in the same session
    /// (`platform-ids = true`); else every chat is `relay` and `ADAPTER/TARGET`.
    pub platform_ids: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Bridge {
    /// The connector side of Hermes's Relay, on `127.0.0.1:port`.
    HermesRelay { port: u16 },
    /// An OpenAI-compatible chat completions endpoint.
    OpenAi(OpenAiSpec),
}

impl Bridge {
    /// `kind = "..."`.
    pub fn kind(&self) -> &'static str {
        match self {
            Bridge::HermesRelay { .. } => "hermes-relay",
            Bridge::OpenAi(_) => "openai",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiSpec {
    /// The base URL, up to and including `/v1`.
    pub url: String,
    /// The `.env` variable holding the key, sent as `Authorization: Bearer`; none, no header.
    pub key_env: Option<String>,
    pub model: String,
    /// What happens to messages that come while a chat's turn runs.
    pub busy: Busy,
    /// Said in the chat when a turn fails or times out; by default nothing is.
    pub failure_notice: Option<String>,
}

/// Messages to a chat whose turn is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Busy {
    /// Each gets its own turn, in order.
    Queue,
    /// Only the latest waiting one gets a turn; the ones it overtook are marked skipped.
    Latest,
}

/// The port `hermes-relay` listens on unless told.
pub const DEFAULT_RELAY_PORT: u16 = 8765;
const DEFAULT_IDLE_ALARM: Duration = Duration::from_secs(15 * 60);
const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(10 * 60);

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawAgent {
    kind: Spanned<String>,
    port: Option<Spanned<i64>>,
    url: Option<Spanned<String>>,
    key_env: Option<Spanned<String>>,
    model: Option<String>,
    busy: Option<Busy>,
    turn_timeout: Option<Spanned<String>>,
    failure_notice: Option<String>,
    idle_alarm: Option<Spanned<String>>,
    platform_ids: Option<Spanned<bool>>,
}

pub(super) fn agent(ctx: &Ctx, raw: &Spanned<RawAgent>) -> Result<AgentSpec, ConfigError> {
    let r = raw.get_ref();
    let only_for = |key: &str, present: bool, kind: &str| -> Result<(), ConfigError> {
        if present {
            return ctx.err(
                r.kind.span(),
                format!(
                    "[agent] {key} is a key of kind = \"{kind}\"; remove it or change the kind"
                ),
            );
        }
        Ok(())
    };
    let bridge = match r.kind.get_ref().as_str() {
        "hermes-relay" => {
            for (key, present) in [
                ("url", r.url.is_some()),
                ("key-env", r.key_env.is_some()),
                ("model", r.model.is_some()),
                ("busy", r.busy.is_some()),
                ("failure-notice", r.failure_notice.is_some()),
            ] {
                only_for(key, present, "openai")?;
            }
            Bridge::HermesRelay {
                port: port(ctx, r.port.as_ref())?,
            }
        }
        "openai" => {
            only_for("port", r.port.is_some(), "hermes-relay")?;
            only_for("platform-ids", r.platform_ids.is_some(), "hermes-relay")?;
            let Some(url) = &r.url else {
                return ctx.err(
                    raw.span(),
                    "[agent] kind = \"openai\" needs url, the endpoint's base URL up to /v1 \
                     (Hermes's API server: url = \"http://127.0.0.1:8642/v1\")",
                );
            };
            let key_env = r.key_env.as_ref().map(|k| k.get_ref().clone());
            if let (Some(k), Some(raw_key)) = (&key_env, &r.key_env) {
                if !crate::env_file::is_name(k) {
                    return ctx.err(
                        raw_key.span(),
                        format!(
                            "[agent] key-env must name a variable in the profile's .env (like \
                             \"API_SERVER_KEY\"), not hold the key itself; the value given ({} \
                             characters, not shown) is not a variable name",
                            k.chars().count()
                        ),
                    );
                }
            }
            Bridge::OpenAi(OpenAiSpec {
                url: ctx
                    .url("url", url, "https://", "http://")?
                    .trim_end_matches('/')
                    .to_owned(),
                key_env,
                model: r.model.clone().unwrap_or_else(|| "hermes-agent".into()),
                busy: r.busy.unwrap_or(Busy::Queue),
                failure_notice: r.failure_notice.clone().filter(|n| !n.trim().is_empty()),
            })
        }
        other => {
            return ctx.err(
                r.kind.span(),
                format!(
                    "[agent] kind = {other:?} is not a kind of agent bridge; use \
                     \"hermes-relay\" (Hermes dials in) or \"openai\" (an OpenAI-compatible API)"
                ),
            )
        }
    };
    Ok(AgentSpec {
        bridge,
        turn_timeout: ctx.opt_duration("turn-timeout", &r.turn_timeout, DEFAULT_TURN_TIMEOUT)?,
        idle_alarm: ctx.opt_duration("idle-alarm", &r.idle_alarm, DEFAULT_IDLE_ALARM)?,
        platform_ids: r.platform_ids.as_ref().is_some_and(|p| *p.get_ref()),
    })
}

/// With `platform-ids`, a chat is named to Hermes by its platform and the platform's own id
/// alone: two adapters of one kind could have chats of one id (two bots of one platform in
/// one group), which would be one Hermes session, and an answer could not say which bot posts it.
pub(super) fn platform_ids_fit<P: Platforms>(
    ctx: &Ctx,
    raw: &Spanned<RawAgent>,
    agent: &AgentSpec,
    adapters: &[AdapterSpec<P>],
) -> Result<(), ConfigError> {
    if !agent.platform_ids {
        return Ok(());
    }
    let mut seen: Vec<(&str, &str)> = vec![];
    for a in adapters {
        let kind = a.protocol.kind();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == kind) {
            let span = raw
                .get_ref()
                .platform_ids
                .as_ref()
                .map_or(raw.span(), Spanned::span);
            return ctx.err(
                span,
                format!(
                    "[agent] platform-ids = true names each chat to Hermes by its platform and \
                     the platform's own id, and adapters {first:?} and {:?} are both {kind}: \
                     their chats could share an id; keep one {kind} adapter in this profile, \
                     or set platform-ids = false",
                    a.name
                ),
            );
        }
        seen.push((kind, &a.name));
    }
    Ok(())
}

fn port(ctx: &Ctx, raw: Option<&Spanned<i64>>) -> Result<u16, ConfigError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_RELAY_PORT);
    };
    match u16::try_from(*raw.get_ref()) {
        Ok(p) if p >= 1024 => Ok(p),
        _ => ctx.err(
            raw.span(),
            format!(
                "[agent] port = {} is not a port the gateway may listen on; use 1024 to 65535 \
                 (the default is {DEFAULT_RELAY_PORT})",
                raw.get_ref()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn parse(text: &str) -> Result<super::super::GatewayConfig<crate::platform::Protocol>, String> {
        super::super::parse::<crate::platform::Protocol>(Path::new("/p/gateway.toml"), text)
            .map_err(|e| e.to_string())
    }

    const TG: &str = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"T\"\n\n";
    const TG2: &str = "[[adapter]]\nname = \"tg2\"\nkind = \"telegram\"\ntoken-env = \"T2\"\n\n";

    #[test]
    fn platform_ids_is_off_unless_set_and_a_key_of_the_relay() {
        let relay = "[agent]\nkind = \"hermes-relay\"\n";
        assert!(!parse(relay).unwrap().agent.unwrap().platform_ids);
        let on = parse(&format!("{TG}{relay}platform-ids = true\n")).unwrap();
        assert!(on.agent.unwrap().platform_ids);
        let e = parse(
            "[agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:1/v1\"\nplatform-ids = true\n",
        )
        .unwrap_err();
        assert!(
            e.contains("platform-ids is a key of kind = \"hermes-relay\""),
            "{e}"
        );
    }

    #[test]
    fn two_adapters_of_one_kind_are_refused_with_platform_ids() {
        let relay = "[agent]\nkind = \"hermes-relay\"\nplatform-ids = true\n";
        let e = parse(&format!("{TG}{TG2}{relay}")).unwrap_err();
        assert!(e.contains("/p/gateway.toml"), "{e}");
        assert!(e.contains("gateway.toml:13:"), "the key's line: {e}");
        assert!(e.contains("\"tg\" and \"tg2\" are both telegram"), "{e}");
        assert!(e.contains("platform-ids = false"), "the fix: {e}");
        // Without it, as before.
        assert!(parse(&format!("{TG}{TG2}[agent]\nkind = \"hermes-relay\"\n")).is_ok());
    }
}
