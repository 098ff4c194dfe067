//! `gateway.toml`: the adapters and cron jobs of one profile.
//!
//! Parsing is strict (unknown keys are errors) and every error names the file, the line and
//! the fix, because a typo that is silently ignored is a bot that silently does nothing.
//! Secrets are never in this file: adapters name environment variables, resolved from the
//! profile's `.env` at run time.
//!
//! One file per section (`gateway`, `adapter`, `cron`); this one reads the file and hands each
//! section to its parser.

mod access;
mod adapter;
mod agent;
mod cluster;
mod cron;
mod error;
mod gateway;
mod keys;
mod platforms;
mod poll;
mod secret;
mod value;

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use toml::de::DeValue;
use toml::Spanned;

use crate::bounded_read::{self, Owner};

pub use access::{AccessRules, Budget, UnknownDm, DEFAULT_BUDGET};
pub use adapter::{AdapterSpec, Timing};
pub use agent::{AgentSpec, Bridge, Busy, OpenAiSpec, DEFAULT_RELAY_PORT};
pub use cluster::{ClusterSpec, ClusterTls};
pub use cron::{CronSchedule, CronSpec, Deliver};
pub use error::ConfigError;
pub use gateway::GatewayConfig;
pub use keys::{AdapterKeys, Intent};
pub use platforms::Platforms;
pub use poll::PollTiming;
pub use secret::Secret;
/// The rule adapter and cron names follow, for the commands that take one (`logs --adapter`).
pub(crate) use value::valid_name;
pub use value::MAX_DURATION;

use access::{access, RawAccess};
use adapter::{adapter, RawAdapter};
use agent::{agent, RawAgent};
use cluster::{cluster, RawCluster};
use cron::{cron, RawCron};
use gateway::{gateway, RawGateway};
use value::Ctx;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawFile {
    #[serde(default)]
    gateway: RawGateway,
    #[serde(default)]
    adapter: Vec<Spanned<RawAdapter>>,
    #[serde(default)]
    cron: Vec<Spanned<RawCron>>,
    agent: Option<Spanned<RawAgent>>,
    access: Option<RawAccess>,
    cluster: Option<Spanned<RawCluster>>,
}

/// Load `path` for the gateway, which acts on it: the file must belong to the user the
/// gateway runs as, or to root. A missing file is a valid, empty configuration (no adapters,
/// no cron).
pub(crate) fn load<P: Platforms>(path: &Path) -> Result<GatewayConfig<P>, ConfigError> {
    load_with(path, Owner::SelfOrRoot)
}

/// Load `path`, accepting files of `owner`. The read is bounded ([`bounded_read`]): a FIFO,
/// a symlink or a file over [`bounded_read::LIMIT`] is an error at once, never a hang or a
/// gigabyte of memory.
pub(crate) fn load_with<P: Platforms>(
    path: &Path,
    owner: Owner,
) -> Result<GatewayConfig<P>, ConfigError> {
    match bounded_read::read_to_string(path, bounded_read::LIMIT, owner)? {
        Some(text) => parse(path, &text),
        None => Ok(GatewayConfig::default()),
    }
}

/// Parse and validate `text`, read from `path` (used in messages), with the platforms `P`.
pub fn parse<P: Platforms>(path: &Path, text: &str) -> Result<GatewayConfig<P>, ConfigError> {
    let ctx = Ctx { path, text };
    let invalid = |e: toml::de::Error| ConfigError::Invalid {
        path: path.to_owned(),
        line: e.span().map_or(1, |s| ctx.line(s.start)),
        message: e.message().trim().replace('\n', " "),
    };
    // Parsed once, with every value's place: the sections read it through serde, and each
    // adapter's platform reads its own keys from the same tables.
    let doc = toml::de::DeTable::parse(text).map_err(invalid)?;
    let tables: Vec<Spanned<DeValue>> = match doc.get_ref().get("adapter").map(Spanned::get_ref) {
        Some(DeValue::Array(items)) => items.iter().cloned().collect(),
        _ => vec![],
    };
    let raw = RawFile::deserialize(toml::de::Deserializer::from(doc)).map_err(invalid)?;
    let mut config = gateway(&ctx, &raw.gateway)?;
    config.agent = raw.agent.as_ref().map(|a| agent(&ctx, a)).transpose()?;
    if let Some(a) = &raw.access {
        config.access = access(&ctx, "[access]", a)?;
    }
    config.cluster = raw.cluster.as_ref().map(|c| cluster(&ctx, c)).transpose()?;
    let mut names = BTreeSet::new();
    for (a, table) in raw.adapter.iter().zip(tables) {
        let spec = adapter(&ctx, a, table)?;
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
    if let (Some(a), Some(raw_agent)) = (&config.agent, &raw.agent) {
        agent::platform_ids_fit(&ctx, raw_agent, a, &config.adapters)?;
    }
    let mut cron_names = BTreeSet::new();
    for c in &raw.cron {
        let spec = cron(&ctx, c, &config.adapters)?;
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
