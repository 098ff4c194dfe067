//! `gateway.toml`: the adapters and cron jobs of one profile.
//!
//! Parsing is strict (unknown keys are errors) and every error names the file, the line and
//! the fix, because a typo that is silently ignored is a bot that silently does nothing.
//! Secrets are never in this file: adapters name environment variables, resolved from the
//! profile's `.env` at run time.
//!
//! One file per section (`gateway`, `adapter`, `cron`); this one reads the file and hands each
//! section to its parser.

mod adapter;
mod cron;
mod error;
mod feishu;
mod gateway;
mod intents;
mod long_poll;
mod secret;
mod send_frame;
mod value;
mod weixin_login;

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::bounded_read::{self, Owner};

pub use adapter::{AdapterSpec, Protocol, Timing};
pub use cron::{CronSchedule, CronSpec, Deliver};
pub use error::ConfigError;
pub use feishu::FeishuDomain;
pub use gateway::GatewayConfig;
pub use intents::qq_gated_intents;
pub use long_poll::{weixin_login_file, PollTiming};
pub use secret::Secret;
pub use send_frame::{Fields, SendFrame, SendFrameError};
/// The rule adapter and cron names follow, for the commands that take one (`logs --adapter`).
pub(crate) use value::valid_name;
pub use value::MAX_DURATION;
pub use weixin_login::{LoginFileError, WeixinLogin};

use adapter::{adapter, RawAdapter};
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
}

/// Load `path` for the gateway, which acts on it: the file must belong to the user the
/// gateway runs as, or to root. A missing file is a valid, empty configuration (no adapters,
/// no cron).
pub(crate) fn load(path: &Path) -> Result<GatewayConfig, ConfigError> {
    load_with(path, Owner::SelfOrRoot)
}

/// Load `path`, accepting files of `owner`. The read is bounded ([`bounded_read`]): a FIFO,
/// a symlink or a file over [`bounded_read::LIMIT`] is an error at once, never a hang or a
/// gigabyte of memory.
pub(crate) fn load_with(path: &Path, owner: Owner) -> Result<GatewayConfig, ConfigError> {
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
    let mut config = gateway(&ctx, &raw.gateway)?;
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

#[cfg(test)]
mod tests;
