//! The `[[adapter]]` section: the keys every adapter has (its name, its kind, its timing),
//! with the rest handed to its platform's parser, so that a key of another kind, a missing
//! credential variable or a plain URL off loopback is an error naming its line, not a bot
//! that quietly never connects.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::de::DeValue;
use toml::Spanned;

use super::access::{access, RawAccess};
use super::keys::AdapterKeys;
use super::value::{valid_name, Ctx};
use super::{AccessRules, ConfigError, Platforms, Secret};

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

/// One adapter, validated: its platform's settings are `P`'s (the registry's).
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSpec<P> {
    pub name: String,
    pub timing: Timing,
    /// Its own access rules (`[adapter.access]`), over the profile's `[access]`.
    pub access: AccessRules,
    pub protocol: P,
}

/// The keys every adapter has. Its platform's keys are read by the platform.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct RawAdapter {
    pub(super) name: Spanned<String>,
    kind: Spanned<String>,
    connect_timeout: Option<Spanned<String>>,
    hello_timeout: Option<Spanned<String>>,
    ack_timeout: Option<Spanned<String>>,
    backoff_min: Option<Spanned<String>>,
    backoff_max: Option<Spanned<String>>,
    stable_after: Option<Spanned<String>>,
    access: Option<RawAccess>,
}

/// The keys of [`RawAdapter`], taken out of the table before the platform reads the rest.
const COMMON_KEYS: &[&str] = &[
    "name",
    "kind",
    "connect-timeout",
    "hello-timeout",
    "ack-timeout",
    "backoff-min",
    "backoff-max",
    "stable-after",
    "access",
];

/// One `[[adapter]]`: `spanned` is its common keys, `table` the same table as written.
pub(super) fn adapter<P: Platforms>(
    ctx: &Ctx,
    spanned: &Spanned<RawAdapter>,
    mut table: Spanned<DeValue<'_>>,
) -> Result<AdapterSpec<P>, ConfigError> {
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
    let Some(allowed) = P::keys(kind) else {
        return ctx.err(
            a.kind.span(),
            format!(
                "adapter {name:?}: unknown kind {kind:?}; use {}",
                one_of(P::kinds())
            ),
        );
    };
    if let DeValue::Table(t) = table.get_mut() {
        *t = t
            .iter()
            .filter(|(k, _)| !COMMON_KEYS.contains(&k.get_ref().as_ref()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // Keys that belong to other kinds are errors, not silently ignored.
        if let Some((key, _)) = t
            .iter()
            .find(|(k, _)| !allowed.contains(&k.get_ref().as_ref()))
        {
            let key = key.get_ref().as_ref();
            let any_kind = P::kinds()
                .iter()
                .any(|k| P::keys(k).is_some_and(|keys| keys.contains(&key)));
            return if any_kind {
                ctx.err(
                    span,
                    format!("adapter {name:?}: {key} does not apply to kind {kind}; remove it"),
                )
            } else {
                let mut known: Vec<&str> = COMMON_KEYS.to_vec();
                known.extend(allowed);
                ctx.err(
                    span,
                    format!(
                        "adapter {name:?}: unknown field `{key}`; an adapter of kind {kind} takes {}",
                        known.join(", ")
                    ),
                )
            };
        }
    }
    let timing = timing(ctx, &name, a, span.clone())?;
    let keys = AdapterKeys {
        ctx,
        name: &name,
        kind,
        span,
        table,
    };
    let protocol = P::parse(kind, &keys)?;
    let access = match &a.access {
        Some(raw) => access(ctx, &format!("adapter {name:?}: [adapter.access]"), raw)?,
        None => AccessRules::default(),
    };
    Ok(AdapterSpec {
        name,
        timing,
        access,
        protocol,
    })
}

/// "a, b or c".
fn one_of(kinds: &[&str]) -> String {
    match kinds {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

fn timing(
    ctx: &Ctx,
    name: &str,
    a: &RawAdapter,
    span: std::ops::Range<usize>,
) -> Result<Timing, ConfigError> {
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
    Ok(timing)
}

impl<P: Platforms> AdapterSpec<P> {
    /// The env vars holding this adapter's credentials, if it has any.
    pub(crate) fn credential_envs(&self) -> Vec<&str> {
        self.protocol.credential_envs()
    }

    /// Read the credentials: a platform's stored one (a login file), or each variable from
    /// the manager's credential of that name (`$CREDENTIALS_DIRECTORY/NAME`, from `install
    /// --credential`), then `env` (the process's environment, which the unit fills from
    /// `.env`, and a foreground run from `.env` too; a reload's view of a renewed `.env`).
    pub(crate) fn credentials_with(
        &self,
        config_path: &Path,
        env_file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<Secret>, ConfigError> {
        let error = |message: String| ConfigError::Secret {
            path: config_path.to_owned(),
            adapter: self.name.clone(),
            message,
        };
        if let Some(stored) = self.protocol.stored_credential() {
            return stored.map(|s| vec![s]).map_err(error);
        }
        let mut secrets = vec![];
        for var in self.credential_envs() {
            if let Some(secret) = super::secret::from_credentials(var).map_err(error)? {
                secrets.push(secret);
                continue;
            }
            match env(var) {
                Some(v) if !v.is_empty() => secrets.push(Secret::new(v)),
                _ => {
                    return Err(error(match std::env::var_os("CREDENTIALS_DIRECTORY") {
                        Some(dir) => format!(
                            "{var} is not set, and the service manager passed no credential of \
                             that name (in {}); add {var}=... to {} (mode 0600), or install \
                             with --credential {var}=PATH",
                            std::path::Path::new(&dir).display(),
                            env_file.display()
                        ),
                        None => format!(
                            "{var} is not set; add {var}=... to {} (mode 0600)",
                            env_file.display()
                        ),
                    }))
                }
            }
        }
        Ok(secrets)
    }

    /// The identity two gateways must not share: the platform plus the bot's credentials.
    /// Only its hash ever leaves the process.
    pub(crate) fn identity(&self, secrets: &[Secret]) -> String {
        self.protocol.identity(secrets)
    }
}
